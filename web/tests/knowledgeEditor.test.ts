import { describe, expect, it } from 'vitest'
import { importKnowledgeFile, searchKnowledge } from '../src/api/knowledge'
import { ApiError } from '../src/api/client'
import {
  groupByPlacement,
  groupErrors,
  keywordPreview,
  mergeErrors,
  moveItem,
  newEntryId,
  problemsAsErrors,
} from '../src/lib/knowledgeEditor'

describe('entry order', () => {
  it('moves an item down and up', () => {
    expect(moveItem(['a', 'b', 'c', 'd'], 0, 2)).toEqual(['b', 'c', 'a', 'd'])
    expect(moveItem(['a', 'b', 'c', 'd'], 3, 1)).toEqual(['a', 'd', 'b', 'c'])
  })

  it('clamps the target and ignores a bad source', () => {
    expect(moveItem(['a', 'b'], 0, 9)).toEqual(['b', 'a'])
    expect(moveItem(['a', 'b'], 5, 0)).toEqual(['a', 'b'])
  })

  it('leaves the input list alone', () => {
    const list = ['a', 'b']
    moveItem(list, 0, 1)
    expect(list).toEqual(['a', 'b'])
  })
})

describe('entries', () => {
  it('makes ids shaped like the server’s', () => {
    expect(newEntryId()).toMatch(/^caiu_[0-9a-f]{32}$/)
    expect(newEntryId(() => 0)).toBe(`caiu_${'0'.repeat(32)}`)
  })

  it('previews the first keywords', () => {
    expect(keywordPreview(['a', 'b', ' ', 'c', 'd', 'e'], 3)).toBe('a, b, c, +2')
    expect(keywordPreview(undefined)).toBe('')
  })
})

describe('errors', () => {
  it('puts the server’s problems at their entry and field', () => {
    const grouped = groupErrors(
      problemsAsErrors([
        { field: 'entries[1].activation_criteria.trigger_probability', reason: 'less than or equal to 1' },
        { field: 'kb_displayName', reason: 'bad' },
        { field: '', reason: 'entry ids must be unique' },
      ]),
    )
    expect(grouped.entries.get(1)?.get('activation_criteria.trigger_probability')).toEqual(['less than or equal to 1'])
    expect(grouped.kb.get('kb_displayName')).toEqual(['bad'])
    expect(grouped.kb.get('')).toEqual(['entry ids must be unique'])
  })

  it('merges two groupings without repeating a message', () => {
    const a = groupErrors([{ path: ['entries', 0, 'x'], message: 'm' }])
    const b = groupErrors([{ path: ['entries', 0, 'x'], message: 'm' }, { path: ['entries', 0, 'x'], message: 'n' }])
    expect(mergeErrors(a, b).entries.get(0)?.get('x')).toEqual(['m', 'n'])
  })
})

describe('activation results', () => {
  it('groups by placement in prompt order, keeping insertion order inside a group', () => {
    const items = [
      { placement: 'at_depth', id: 1 },
      { placement: 'before_prompt', id: 2 },
      { placement: 'something_new', id: 3 },
      { placement: 'before_prompt', id: 4 },
    ]
    expect(groupByPlacement(items).map((g) => [g.placement, g.items.map((i) => i.id)])).toEqual([
      ['before_prompt', [2, 4]],
      ['at_depth', [1]],
      ['something_new', [3]],
    ])
  })
})

describe('knowledge api calls', () => {
  it('uploads a file as multipart with its name and scope', async () => {
    let seen: FormData | null = null
    const fetchImpl = (async (_url: string, init: RequestInit) => {
      seen = init.body as FormData
      const report = { kind: 'world_info', filename: 'book.json', created: [], character: null, character_file: null, warnings: [] }
      return new Response(JSON.stringify(report), { status: 201, headers: { 'Content-Type': 'application/json' } })
    }) as typeof fetch
    const answer = await importKnowledgeFile(new File(['{}'], 'book.json'), 'global', fetchImpl)
    expect('imported' in answer && answer.imported.kind).toBe('world_info')
    const form = seen as unknown as FormData
    expect((form.get('file') as File).name).toBe('book.json')
    expect(form.get('scope')).toBe('global')
  })

  it('turns a refused upload into an ApiError with the server’s message', async () => {
    const fetchImpl = (async () =>
      new Response(JSON.stringify({ error: { message: 'file too large: 60 MB, the limit is 50 MB', problems: [] } }), {
        status: 413,
        headers: { 'Content-Type': 'application/json' },
      })) as typeof fetch
    await expect(importKnowledgeFile(new File(['x'], 'big.png'), 'local', fetchImpl)).rejects.toThrow(ApiError)
    await expect(importKnowledgeFile(new File(['x'], 'big.png'), 'local', fetchImpl)).rejects.toThrow('file too large')
  })

  it('sends every chosen KB as a repeated kb_id parameter', async () => {
    let url = ''
    const fetchImpl = (async (u: string) => {
      url = u
      return new Response(JSON.stringify({ query: 'q', hits: [], embedding: [] }), { status: 200 })
    }) as typeof fetch
    await searchKnowledge('龙 dragon', ['kb_a', 'kb_b'], 5, fetchImpl)
    const params = new URL(url, 'http://x').searchParams
    expect(params.get('q')).toBe('龙 dragon')
    expect(params.getAll('kb_id')).toEqual(['kb_a', 'kb_b'])
    expect(params.get('top_k')).toBe('5')
  })
})
