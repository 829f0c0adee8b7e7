/**
 * The messages of each language, one JSON file per namespace (`en/chat.json` is the
 * `chat.*` keys): a page's strings live in its own file, so pages grow without touching
 * each other's.
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
  import.meta.glob<Messages>('./en/*.json', { eager: true, import: 'default' }),
)
export const zh = byNamespace(
  import.meta.glob<Messages>('./zh/*.json', { eager: true, import: 'default' }),
)
