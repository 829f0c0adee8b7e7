// The conformance suite imports fs.globSync (Node >= 22) at load time, for its
// tier-check command only. On Node 20 that import fails before any scenario runs,
// so resolve the suite's "fs" to fs plus a globSync that says what it needs.
import { register } from "node:module";

register("./node20-fs-loader.mjs", import.meta.url);
