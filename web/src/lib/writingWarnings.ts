// Role C's warnings as the list shows them: the ones marked intentional stay out of sight
// unless asked for, newest chapter first.
import type { WarningView } from '../api/writing'

export function visibleWarnings(warnings: readonly WarningView[], showIntentional: boolean): WarningView[] {
  return warnings
    .filter((w) => showIntentional || !w.intentional)
    .sort((a, b) => b.chapter - a.chapter || a.id - b.id)
}

export function intentionalCount(warnings: readonly WarningView[]): number {
  return warnings.filter((w) => w.intentional).length
}

type Translate = (key: string, values?: Record<string, unknown>) => string

/** A contradiction's frame and values, as a warning keeps them and Role C's check sends. */
export interface FindingFrame {
  kind: string
  name: string
  attribute: string
  expected: string
  found: string
  since: number
  earlierValue?: string | null
  earlierUntil?: number | null
}

/** A contradiction in the page's language: its frame (another value, a lost body part
 * used, the dead acting) with the book's values quoted. */
export function frameText(f: FindingFrame, t: Translate, tag: string): string {
  const quoted = (text: string) => t('writing.warnings.quoted', { text })
  const number = (n: number) => new Intl.NumberFormat(tag).format(n)
  const values = { name: f.name, attribute: f.attribute, expected: quoted(f.expected), found: quoted(f.found), since: number(f.since) }
  let text = t(`writing.warnings.frame.${f.kind}`, values)
  if (f.earlierValue != null && f.earlierUntil != null) {
    text += t('writing.warnings.frame.earlier', { value: quoted(f.earlierValue), until: number(f.earlierUntil), expected: quoted(f.expected) })
  }
  return text
}

/** What a warning says, in the page's language; a warning kept before warnings had a
 * frame shows the English words the server kept. The sentences behind it are shown apart
 * (the fact's and the text's). */
export function warningText(w: WarningView, t: Translate, tag: string): string {
  if (!w.kind) return w.detail
  const name = w.subjectName || w.subject.split('/').pop() || w.subject
  return frameText({ ...w, kind: w.kind, name, since: w.sinceChapter }, t, tag)
}

const KINDS = new Set(['contradiction', 'lost', 'dead'])

/** One of Role C's findings sent with its check, as a frame (null: not one). */
export function findingFrame(note: { term: string; values: Record<string, unknown> }): FindingFrame | null {
  if (!KINDS.has(note.term)) return null
  const v = note.values
  const text = (key: string) => (typeof v[key] === 'string' ? (v[key] as string) : '')
  const count = (key: string) => (typeof v[key] === 'number' ? (v[key] as number) : null)
  return {
    kind: note.term,
    name: text('name'),
    attribute: text('attribute'),
    expected: text('expected'),
    found: text('found'),
    since: count('since') ?? 0,
    earlierValue: typeof v.earlierValue === 'string' ? v.earlierValue : null,
    earlierUntil: count('earlierUntil'),
  }
}
