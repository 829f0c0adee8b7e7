// How a message's text is shown, without ever handing model output to the DOM as HTML.
//
// Plain replies become paragraphs of styled spans (SillyTavern's look: *actions* in
// italics, "speech" coloured, **bold**, `code`, fenced code blocks), rendered by Vue as
// text. A reply (or a display-only regex script's output) that carries HTML, such as a
// card's status bar, goes into a sandboxed iframe instead: see `frameDocument()`.

export interface Span {
  text: string
  em?: boolean
  strong?: boolean
  quote?: boolean
  code?: boolean
}

export type Block = { kind: 'paragraph'; spans: Span[] } | { kind: 'code'; text: string; lang: string }

type Flag = 'em' | 'strong' | 'quote'

interface Rule {
  re: RegExp
  flag: Flag | 'code'
  /** Characters kept around the inner text (quotes stay visible; asterisks do not). */
  keep: boolean
}

// Earliest match wins; at the same position the longer marker (** before *) does.
const RULES: Rule[] = [
  { re: /`([^`\n]+)`/, flag: 'code', keep: false },
  { re: /\*\*(?=\S)([^\n]*?\S)\*\*/, flag: 'strong', keep: false },
  { re: /\*(?![\s*])((?:\*\*[^*\n]+\*\*|[^*\n])*?[^\s*])\*|\*([^\s*])\*/, flag: 'em', keep: false },
  { re: /"([^"\n]+)"/, flag: 'quote', keep: true },
  { re: /“([^”\n]+)”/, flag: 'quote', keep: true },
  { re: /「([^」\n]+)」/, flag: 'quote', keep: true },
]

function inline(text: string, flags: Partial<Record<Flag, boolean>>, out: Span[]): void {
  let rest = text
  while (rest) {
    let best: { rule: Rule; match: RegExpExecArray } | null = null
    for (const rule of RULES) {
      if (rule.flag !== 'code' && flags[rule.flag]) continue
      const match = rule.re.exec(rest)
      if (match && (best === null || match.index < best.match.index)) best = { rule, match }
    }
    if (!best) {
      push(out, rest, flags)
      return
    }
    const { rule, match } = best
    if (match.index > 0) push(out, rest.slice(0, match.index), flags)
    const inner = match[1] ?? match[2] ?? ''
    if (rule.flag === 'code') push(out, inner, { ...flags, code: true })
    else if (rule.keep) inline(match[0], { ...flags, [rule.flag]: true }, out)
    else inline(inner, { ...flags, [rule.flag]: true }, out)
    rest = rest.slice(match.index + match[0].length)
  }
}

function push(out: Span[], text: string, flags: Partial<Record<Flag | 'code', boolean>>): void {
  if (!text) return
  const span: Span = { text }
  if (flags.em) span.em = true
  if (flags.strong) span.strong = true
  if (flags.quote) span.quote = true
  if (flags.code) span.code = true
  const prev = out[out.length - 1]
  if (prev && !!prev.em === !!span.em && !!prev.strong === !!span.strong && !!prev.quote === !!span.quote && !!prev.code === !!span.code) {
    prev.text += text
  } else out.push(span)
}

/** The inline spans of one paragraph (its line breaks kept in the text). */
export function formatInline(text: string): Span[] {
  const out: Span[] = []
  // A quoted span is styled as a whole, its inner markers applied inside it.
  inline(text, {}, out)
  return out
}

// `(?![\s\S])` is the end of the text (`$` under the m flag is the end of any line).
const FENCE = /^```([\w+-]*)[^\n]*\n([\s\S]*?)(?:\n```[^\n]*(?:\n|(?![\s\S]))|(?![\s\S]))/m

/** A message's text as blocks: fenced code kept verbatim, the rest in paragraphs. */
export function formatText(text: string): Block[] {
  const blocks: Block[] = []
  let rest = text.replace(/\r\n?/g, '\n')
  while (rest) {
    const match = FENCE.exec(rest)
    const before = match ? rest.slice(0, match.index) : rest
    for (const para of before.split(/\n[ \t]*\n+/)) {
      const trimmed = para.replace(/^\n+|\n+$/g, '')
      if (trimmed.trim()) blocks.push({ kind: 'paragraph', spans: formatInline(trimmed) })
    }
    if (!match) break
    blocks.push({ kind: 'code', lang: match[1] ?? '', text: match[2] ?? '' })
    rest = rest.slice(match.index + match[0].length)
  }
  return blocks
}

const THOUGHT = /^\s*<(thought|think|thinking|reasoning)>([\s\S]*?)(?:<\/\1>|$)/i

/** A reply whose text still starts with a `<thought>` block (an imported chat): the
 * thought apart and the reply after it. */
export function splitThought(text: string): { thought: string | null; body: string } {
  const match = THOUGHT.exec(text)
  if (!match) return { thought: null, body: text }
  return { thought: (match[2] ?? '').trim(), body: text.slice(match[0].length).replace(/^\s+/, '') }
}

const HTML_TAG =
  /<\/?(?:div|span|p|br|hr|img|table|thead|tbody|tr|td|th|style|details|summary|section|article|header|footer|aside|nav|main|ul|ol|li|dl|dt|dd|h[1-6]|b|i|u|s|em|strong|small|sub|sup|font|center|blockquote|pre|code|a|button|input|label|select|textarea|progress|meter|svg|canvas|script|iframe|audio|video|source|html|body|head|link|meta|figure|figcaption|mark|ruby|rt)\b[^<>]*>/i

/** Whether the text carries HTML to render (a status bar, a card's widget). */
export function looksLikeHtml(text: string): boolean {
  return HTML_TAG.test(text)
}

const RAW_ELEMENT = /<(style|script|pre|textarea)\b[\s\S]*?<\/\1\s*>/gi

function breakLines(text: string, afterTag: boolean): string {
  const lines = text.split('\n')
  let out = ''
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    out += line
    if (i === lines.length - 1) break
    const before = i > 0 ? />\s*$/.test(lines[i - 1]!) : afterTag
    const endsTag = />\s*$/.test(line) || (line.trim() === '' && before)
    const startsTag = /^\s*</.test(lines[i + 1]!)
    out += endsTag || startsTag ? '\n' : '<br>\n'
  }
  return out
}

/** Line breaks of prose become <br>; those beside tags (the markup's own layout) and
 * inside <style>, <script>, <pre> and <textarea> do not. */
export function htmlBody(text: string): string {
  const source = text.replace(/\r\n?/g, '\n')
  let out = ''
  let at = 0
  for (const match of source.matchAll(RAW_ELEMENT)) {
    out += breakLines(source.slice(at, match.index), at > 0) + match[0]
    at = match.index + match[0].length
  }
  return out + breakLines(source.slice(at), at > 0)
}

/** `sandbox` of the frame. Scripts on: `allow-scripts` only, never with same-origin (an
 * opaque origin: no cookies, no storage and no DOM of this page); the frame reports its
 * height by postMessage. Scripts off: `allow-same-origin` only, so the page can measure
 * the frame's height; without `allow-scripts` nothing in it can ever run (the CSP says
 * `script-src 'none'` as well). */
export function frameSandbox(scripts: boolean): string {
  return scripts ? 'allow-scripts' : 'allow-same-origin'
}

const FRAME_STYLE =
  'html,body{margin:0;padding:0;background:transparent}' +
  'body{font:15px/1.5 system-ui,-apple-system,"Segoe UI","PingFang SC","Microsoft YaHei","Noto Sans CJK SC",sans-serif;color:#1d2330;overflow-wrap:anywhere}' +
  'img,video,svg,canvas{max-width:100%}'

export interface FrameOptions {
  /** The frame's CSP (frameBridge's `framePolicy`). */
  policy: string
  /** A whole page (a code block Tavern Helper would render) rather than HTML in prose. */
  page: boolean
  /** Scripts placed before the card's own (the bridge), when scripts run. */
  head?: string
}

/** The `srcdoc` of a frame: the CSP first in <head>, then the bridge, then the card's HTML.
 * A whole page keeps its own <html>/<head>/<body>: the parser folds them into ours, its
 * styles and scripts still apply, and a CSP of its own (in <body> by then) counts for
 * nothing. HTML inside prose gets its line breaks (see `htmlBody`). */
export function frameDocument(html: string, options: FrameOptions): string {
  const policy = options.policy.replace(/&/g, '&amp;').replace(/"/g, '&quot;')
  return (
    '<!doctype html><html><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="${policy}">` +
    `<style>${FRAME_STYLE}</style>${options.head ?? ''}</head><body>` +
    (options.page ? html : htmlBody(html)) +
    '</body></html>'
  )
}

export type MessagePart = { kind: 'text'; text: string } | { kind: 'frame'; html: string }

// A fenced block, any language tag; Tavern Helper renders one holding a page.
const FENCED = /^```[^\n]*\n([\s\S]*?)(?:\n```[ \t]*(?=\n|$)|(?![\s\S]))/gm
const PAGE = /<(?:html|head|body)\b/i

/** A message as text and frames: each code block holding a whole page (`<html`, `<head`
 * or `<body`, as Tavern Helper detects them) is a frame; the rest stays text. */
export function splitFrames(text: string): MessagePart[] {
  const source = text.replace(/\r\n?/g, '\n')
  const parts: MessagePart[] = []
  let at = 0
  for (const match of source.matchAll(FENCED)) {
    const body = match[1] ?? ''
    if (!PAGE.test(body)) continue
    const before = source.slice(at, match.index)
    if (before.trim()) parts.push({ kind: 'text', text: before })
    parts.push({ kind: 'frame', html: body })
    at = match.index + match[0].length
  }
  const rest = source.slice(at)
  if (rest.trim() || !parts.length) parts.push({ kind: 'text', text: at ? rest : text })
  return parts
}
