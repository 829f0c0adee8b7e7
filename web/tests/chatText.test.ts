import { describe, expect, it } from 'vitest'
import {
  formatInline,
  formatText,
  frameDocument,
  frameSandbox,
  splitFrames,
  htmlBody,
  looksLikeHtml,
  splitThought,
} from '../src/lib/chatText'
import { framePolicy } from '../src/lib/frameBridge'

describe('inline formatting', () => {
  it('styles actions, speech, bold and code as SillyTavern shows them', () => {
    expect(formatInline('*waves* "Hello," she says. **Really** `x<y`')).toEqual([
      { text: 'waves', em: true },
      { text: ' ' },
      { text: '"Hello,"', quote: true },
      { text: ' she says. ' },
      { text: 'Really', strong: true },
      { text: ' ' },
      { text: 'x<y', code: true },
    ])
  })

  it('nests speech inside an action and bold inside italics', () => {
    expect(formatInline('*She whispers "run" and **runs** too*')).toEqual([
      { text: 'She whispers ', em: true },
      { text: '"run"', em: true, quote: true },
      { text: ' and ', em: true },
      { text: 'runs', em: true, strong: true },
      { text: ' too', em: true },
    ])
  })

  it('leaves lone markers and comparisons as text', () => {
    expect(formatInline('2 * 3 = 6 and 1 < 2 * 4')).toEqual([{ text: '2 * 3 = 6 and 1 < 2 * 4' }])
    expect(formatInline('say "hi')).toEqual([{ text: 'say "hi' }])
  })

  it('colours CJK quotes', () => {
    expect(formatInline('她说：“你好”。「走」')).toEqual([
      { text: '她说：' },
      { text: '“你好”', quote: true },
      { text: '。' },
      { text: '「走」', quote: true },
    ])
  })

  it('keeps HTML as text: nothing is markup', () => {
    expect(formatInline('<img src=x onerror=alert(1)>')).toEqual([{ text: '<img src=x onerror=alert(1)>' }])
  })
})

describe('blocks', () => {
  it('splits paragraphs on blank lines and keeps single line breaks', () => {
    const blocks = formatText('one\ntwo\n\n\nthree')
    expect(blocks).toEqual([
      { kind: 'paragraph', spans: [{ text: 'one\ntwo' }] },
      { kind: 'paragraph', spans: [{ text: 'three' }] },
    ])
  })

  it('keeps fenced code verbatim, closed or not', () => {
    expect(formatText('before\n```js\nlet a = *b*\n\nc\n```\nafter')).toEqual([
      { kind: 'paragraph', spans: [{ text: 'before' }] },
      { kind: 'code', lang: 'js', text: 'let a = *b*\n\nc' },
      { kind: 'paragraph', spans: [{ text: 'after' }] },
    ])
    expect(formatText('```\nline 1\nline 2')).toEqual([{ kind: 'code', lang: '', text: 'line 1\nline 2' }])
  })
})

describe('thoughts and HTML', () => {
  it('splits a leading thought from the reply', () => {
    expect(splitThought('<thought>plan</thought>\nHello')).toEqual({ thought: 'plan', body: 'Hello' })
    expect(splitThought('<think>still thinking')).toEqual({ thought: 'still thinking', body: '' })
    expect(splitThought('Hello <thought>x</thought>')).toEqual({ thought: null, body: 'Hello <thought>x</thought>' })
  })

  it('tells HTML from prose with angle brackets', () => {
    expect(looksLikeHtml('<div class="bar">HP 5</div>')).toBe(true)
    expect(looksLikeHtml('a <br> b')).toBe(true)
    expect(looksLikeHtml('1 < 2 and 3 > 2')).toBe(false)
    expect(looksLikeHtml('<thought>hmm</thought>')).toBe(false)
  })

  it('breaks prose lines but not the markup layout or style/script text', () => {
    expect(htmlBody('<div>\n<b>x</b>\n</div>\nline one\nline two')).toBe('<div>\n<b>x</b>\n</div>\nline one<br>\nline two')
    expect(htmlBody('<style>\na{color:red}\nb{}\n</style>\ntext\nmore')).toBe('<style>\na{color:red}\nb{}\n</style>\ntext<br>\nmore')
  })

  it('builds a frame that runs no script unless allowed', () => {
    const off = frameDocument('<div>hi</div>', { policy: framePolicy(false, false), page: false })
    expect(off).toContain("default-src 'none'")
    expect(off).toContain("script-src 'none'")
    expect(off).not.toContain('<script>')
    expect(frameSandbox(false)).not.toContain('allow-scripts')
    const on = frameDocument('<div>hi</div>', { policy: framePolicy(true, false), page: false, head: '<script>bridge()</script>' })
    expect(on.indexOf('Content-Security-Policy')).toBeLessThan(on.indexOf('bridge()'))
    expect(on.indexOf('bridge()')).toBeLessThan(on.indexOf('<div>hi</div>'))
    expect(on).toContain("connect-src 'none'")
    expect(frameSandbox(true)).toBe('allow-scripts')
    expect(frameSandbox(true)).not.toContain('allow-same-origin')
  })

  it('opens the network to a frame only where the character was allowed it', () => {
    expect(framePolicy(true, false)).not.toContain('https:')
    const open = framePolicy(true, true)
    for (const kind of ['script-src', 'style-src', 'img-src', 'font-src', 'connect-src']) {
      expect(open).toMatch(new RegExp(`${kind} [^;]*https:`))
    }
  })

  it('makes a frame of each code block that holds a page, and keeps the rest as text', () => {
    const text = 'She smiles.\n\n```html\n<!DOCTYPE html><html><body><b id="x">1</b></body></html>\n```\nAfter.\n\n```js\nlet a = 1\n```'
    const parts = splitFrames(text)
    expect(parts.map((p) => p.kind)).toEqual(['text', 'frame', 'text'])
    expect(parts[1]).toEqual({ kind: 'frame', html: '<!DOCTYPE html><html><body><b id="x">1</b></body></html>' })
    expect(parts[2]).toMatchObject({ kind: 'text' })
    expect((parts[2] as { text: string }).text).toContain('let a = 1')
    expect(splitFrames('```\n<head><style>b{}</style></head>\n```')).toEqual([{ kind: 'frame', html: '<head><style>b{}</style></head>' }])
    // HTML without a page marker, or a page outside a code block, keeps today's path.
    expect(splitFrames('<div>hp</div>')).toEqual([{ kind: 'text', text: '<div>hp</div>' }])
    expect(splitFrames('```\n<div>hp</div>\n```')).toEqual([{ kind: 'text', text: '```\n<div>hp</div>\n```' }])
  })
})
