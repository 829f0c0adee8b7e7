import { describe, expect, it } from 'vitest'
import { codePointToUtf16, completionAt, insertReference, type MarkInput, markSegments } from '../src/lib/referenceMarks'

function mark(text: string, written: string, status: MarkInput['status']): MarkInput {
  // Offsets in code points, as the server (Python) reports them; raw is the body.
  const start = [...text.slice(0, text.indexOf(written))].length
  return { start, end: start + [...written].length, raw: written.slice(3, -3), status, count: 1, message: '' }
}

describe('markSegments', () => {
  it('cuts the text around each reference', () => {
    const text = 'See {{{Eldoria}}} and {{{Missing}}}.'
    const segments = markSegments(text, [mark(text, '{{{Eldoria}}}', 'ok'), mark(text, '{{{Missing}}}', 'missing')])
    expect(segments.map((s) => [s.text, s.mark?.status ?? null])).toEqual([
      ['See ', null],
      ['{{{Eldoria}}}', 'ok'],
      [' and ', null],
      ['{{{Missing}}}', 'missing'],
      ['.', null],
    ])
    expect(segments.map((s) => s.text).join('')).toBe(text)
  })

  it('converts code point offsets for text with astral characters', () => {
    const text = '🐉龙 {{{龙骑士}}}'
    expect(codePointToUtf16(text, 1)).toBe(2)
    const segments = markSegments(text, [mark(text, '{{{龙骑士}}}', 'ambiguous')])
    expect(segments[1]).toMatchObject({ text: '{{{龙骑士}}}' })
  })

  it('skips marks that no longer fit the text', () => {
    const text = 'edited {{{A}}}'
    const stale: MarkInput = { start: 0, end: 7, raw: 'A', status: 'ok', count: 1, message: '' }
    expect(markSegments(text, [stale])).toEqual([{ text, mark: null }])
    expect(markSegments('', [])).toEqual([{ text: '', mark: null }])
  })
})

describe('completion', () => {
  it('finds the reference being typed', () => {
    expect(completionAt('Hello {{{Eld', 12)).toEqual({ start: 6, query: 'Eld' })
    expect(completionAt('{{{', 3)).toEqual({ start: 0, query: '' })
  })

  it('ignores closed references and other lines', () => {
    expect(completionAt('{{{A}}} done', 12)).toBeNull()
    expect(completionAt('{{{A\nnext', 9)).toBeNull()
    expect(completionAt('no braces', 5)).toBeNull()
  })

  it('inserts the chosen reference and puts the caret after it', () => {
    const text = 'Go to {{{Eld now'
    const ctx = completionAt(text, 12)!
    expect(insertReference(text, ctx, 12, '{{{Eldoria}}}')).toEqual({ text: 'Go to {{{Eldoria}}} now', caret: 19 })
  })

  it('replaces what the user already typed up to the closing braces', () => {
    const text = 'x {{{El}}} y'
    const ctx = completionAt(text, 7)!
    expect(insertReference(text, ctx, 7, '{{{Eldoria}}}')).toEqual({ text: 'x {{{Eldoria}}} y', caret: 15 })
  })
})
