// The character editor's folded sections: remembered per section under one key, and a
// storage that is missing or holds something else leaves every section open.
import { describe, expect, it } from 'vitest'
import { readFolded, useFoldedSections, writeFolded } from '../src/lib/foldedSections'

function memoryStore(initial: Record<string, string> = {}) {
  const data = new Map(Object.entries(initial))
  return {
    data,
    getItem: (key: string) => data.get(key) ?? null,
    setItem: (key: string, value: string) => void data.set(key, value),
  }
}

describe('folded sections', () => {
  it('remembers a fold per section and reads it back in a new editor', () => {
    const store = memoryStore()
    const first = useFoldedSections('k', store)
    expect(first.isOpen('examples')).toBe(true)
    first.setOpen('examples', false)
    first.setOpen('lore', false)
    first.setOpen('lore', true)
    expect(store.data.get('k')).toBe('["examples"]')
    const again = useFoldedSections('k', store)
    expect(again.isOpen('examples')).toBe(false)
    expect(again.isOpen('lore')).toBe(true)
  })

  it('opens everything when the stored value is missing, broken or not a list of names', () => {
    for (const stored of [undefined, 'not json', '{"a": 1}', '[1, "scenario"]']) {
      const store = memoryStore(stored === undefined ? {} : { k: stored })
      expect([...readFolded('k', store)]).toEqual(stored === '[1, "scenario"]' ? ['scenario'] : [])
    }
    expect([...readFolded('k', null)]).toEqual([])
  })

  it('does not fail when the storage refuses to write', () => {
    const full = { getItem: () => null, setItem: () => { throw new Error('quota') } }
    expect(() => writeFolded('k', new Set(['a']), full)).not.toThrow()
  })
})
