export async function resolve(specifier, context, next) {
  const fromSuite = context.parentURL?.includes("/@modelcontextprotocol/conformance/");
  if (fromSuite && (specifier === "fs" || specifier === "node:fs")) {
    return { url: new URL("./node20-fs.mjs", import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
