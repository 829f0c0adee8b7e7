// A chapter's Markdown prose as paragraphs and lines, read as CommonMark reads them (the
// server's EPUB and Word exports share the rule: storyloom/writing/prose_paragraphs.py).
// A single newline inside a paragraph is a soft wrap, joined; a blank line starts a new
// paragraph; a line ending in two spaces or a backslash is a hard break, kept.

const BLANK_LINE = /\n(?:[ \t]*\n)+/
const HARD_BREAK = /(?: {2,}|\\)$/
// Between two Chinese, Japanese or Korean characters a soft wrap is no space.
const WIDE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u3000-\u303f\uff00-\uffef]/u

function join(before: string, after: string): string {
  if (!before) return after
  if (!after) return before
  const last = Array.from(before).at(-1) ?? ''
  const first = Array.from(after)[0] ?? ''
  return WIDE.test(last) && WIDE.test(first) ? before + after : `${before} ${after}`
}

/** Each paragraph of `text` as its lines between hard breaks (soft wraps joined). */
export function proseParagraphs(text: string): string[][] {
  const body = text.replace(/\r\n?/g, '\n').replace(/^\n+|\n+$/g, '')
  const paragraphs: string[][] = []
  for (const block of body.split(BLANK_LINE)) {
    if (!block.trim()) continue
    const lines: string[] = []
    let current = ''
    for (const raw of block.split('\n')) {
      const hard = HARD_BREAK.test(raw)
      const piece = hard ? raw.replace(/[ \\]+$/, '').trim() : raw.trim()
      current = join(current, piece)
      if (hard) {
        lines.push(current)
        current = ''
      }
    }
    // A hard break at the end of a paragraph breaks nothing (CommonMark drops it).
    if (current || !lines.length) lines.push(current)
    paragraphs.push(lines)
  }
  return paragraphs
}
