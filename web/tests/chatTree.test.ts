import { describe, expect, it } from 'vitest'
import type { TreeNode } from '../src/api/chat'
import { pointerOf, treeRows, type TreeRow } from '../src/lib/chatTree'
import { node } from './chatFixtures'

function line(n: number, prefix: string, parent: string | null, onPath = false): TreeNode[] {
  const out: TreeNode[] = []
  for (let i = 0; i < n; i++) {
    out.push(node(`${prefix}${i}`, i === 0 ? parent : `${prefix}${i - 1}`, { depth: i, on_path: onPath }))
  }
  return out
}

const describeRow = (r: TreeRow) => (r.kind === 'node' ? `${'  '.repeat(r.indent)}${r.node.id}${r.pointer ? '*' : ''}` : `${'  '.repeat(r.indent)}…${r.count}`)

describe('tree rows', () => {
  it('keeps a chain at one indent and steps in at each branch point', () => {
    const nodes = [
      node('a', null, { on_path: true }),
      node('b', 'a', { on_path: true, depth: 1 }),
      node('c1', 'b', { depth: 2 }),
      node('c2', 'b', { depth: 2, sibling_index: 1, on_path: true }),
      node('d', 'c2', { depth: 3, on_path: true }),
    ]
    const rows = treeRows(nodes)
    expect(rows.map(describeRow)).toEqual(['a', 'b', '  c1', '  c2', '  d*'])
    expect(rows[1]).toMatchObject({ kind: 'node', branches: 2 })
  })

  it('folds the middle of a long chain, keeping the pointer, and opens it on request', () => {
    const nodes = line(20, 'm', null, true).map((n) => ({ ...n, on_path: n.depth <= 10 }))
    const rows = treeRows(nodes)
    expect(rows.map(describeRow)).toEqual(['m0', 'm1', '…8', 'm10*', '…7', 'm18', 'm19'])
    const gap = rows[2]
    expect(gap).toMatchObject({ kind: 'gap', key: 'm2', onPath: true })
    expect(treeRows(nodes, new Set(['m2'])).length).toBe(7 + 8 - 1)
  })

  it('walks a 10,000-message chain without recursion', () => {
    const nodes = line(10_000, 'n', null, true)
    expect(pointerOf(nodes)).toBe('n9999')
    expect(treeRows(nodes).map(describeRow)).toEqual(['n0', 'n1', '…9996', 'n9998', 'n9999*'])
  })

  it('lists sibling roots (alternate greetings) in order', () => {
    const rows = treeRows([node('g2', null, { sibling_index: 1 }), node('g1', null, { on_path: true })])
    expect(rows.map(describeRow)).toEqual(['g1*', 'g2'])
  })
})
