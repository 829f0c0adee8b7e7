// The knowledge editor's logic without Vue: entry order, new entries, where errors belong.
import { ApiError } from '../api/client'
import type { Problem } from '../api/types'
import { pathKey, parsePathKey } from './jsonSchema'
import type { SchemaError } from './schemaValidate'

/** A copy of `list` with the item at `from` moved to `to` (both clamped). */
export function moveItem<T>(list: readonly T[], from: number, to: number): T[] {
  const out = [...list]
  if (from < 0 || from >= out.length) return out
  const target = Math.max(0, Math.min(out.length - 1, to))
  const [item] = out.splice(from, 1)
  out.splice(target, 0, item as T)
  return out
}

/** An entry id like the server's (`caiu_` + 32 hex digits). */
export function newEntryId(random: () => number = Math.random): string {
  let hex = ''
  for (let i = 0; i < 32; i++) hex += Math.floor(random() * 16).toString(16)
  return `caiu_${hex}`
}

/** Keywords shown in the entry list: the first few primary keys. */
export function keywordPreview(keywords: unknown, max = 4): string {
  if (!Array.isArray(keywords)) return ''
  const keys = keywords.filter((k): k is string => typeof k === 'string' && k.trim() !== '')
  const shown = keys.slice(0, max).join(', ')
  return keys.length > max ? `${shown}, +${keys.length - max}` : shown
}

export interface FieldErrors {
  /** Errors of the KB itself (not of an entry), keyed by field path. */
  kb: Map<string, string[]>
  /** Errors per entry index, keyed by the field path inside the entry. */
  entries: Map<number, Map<string, string[]>>
}

function add(map: Map<string, string[]>, key: string, message: string): void {
  const list = map.get(key)
  if (list) {
    if (!list.includes(message)) list.push(message)
  } else map.set(key, [message])
}

/** Sort messages by the path they name: `entries[i].a.b` goes to entry i, field `a.b`. */
export function groupErrors(items: readonly { path: (string | number)[]; message: string }[]): FieldErrors {
  const out: FieldErrors = { kb: new Map(), entries: new Map() }
  for (const { path, message } of items) {
    if (path[0] === 'entries' && typeof path[1] === 'number') {
      const index = path[1]
      let entry = out.entries.get(index)
      if (!entry) {
        entry = new Map()
        out.entries.set(index, entry)
      }
      add(entry, pathKey(path.slice(2)), message)
    } else add(out.kb, pathKey(path), message)
  }
  return out
}

/** The server's 422 problems (`entries[1].activation_criteria.trigger_probability`) as errors. */
export function problemsAsErrors(problems: readonly Problem[]): { path: (string | number)[]; message: string }[] {
  return problems.map((p) => ({ path: parsePathKey(p.field), message: p.reason }))
}

/** What went wrong in a request, for one line: the server's problems when it sent some. */
export function failureMessage(exc: unknown): string {
  if (exc instanceof ApiError && exc.problems.length) return exc.problems.map((p) => `${p.field}: ${p.reason}`).join('; ')
  return exc instanceof Error ? exc.message : String(exc)
}

/** The message key and parameters of a schema error, for `t(key, params)`. */
export function schemaErrorMessage(error: SchemaError): { key: string; params: Record<string, string | number> } {
  return { key: `knowledge.validation.${error.code}`, params: error.params }
}

/** Merge two error groupings (client-side validation and the server's answer). */
export function mergeErrors(a: FieldErrors, b: FieldErrors): FieldErrors {
  const out: FieldErrors = { kb: new Map(), entries: new Map() }
  for (const source of [a, b]) {
    for (const [key, messages] of source.kb) for (const m of messages) add(out.kb, key, m)
    for (const [index, fields] of source.entries) {
      let entry = out.entries.get(index)
      if (!entry) {
        entry = new Map()
        out.entries.set(index, entry)
      }
      for (const [key, messages] of fields) for (const m of messages) add(entry, key, m)
    }
  }
  return out
}

/** Placements in prompt order, for grouping activation results. */
export const PLACEMENT_ORDER = [
  'before_character',
  'before_prompt',
  'after_character',
  'after_prompt',
  'system_context',
  'examples_top',
  'examples_bottom',
  'authors_note_top',
  'authors_note_bottom',
  'scratchpad_notes',
  'at_depth',
  'outlet',
] as const

/** Items grouped by `placement`, groups in prompt order, items in their given order. */
export function groupByPlacement<T extends { placement: string }>(items: readonly T[]): { placement: string; items: T[] }[] {
  const groups = new Map<string, T[]>()
  for (const item of items) {
    const list = groups.get(item.placement)
    if (list) list.push(item)
    else groups.set(item.placement, [item])
  }
  const rank = (p: string) => {
    const i = (PLACEMENT_ORDER as readonly string[]).indexOf(p)
    return i < 0 ? PLACEMENT_ORDER.length : i
  }
  return [...groups.entries()]
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([placement, list]) => ({ placement, items: list }))
}
