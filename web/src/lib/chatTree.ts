// The conversation's tree as rows for the tree panel.
//
// A chain of messages with one child each stays at one indent; each branch point's
// children go one step in. A long chain shows its first and last few messages and the
// pointer, with a "… n messages" row between that opens it. Iterative, so a 10,000-deep
// chat does not overflow the stack.
import type { TreeNode } from '../api/chat'

export type TreeRow =
  | { kind: 'node'; node: TreeNode; indent: number; pointer: boolean; branches: number }
  | { kind: 'gap'; key: string; count: number; indent: number; onPath: boolean }

/** Messages shown at each end of a folded chain. */
export const CHAIN_ENDS = 2

/** The deepest message on the path root → pointer, i.e. the pointer. */
export function pointerOf(nodes: readonly TreeNode[]): string | null {
  let best: TreeNode | null = null
  for (const n of nodes) if (n.on_path && (best === null || n.depth > best.depth)) best = n
  return best?.id ?? null
}

export function childrenOf(nodes: readonly TreeNode[]): Map<string | null, TreeNode[]> {
  const children = new Map<string | null, TreeNode[]>()
  for (const n of nodes) {
    const key = n.parent_id ?? null
    let list = children.get(key)
    if (!list) children.set(key, (list = []))
    list.push(n)
  }
  for (const list of children.values()) list.sort((a, b) => a.sibling_index - b.sibling_index)
  return children
}

/**
 * Rows in reading order (a depth-first walk, siblings in order). `expanded` holds the keys
 * of the folded stretches the user opened (a gap row's key).
 */
export function treeRows(nodes: readonly TreeNode[], expanded: ReadonlySet<string> = new Set(), ends = CHAIN_ENDS): TreeRow[] {
  const children = childrenOf(nodes)
  const pointer = pointerOf(nodes)
  const known = new Set(nodes.map((n) => n.id))
  // Roots: no parent, or a parent the list does not hold.
  const roots = nodes.filter((n) => n.parent_id === null || !known.has(n.parent_id)).sort((a, b) => a.sibling_index - b.sibling_index)
  const rows: TreeRow[] = []
  const stack: { node: TreeNode; indent: number }[] = roots
    .slice()
    .reverse()
    .map((node) => ({ node, indent: 0 }))
  while (stack.length) {
    const { node, indent } = stack.pop()!
    const chain = [node]
    let last = node
    for (;;) {
      const kids = children.get(last.id) ?? []
      if (kids.length !== 1) break
      last = kids[0]!
      chain.push(last)
    }
    emitChain(rows, chain, indent, pointer, expanded, ends, children)
    const kids = children.get(last.id) ?? []
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ node: kids[i]!, indent: indent + 1 })
  }
  return rows
}

function emitChain(
  rows: TreeRow[],
  chain: TreeNode[],
  indent: number,
  pointer: string | null,
  expanded: ReadonlySet<string>,
  ends: number,
  children: Map<string | null, TreeNode[]>,
): void {
  const row = (node: TreeNode): TreeRow => {
    const n = children.get(node.id)?.length ?? 0
    return { kind: 'node', node, indent, pointer: node.id === pointer, branches: n > 1 ? n : 0 }
  }
  const shown = new Set<number>()
  for (let i = 0; i < chain.length; i++) {
    if (i < ends || i >= chain.length - ends || chain[i]!.id === pointer) shown.add(i)
  }
  let i = 0
  while (i < chain.length) {
    if (shown.has(i)) {
      rows.push(row(chain[i]!))
      i++
      continue
    }
    let j = i
    while (j < chain.length && !shown.has(j)) j++
    const hidden = chain.slice(i, j)
    const key = hidden[0]!.id
    if (hidden.length < 2 || expanded.has(key)) for (const node of hidden) rows.push(row(node))
    else rows.push({ kind: 'gap', key, count: hidden.length, indent, onPath: hidden.some((n) => n.on_path) })
    i = j
  }
}
