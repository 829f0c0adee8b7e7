// The author's own resources: new entities (their path from kind and name, aliases from a
// comma list), the book's meta documents, plot-thread chapters, and which part of the page
// shows a resource found by search.
import type { BookTree, ResNode } from '../api/writing'

export const ENTITY_KINDS = ['character', 'location', 'plot-thread'] as const
export type EntityKind = (typeof ENTITY_KINDS)[number]

export function isEntityKind(kind: string): kind is EntityKind {
  return (ENTITY_KINDS as readonly string[]).includes(kind)
}

const FOLDERS: Record<EntityKind, string> = { character: 'characters', location: 'locations', 'plot-thread': 'plot-threads' }

/** A path segment for a name, as the server makes one (uris.slug): lower case, spaces and
 * other separators as hyphens, letters of every script kept (林枫 stays 林枫). */
export function entitySlug(name: string): string {
  const text = name
    .normalize('NFKC')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_.-]+/gu, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
  return text || 'untitled'
}

export function entityPath(kind: EntityKind, title: string): string {
  return `/entities/${FOLDERS[kind]}/${entitySlug(title)}`
}

/** Aliases typed as a comma list (Latin or CJK commas), blanks and repeats dropped. */
export function parseAliases(text: string): string[] {
  const out: string[] = []
  for (const part of text.split(/[,，、]/)) {
    const alias = part.trim()
    if (alias && !out.includes(alias)) out.push(alias)
  }
  return out
}

/** A chapter number typed in a field: a whole number ≥ `min` (1, or 0 where "from the start
 * of the book" is meant), or null when left blank. A number input's v-model gives a number
 * (or '' when empty). */
export function chapterNumber(raw: string | number | null | undefined, min = 1): number | null | 'invalid' {
  const text = String(raw ?? '').trim()
  if (!text) return null
  const n = Number(text)
  return Number.isInteger(n) && n >= min ? n : 'invalid'
}

export interface ThreadAttrs {
  planted: number | null
  due: number | null
  paidOff: number | null
}

export function threadAttrs(attrs: Record<string, unknown> | undefined): ThreadAttrs {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null)
  return { planted: num(attrs?.planted), due: num(attrs?.due), paidOff: num(attrs?.paidOff) }
}

/** Kinds whose text the author writes (the rest is the manuscript or curated). */
export const AUTHOR_KINDS: readonly string[] = ['meta', ...ENTITY_KINDS]

/** The level an author's text goes to: a meta document's full text, an entity's overview. */
export function authorLevel(kind: string): 'L1' | 'L2' {
  return kind === 'meta' ? 'L2' : 'L1'
}

/** The three meta documents every book has a place for, in this order. */
export const META_DOCS = [
  { path: '/meta/outline', key: 'outline' },
  { path: '/meta/style-guide', key: 'styleGuide' },
  { path: '/meta/world-rules', key: 'worldRules' },
] as const

export interface MetaItem extends ResNode {
  /** Not written yet: opening it starts an empty document. */
  missing: boolean
}

/** The book's meta resources: the three standard ones (written or not) first, then any other. */
export function metaItems(meta: readonly ResNode[], title: (key: string) => string): MetaItem[] {
  const byPath = new Map(meta.map((m) => [m.path, m]))
  const standard = META_DOCS.map(({ path, key }): MetaItem => {
    const found = byPath.get(path)
    return found ? { ...found, missing: false } : { path, uri: '', kind: 'meta', title: title(key), missing: true }
  })
  const others = meta.filter((m) => !META_DOCS.some((d) => d.path === m.path)).map((m) => ({ ...m, missing: false }))
  return [...standard, ...others]
}

export type ResourcePlace =
  | { tab: 'meta' | 'entities' | 'profiles'; path: string }
  | { chapter: number }
  | null

/** Where the page shows a resource found by search: a chapter (or a scene's chapter) in
 * the editor, anything else in its tab. */
export function placeOf(tree: BookTree | null, path: string): ResourcePlace {
  if (path.startsWith('/manuscript/')) {
    for (const arc of tree?.manuscript ?? []) {
      for (const chapter of arc.chapters) {
        if (path === chapter.path || path.startsWith(`${chapter.path}/`)) return { chapter: chapter.ordinal }
      }
    }
    return null
  }
  const top = path.split('/')[1]
  // Summaries are shown with the meta documents: both describe the book as a whole.
  if (top === 'meta' || top === 'summaries') return { tab: 'meta', path }
  if (top === 'entities' || top === 'profiles') return { tab: top, path }
  return null
}
