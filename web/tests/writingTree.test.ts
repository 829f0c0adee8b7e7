import { describe, expect, it } from 'vitest'
import type { BookTree } from '../src/api/writing'
import { countWords, findChapter, nextOrdinal, wordTotals } from '../src/lib/writingTree'

function tree(): BookTree {
  return {
    manuscript: [
      {
        path: '/manuscript/arc-01',
        title: 'Arc 1',
        words: 0,
        chapters: [
          { path: '/manuscript/arc-01/chapter-001', ordinal: 1, title: 'One', words: 1200, scenes: [] },
          { path: '/manuscript/arc-01/chapter-002', ordinal: 2, title: 'Two', words: 800, scenes: [] },
        ],
      },
      {
        path: '/manuscript/arc-02',
        title: 'Arc 2',
        words: 0,
        chapters: [{ path: '/manuscript/arc-02/chapter-003', ordinal: 3, title: 'Three', words: 500, scenes: [] }],
      },
    ],
    meta: [],
    entities: [],
    summaries: [],
    profiles: [],
  }
}

describe('manuscript tree numbers', () => {
  it('sums word totals per arc and for the book from the chapters', () => {
    expect(wordTotals(tree())).toEqual({
      book: 2500,
      chapters: 3,
      arcs: { '/manuscript/arc-01': 2000, '/manuscript/arc-02': 500 },
    })
  })

  it('gives an empty book zero words and chapter 1 to write next', () => {
    expect(wordTotals(null)).toEqual({ book: 0, chapters: 0, arcs: {} })
    expect(nextOrdinal(null)).toBe(1)
  })

  it('writes next the chapter after the highest ordinal', () => {
    expect(nextOrdinal(tree())).toBe(4)
  })

  it('finds a chapter by ordinal across arcs', () => {
    expect(findChapter(tree(), 3)?.title).toBe('Three')
    expect(findChapter(tree(), 9)).toBeNull()
  })

  it('counts each CJK character as a word and other text by spaces', () => {
    expect(countWords('The rain never stopped.')).toBe(4)
    expect(countWords('林走进雨里')).toBe(5)
    expect(countWords('林 met Wu 在桥上')).toBe(6)
    expect(countWords('   ')).toBe(0)
  })
})
