/**
 * The messages of each language, one JSON file per namespace (`en/chat.json` is the
 * `chat.*` keys): a page's strings live in its own file, so pages grow without touching
 * each other's. The built-in node types' and tools' texts (`nodes.json`, `builtinTools.json`)
 * are a catalogue of their own (lib/builtinCatalogue.ts), looked up by id, not vue-i18n
 * messages: they are full of `{`, `|` and `@` that vue-i18n would read as syntax.
 */
type Messages = Record<string, unknown>

function byNamespace(files: Record<string, Messages>): Messages {
  const out: Messages = {}
  for (const [path, messages] of Object.entries(files)) {
    const name = path.slice(path.lastIndexOf('/') + 1, -'.json'.length)
    out[name] = messages
  }
  return out
}

export const en = byNamespace(
  import.meta.glob<Messages>(['./en/*.json', '!./en/nodes.json', '!./en/builtinTools.json', '!./en/builtinWorkflows.json'], {
    eager: true,
    import: 'default',
  }),
)
export const zh = byNamespace(
  import.meta.glob<Messages>(['./zh/*.json', '!./zh/nodes.json', '!./zh/builtinTools.json', '!./zh/builtinWorkflows.json'], {
    eager: true,
    import: 'default',
  }),
)
