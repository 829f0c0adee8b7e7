import { describe, expect, it } from 'vitest'
import { proseParagraphs } from '../src/lib/proseParagraphs'

describe('prose paragraphs (CommonMark soft wraps)', () => {
  it('joins a soft-wrapped paragraph into one line', () => {
    expect(proseParagraphs('Mara kept the lamp\nburning through\nthe night.')).toEqual([['Mara kept the lamp burning through the night.']])
  })

  it('starts a paragraph at a blank line, even one holding spaces', () => {
    expect(proseParagraphs('\nOne.\n \t\nTwo\nthree.\n\n\n')).toEqual([['One.'], ['Two three.']])
  })

  it('keeps a hard break made by two spaces or a backslash, dropping the marker', () => {
    expect(proseParagraphs('Roses are red,  \nviolets\\\nblue.')).toEqual([['Roses are red,', 'violets', 'blue.']])
  })

  it('drops a hard break at the end of a paragraph', () => {
    expect(proseParagraphs('The end.  \n\nAfter.')).toEqual([['The end.'], ['After.']])
  })

  it('joins Chinese lines without a space, and Chinese to English with one', () => {
    expect(proseParagraphs('苏晴推开了\n门。\nMara')).toEqual([['苏晴推开了门。 Mara']])
  })

  it('reads Windows line ends', () => {
    expect(proseParagraphs('a\r\nb\r\n\r\nc')).toEqual([['a b'], ['c']])
  })
})
