import fs from "node:fs";

export * from "node:fs";
export default fs;
export const globSync =
  fs.globSync ??
  (() => {
    throw new Error("fs.globSync needs Node 22 (used by the conformance tier-check command only)");
  });
