// The fact form's logic: a new fact and an edit as the API takes them, the field a bad
// draft is wrong in, the fact a rejection names, and whom an entity can merge into.
import { describe, expect, it } from 'vitest'
import type { FactView, ResNode } from '../src/api/writing'
import { draftOf, editFactBody, emptyDraft, factRef, mergeTargets, newFactBody } from '../src/lib/factCorrections'

const MARA = '/entities/characters/mara'
const FACT: FactView = { subject: MARA, attribute: 'home', value: 'Lisbon', chapter: 2, category: 'factual', evidence: 'She lived in Lisbon.', source: 'prose', sourceUri: '' }

describe('a new fact', () => {
  it('is the trimmed draft, its chapter a number', () => {
    const draft = { ...emptyDraft(), attribute: ' eyes ', value: ' green ', chapter: '3', category: 'characterization' as const }
    expect(newFactBody(MARA, draft)).toEqual({ subject: MARA, attribute: 'eyes', value: 'green', chapter: 3, category: 'characterization', evidence: '' })
  })

  it('names the field a bad draft is wrong in', () => {
    expect(newFactBody(MARA, { ...emptyDraft(), value: 'x', chapter: 1 })).toBe('attribute')
    expect(newFactBody(MARA, { ...emptyDraft(), attribute: 'eyes', chapter: 1 })).toBe('value')
    expect(newFactBody(MARA, { ...emptyDraft(), attribute: 'eyes', value: 'g', chapter: '' })).toBe('chapter')
    expect(newFactBody(MARA, { ...emptyDraft(), attribute: 'eyes', value: 'g', chapter: '1.5' })).toBe('chapter')
    expect(newFactBody(MARA, { ...emptyDraft(), attribute: 'eyes', value: 'g', chapter: -1 })).toBe('chapter')
  })

  it('may hold from the start of the book (chapter 0)', () => {
    const body = newFactBody(MARA, { ...emptyDraft(), attribute: 'eyes', value: 'g', chapter: 0 })
    expect(typeof body === 'object' && body.chapter).toBe(0)
  })
})

describe('an edit', () => {
  it('names the fact it edits and says a move only when there is one', () => {
    const body = editFactBody(FACT, { ...draftOf(FACT), value: 'Porto' })
    expect(body).toEqual({ subject: MARA, attribute: 'home', chapter: 2, value: 'Porto', category: 'factual', evidence: 'She lived in Lisbon.' })
    const moved = editFactBody(FACT, { ...draftOf(FACT), chapter: '5', attribute: 'birthplace' })
    expect(moved).toMatchObject({ attribute: 'home', chapter: 2, newAttribute: 'birthplace', newChapter: 5 })
  })

  it('refuses an emptied value', () => {
    expect(editFactBody(FACT, { ...draftOf(FACT), value: '  ' })).toBe('value')
  })
})

it('a rejection names subject, attribute, value and chapter', () => {
  expect(factRef(FACT)).toEqual({ subject: MARA, attribute: 'home', value: 'Lisbon', chapter: 2 })
})

it('an entity merges into the other entities, by name', () => {
  const items: ResNode[] = [
    { path: MARA, uri: '', kind: 'character', title: 'Mara' },
    { path: '/entities/locations/porto', uri: '', kind: 'location', title: 'Porto' },
    { path: '/entities/characters/captain', uri: '', kind: 'character', title: 'Captain' },
    { path: '/meta/outline', uri: '', kind: 'meta', title: 'Outline' },
  ]
  expect(mergeTargets(items, MARA).map((i) => i.title)).toEqual(['Captain', 'Porto'])
})
