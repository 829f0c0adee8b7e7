// The author's own resources: entity paths made as the server makes them, aliases from a
// comma list, plot-thread chapters, the meta documents a book has a place for, and where a
// search hit opens.
import { describe, expect, it } from 'vitest'
import type { BookTree } from '../src/api/writing'
import { chapterNumber, entityPath, entitySlug, metaItems, parseAliases, placeOf, threadAttrs } from '../src/lib/writingEntities'

const TREE: BookTree = {
  manuscript: [
    {
      path: '/manuscript/arc-01',
      title: 'Arc 1',
      words: 0,
      chapters: [{ path: '/manuscript/arc-01/chapter-001', ordinal: 1, title: 'One', words: 10, scenes: [] }],
    },
  ],
  meta: [],
  entities: [],
  summaries: [],
  profiles: [],
}

describe('entity paths', () => {
  it('slugs a name in lower case with spaces as hyphens', () => {
    expect(entitySlug('  Lin Feng  ')).toBe('lin-feng')
    expect(entitySlug('The Old Mill!')).toBe('the-old-mill')
  })

  it('keeps CJK names as they are', () => {
    expect(entitySlug('林枫')).toBe('林枫')
    expect(entityPath('character', '林 枫')).toBe('/entities/characters/林-枫')
  })

  it('puts each kind in its folder', () => {
    expect(entityPath('location', 'Old Mill')).toBe('/entities/locations/old-mill')
    expect(entityPath('plot-thread', 'The Ring')).toBe('/entities/plot-threads/the-ring')
  })

  it('gives a name of separators only a placeholder slug', () => {
    expect(entitySlug('--')).toBe('untitled')
  })
})

describe('fields of the entity form', () => {
  it('splits aliases on Latin and CJK commas, dropping blanks and repeats', () => {
    expect(parseAliases('Feng, the boy,, Feng，小枫、 ')).toEqual(['Feng', 'the boy', '小枫'])
  })

  it('reads a chapter number, blank as none and anything else as invalid', () => {
    expect(chapterNumber(' 12 ')).toBe(12)
    expect(chapterNumber('')).toBeNull()
    expect(chapterNumber('0')).toBe('invalid')
    expect(chapterNumber('2.5')).toBe('invalid')
    expect(chapterNumber(7)).toBe(7)
  })

  it('reads a plot thread attrs with missing chapters as null', () => {
    expect(threadAttrs({ planted: 3, due: null })).toEqual({ planted: 3, due: null, paidOff: null })
    expect(threadAttrs(undefined)).toEqual({ planted: null, due: null, paidOff: null })
  })
})

describe('meta documents', () => {
  it('lists the three standard documents first, written or not, then any other', () => {
    const items = metaItems(
      [
        { path: '/meta/characters-notes', uri: 'u2', kind: 'meta', title: 'Notes' },
        { path: '/meta/outline', uri: 'u1', kind: 'meta', title: 'My outline' },
      ],
      (key) => `[${key}]`,
    )
    expect(items.map((i) => [i.path, i.title, i.missing])).toEqual([
      ['/meta/outline', 'My outline', false],
      ['/meta/style-guide', '[styleGuide]', true],
      ['/meta/world-rules', '[worldRules]', true],
      ['/meta/characters-notes', 'Notes', false],
    ])
  })
})

describe('where a search hit opens', () => {
  it('opens a chapter, or a scene of it, in the editor', () => {
    expect(placeOf(TREE, '/manuscript/arc-01/chapter-001')).toEqual({ chapter: 1 })
    expect(placeOf(TREE, '/manuscript/arc-01/chapter-001/scene-02')).toEqual({ chapter: 1 })
    expect(placeOf(TREE, '/manuscript/arc-01')).toBeNull()
  })

  it('opens other resources in their tab, summaries with the meta documents', () => {
    expect(placeOf(TREE, '/entities/characters/lin')).toEqual({ tab: 'entities', path: '/entities/characters/lin' })
    expect(placeOf(TREE, '/profiles/characters/lin')).toEqual({ tab: 'profiles', path: '/profiles/characters/lin' })
    expect(placeOf(TREE, '/meta/outline')).toEqual({ tab: 'meta', path: '/meta/outline' })
    expect(placeOf(TREE, '/summaries/arc-01')).toEqual({ tab: 'meta', path: '/summaries/arc-01' })
  })
})
