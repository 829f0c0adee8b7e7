// Reference marks and `{{{` autocompletion for the entry content editor.
//
// The server checks references (POST /api/knowledge/references/check) and reports offsets in
// code points (Python string indexes); JavaScript strings index UTF-16 code units, so the
// offsets are converted before they cut the text.

export type MarkStatus = 'ok' | 'missing' | 'ambiguous' | 'cyclic'

export interface MarkInput {
  start: number
  end: number
  status: MarkStatus
  /** The reference body, without its braces. */
  raw: string
  count: number
  message: string
}

export interface Segment {
  text: string
  mark: MarkInput | null
}

/** The UTF-16 offset of code point `index` in `text`. */
export function codePointToUtf16(text: string, index: number): number {
  let units = 0
  let points = 0
  for (const ch of text) {
    if (points >= index) break
    units += ch.length
    points += 1
  }
  return units
}

/**
 * `text` cut into plain and marked pieces (for the highlight layer behind the textarea).
 * Marks that overlap an earlier one or fall outside the text (a stale answer for text the
 * user has changed since) are skipped.
 */
export function markSegments(text: string, marks: readonly MarkInput[]): Segment[] {
  const out: Segment[] = []
  let pos = 0
  const sorted = [...marks].sort((a, b) => a.start - b.start)
  for (const mark of sorted) {
    const start = codePointToUtf16(text, mark.start)
    const end = codePointToUtf16(text, mark.end)
    if (start < pos || end <= start || text.slice(start, end) !== `{{{${mark.raw}}}}`) continue
    if (start > pos) out.push({ text: text.slice(pos, start), mark: null })
    out.push({ text: text.slice(start, end), mark })
    pos = end
  }
  if (pos < text.length || out.length === 0) out.push({ text: text.slice(pos), mark: null })
  return out
}

export interface CompletionContext {
  /** UTF-16 offset of the `{{{` being completed. */
  start: number
  /** What was typed after `{{{` up to the caret. */
  query: string
}

/** The reference being typed at `caret`: an open `{{{` with no `}}}` or newline after it. */
export function completionAt(text: string, caret: number): CompletionContext | null {
  const before = text.slice(0, caret)
  const open = before.lastIndexOf('{{{')
  if (open < 0) return null
  const query = before.slice(open + 3)
  if (query.includes('}}}') || query.includes('\n') || query.includes('{') || query.length > 80) return null
  return { start: open, query }
}

/**
 * Put `reference` (a whole `{{{...}}}`) in place of the `{{{query` at `context`, swallowing
 * a `}}}` the user already typed after the caret; returns the new text and caret.
 */
export function insertReference(
  text: string,
  context: CompletionContext,
  caret: number,
  reference: string,
): { text: string; caret: number } {
  let end = caret
  const rest = text.slice(caret)
  const closing = rest.match(/^[^\n{}]*\}\}\}/)
  if (closing) end = caret + closing[0].length
  const next = text.slice(0, context.start) + reference + text.slice(end)
  return { text: next, caret: context.start + reference.length }
}
