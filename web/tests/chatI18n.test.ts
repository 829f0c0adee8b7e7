import { describe, expect, it } from 'vitest'
import { en, zh } from '../src/locales'

type Tree = { [key: string]: string | Tree }

function has(tree: Tree, key: string): boolean {
  let node: string | Tree | undefined = tree
  for (const part of key.split('.')) {
    if (typeof node !== 'object' || node === null) return false
    node = node[part]
  }
  return typeof node === 'string' && node.trim() !== ''
}

describe('chat page strings', () => {
  it('have the keys the page builds at run time in both languages', () => {
    const keys = [
      ...['user', 'assistant', 'system'].map((r) => `chat.role.${r}`),
      ...['streaming', 'stopped', 'interrupted', 'partial', 'failed'].map((m) => `chat.mark.${m}`),
      ...['tree', 'state', 'prompt', 'settings'].map((s) => `chat.side.${s}`),
    ]
    for (const locale of [en, zh] as unknown as Tree[]) expect(keys.filter((k) => !has(locale, k))).toEqual([])
  })
})
