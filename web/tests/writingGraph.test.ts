import { describe, expect, it } from 'vitest'
import type { BookGraph } from '../src/api/writing'
import { circleLayout } from '../src/lib/writingGraph'

const GRAPH: BookGraph = {
  nodes: [
    { path: '/entities/characters/wu', title: 'Wu', kind: 'character' },
    { path: '/entities/characters/lin', title: 'Lin', kind: 'character' },
    { path: '/entities/locations/harbor', title: 'Harbor', kind: 'location' },
  ],
  edges: [
    { from: '/entities/characters/lin', to: '/entities/characters/wu', kind: '冲突', reason: 'rivals', chapter: 2 },
    { from: '/entities/characters/wu', to: '/entities/characters/lin', kind: '关联', reason: 'siblings', chapter: 1 },
    { from: '/entities/characters/lin', to: '/entities/characters/ghost', kind: '涉及', reason: '', chapter: 3 },
  ],
}

describe('relations graph layout', () => {
  it('places the same graph identically whatever the order of its nodes', () => {
    const shuffled: BookGraph = { nodes: [...GRAPH.nodes].reverse(), edges: GRAPH.edges }
    expect(circleLayout(shuffled)).toEqual(circleLayout(GRAPH))
  })

  it('puts nodes on a circle sorted by path starting at the top', () => {
    const layout = circleLayout(GRAPH, { size: 200, margin: 20 })
    expect(layout.nodes.map((n) => n.path)).toEqual([
      '/entities/characters/lin',
      '/entities/characters/wu',
      '/entities/locations/harbor',
    ])
    expect(layout.nodes[0]).toMatchObject({ x: 100, y: 20 })
    for (const n of layout.nodes) expect(Math.hypot(n.x - 100, n.y - 100)).toBeCloseTo(80, 0)
  })

  it('drops edges to entities not in the graph', () => {
    const layout = circleLayout(GRAPH)
    expect(layout.edges.map((e) => e.kind)).toEqual(['冲突', '关联'])
  })

  it('moves the labels of edges between the same pair apart', () => {
    const [a, b] = circleLayout(GRAPH).edges
    expect(a!.labelX).toBe(b!.labelX)
    expect(b!.labelY).not.toBe(a!.labelY)
  })

  it('centres a single node', () => {
    const layout = circleLayout({ nodes: [GRAPH.nodes[0]!], edges: [] }, { size: 300 })
    expect(layout.nodes[0]).toMatchObject({ x: 150, y: 150 })
  })
})
