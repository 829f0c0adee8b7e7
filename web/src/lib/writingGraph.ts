// The relations graph drawn as a circle: nodes sorted by path and spaced evenly around it,
// so the same graph always lands in the same place (no physics, no randomness).
import type { BookGraph } from '../api/writing'

export interface PlacedNode {
  path: string
  title: string
  kind: string
  x: number
  y: number
}

export interface PlacedEdge {
  from: string
  to: string
  kind: string
  reason: string
  chapter: number
  x1: number
  y1: number
  x2: number
  y2: number
  /** Where the kind label sits: the middle, nudged apart for edges between the same pair. */
  labelX: number
  labelY: number
}

export interface GraphLayout {
  width: number
  height: number
  nodes: PlacedNode[]
  edges: PlacedEdge[]
}

export interface LayoutOptions {
  size?: number
  margin?: number
}

const round = (n: number) => Math.round(n * 10) / 10

export function circleLayout(graph: BookGraph, options: LayoutOptions = {}): GraphLayout {
  const size = options.size ?? 420
  const margin = options.margin ?? 60
  const center = size / 2
  const radius = Math.max(0, center - margin)
  const sorted = [...graph.nodes].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  const unique = sorted.filter((n, i) => i === 0 || sorted[i - 1]!.path !== n.path)
  const nodes: PlacedNode[] = unique.map((n, i) => {
    // Start at the top and go clockwise; a single node sits in the middle.
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, unique.length)
    const r = unique.length === 1 ? 0 : radius
    return { path: n.path, title: n.title || n.path, kind: n.kind, x: round(center + r * Math.cos(angle)), y: round(center + r * Math.sin(angle)) }
  })
  const at = new Map(nodes.map((n) => [n.path, n]))
  const pairCount = new Map<string, number>()
  const edges: PlacedEdge[] = []
  for (const e of graph.edges) {
    const a = at.get(e.from)
    const b = at.get(e.to)
    if (!a || !b) continue
    const pair = [e.from, e.to].sort().join('\u0000')
    const index = pairCount.get(pair) ?? 0
    pairCount.set(pair, index + 1)
    edges.push({
      ...e,
      x1: a.x,
      y1: a.y,
      x2: b.x,
      y2: b.y,
      labelX: round((a.x + b.x) / 2),
      labelY: round((a.y + b.y) / 2 + index * 14),
    })
  }
  return { width: size, height: size, nodes, edges }
}
