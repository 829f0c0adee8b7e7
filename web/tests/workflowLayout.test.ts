import { describe, expect, it } from 'vitest'
import {
  assignLayers,
  countCrossings,
  fitZoom,
  type Layout,
  type LayoutEdge,
  layoutGraph,
  type LayoutNode,
  needsLayout,
  orderLayers,
  overlap,
  type PlacedNode,
} from '../src/lib/workflowLayout'

// The built-in chat pipeline (storyloom/chat/prompt/default_pipeline.py), with the sizes
// its nodes measure on the canvas (slot rows make the parser, updater and output tall).
const PIPELINE: LayoutNode[] = [
  ['input', 240, 100],
  ['builder', 250, 100],
  ['ast', 240, 126],
  ['regex', 240, 126],
  ['script', 240, 100],
  ['budget', 240, 100],
  ['weaver', 240, 100],
  ['invoker', 240, 126],
  ['parser', 250, 206],
  ['updater', 270, 206],
  ['output', 240, 280],
].map(([id, width, height]) => ({ id: id as string, width: width as number, height: height as number }))

const PIPELINE_EDGES: LayoutEdge[] = [
  'input builder',
  'input ast',
  'input regex',
  'input updater',
  'builder ast',
  'ast regex',
  'regex script',
  'script budget',
  'budget weaver',
  'weaver invoker',
  'invoker parser',
  'parser updater',
  'budget updater',
  'parser output',
  'updater output',
  'budget output',
  'weaver output',
  'invoker output',
].map((pair) => {
  const [source, target] = pair.split(' ') as [string, string]
  return { source, target }
})

function placed(nodes: readonly LayoutNode[], layout: Layout): PlacedNode[] {
  return nodes.map((n) => ({ ...n, position: layout.positions.get(n.id)! }))
}

function overlapping(nodes: readonly PlacedNode[]): [string, string][] {
  const found: [string, string][] = []
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) if (overlap(nodes[i]!, nodes[j]!)) found.push([nodes[i]!.id, nodes[j]!.id])
  }
  return found
}

/** Edges that do not run left to right: the target's left side is not right of the
 * source's right side. */
function backwards(nodes: readonly PlacedNode[], edges: readonly LayoutEdge[]): LayoutEdge[] {
  const at = new Map(nodes.map((n) => [n.id, n]))
  return edges.filter((e) => {
    const s = at.get(e.source)!
    const t = at.get(e.target)!
    return !(t.position.x > s.position.x + s.width)
  })
}

/** Edges that do not read forward: left to right within a band, else into a later band
 * lying wholly below the source. */
function notForward(nodes: readonly PlacedNode[], edges: readonly LayoutEdge[], layout: Layout): LayoutEdge[] {
  const at = new Map(nodes.map((n) => [n.id, n]))
  return edges.filter((e) => {
    const s = at.get(e.source)!
    const t = at.get(e.target)!
    const [sb, tb] = [layout.bands.get(e.source)!, layout.bands.get(e.target)!]
    if (sb === tb) return !(t.position.x > s.position.x + s.width)
    return !(tb > sb && t.position.y > s.position.y + s.height)
  })
}

/** A small seeded generator, so the random graphs are the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

function randomDag(seed: number): { nodes: LayoutNode[]; edges: LayoutEdge[] } {
  const next = random(seed)
  const count = 1 + Math.floor(next() * 18)
  const nodes = Array.from({ length: count }, (_, i) => ({
    id: `n${i}`,
    width: 180 + Math.floor(next() * 120),
    height: 60 + Math.floor(next() * 220),
  }))
  // Edges only from an earlier to a later index make a DAG; the nodes are then shuffled so
  // file order is not the topological order.
  const edges: LayoutEdge[] = []
  for (let i = 0; i < count; i++) {
    for (let j = i + 1; j < count; j++) if (next() < 0.25) edges.push({ source: `n${i}`, target: `n${j}` })
  }
  for (let i = nodes.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1))
    ;[nodes[i], nodes[j]] = [nodes[j]!, nodes[i]!]
  }
  return { nodes, edges }
}

describe('layers', () => {
  it('puts each node one layer right of its furthest upstream node', () => {
    const layer = assignLayers(PIPELINE, PIPELINE_EDGES)
    expect(PIPELINE.map((n) => layer.get(n.id))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    for (const e of PIPELINE_EDGES) expect(layer.get(e.target)!).toBeGreaterThan(layer.get(e.source)!)
  })

  it('breaks a cycle instead of looping, and ignores edges to unknown nodes and to itself', () => {
    const nodes = ['a', 'b', 'c'].map((id) => ({ id, width: 100, height: 50 }))
    const edges = [
      { source: 'a', target: 'b' },
      { source: 'b', target: 'c' },
      { source: 'c', target: 'a' },
      { source: 'c', target: 'c' },
      { source: 'ghost', target: 'a' },
    ]
    const layer = assignLayers(nodes, edges)
    expect([...layer.entries()]).toEqual([
      ['a', 0],
      ['b', 1],
      ['c', 2],
    ])
    const layout = layoutGraph(nodes, edges)
    expect(layout.positions.size).toBe(3)
    expect(overlapping(placed(nodes, layout))).toEqual([])
  })
})

describe('order within layers', () => {
  it('uncrosses edges that file order crosses', () => {
    // a→y and b→x cross when x comes before y, as the file has them.
    const nodes = ['a', 'b', 'x', 'y'].map((id) => ({ id, width: 100, height: 50 }))
    const edges = [
      { source: 'a', target: 'y' },
      { source: 'b', target: 'x' },
    ]
    const layer = assignLayers(nodes, edges)
    expect(countCrossings([['a', 'b'], ['x', 'y']], edges)).toBe(1)
    const order = orderLayers(nodes, edges, layer)
    expect(countCrossings(order, edges)).toBe(0)
  })

  it('never ends with more crossings than file order', () => {
    for (let seed = 1; seed <= 150; seed++) {
      const { nodes, edges } = randomDag(seed)
      const layer = assignLayers(nodes, edges)
      const fileOrder: string[][] = []
      for (const n of nodes) (fileOrder[layer.get(n.id)!] ??= []).push(n.id)
      expect(countCrossings(orderLayers(nodes, edges, layer), edges)).toBeLessThanOrEqual(countCrossings(fileOrder, edges))
    }
  })
})

describe('layoutGraph', () => {
  it('lays the chat pipeline out left to right without overlaps', () => {
    const layout = layoutGraph(PIPELINE, PIPELINE_EDGES)
    const nodes = placed(PIPELINE, layout)
    expect(layout.layersPerBand).toBe(11)
    expect(overlapping(nodes)).toEqual([])
    expect(backwards(nodes, PIPELINE_EDGES)).toEqual([])
  })

  it('wraps the chat pipeline into bands that a laptop canvas shows at a readable zoom', () => {
    // The canvas of a 1440×900 window with the side panel closed, and with it open.
    for (const view of [
      { width: 960, height: 680 },
      { width: 670, height: 680 },
    ]) {
      const layout = layoutGraph(PIPELINE, PIPELINE_EDGES, { view })
      const nodes = placed(PIPELINE, layout)
      expect(layout.layersPerBand).toBeLessThan(11)
      expect(overlapping(nodes)).toEqual([])
      expect(notForward(nodes, PIPELINE_EDGES, layout)).toEqual([])
      const zoom = fitZoom(layout, view)
      const oneRow = fitZoom(layoutGraph(PIPELINE, PIPELINE_EDGES), view)
      expect(zoom).toBeGreaterThan(oneRow * 2)
    }
    // Wide enough, the pipeline fits at full size in one band of more layers.
    const wide = layoutGraph(PIPELINE, PIPELINE_EDGES, { view: { width: 1300, height: 700 } })
    expect(fitZoom(wide, { width: 1300, height: 700 })).toBeGreaterThanOrEqual(0.85)
  })

  it('keeps a small graph in one band when it fits at full size', () => {
    const nodes = ['a', 'b'].map((id) => ({ id, width: 200, height: 80 }))
    const layout = layoutGraph(nodes, [{ source: 'a', target: 'b' }], { view: { width: 900, height: 600 } })
    expect(layout.layersPerBand).toBe(2)
    expect(layout.positions.get('a')!.y).toBe(layout.positions.get('b')!.y)
  })

  it('is deterministic', () => {
    const view = { width: 900, height: 640 }
    const first = layoutGraph(PIPELINE, PIPELINE_EDGES, { view })
    const again = layoutGraph(
      PIPELINE.map((n) => ({ ...n })),
      PIPELINE_EDGES.map((e) => ({ ...e })),
      { view },
    )
    expect([...again.positions.entries()]).toEqual([...first.positions.entries()])
    for (let seed = 1; seed <= 40; seed++) {
      const { nodes, edges } = randomDag(seed)
      expect([...layoutGraph(nodes, edges, { view }).positions]).toEqual([...layoutGraph(nodes, edges, { view }).positions])
    }
  })

  it('never overlaps and always reads forward, on random graphs and views', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const { nodes, edges } = randomDag(seed)
      const next = random(seed * 7919)
      const view = { width: 300 + Math.floor(next() * 1500), height: 300 + Math.floor(next() * 900) }
      const flat = layoutGraph(nodes, edges)
      expect(overlapping(placed(nodes, flat)), `seed ${seed}`).toEqual([])
      expect(backwards(placed(nodes, flat), edges), `seed ${seed}`).toEqual([])
      const wrapped = layoutGraph(nodes, edges, { view })
      expect(overlapping(placed(nodes, wrapped)), `seed ${seed}`).toEqual([])
      expect(notForward(placed(nodes, wrapped), edges, wrapped), `seed ${seed}`).toEqual([])
      // Wrapping is chosen only when it shows the graph at least as large.
      expect(fitZoom(wrapped, view, undefined, 1)).toBeGreaterThanOrEqual(fitZoom(flat, view, undefined, 1) - 1e-9)
    }
  })

  it('lays out nothing for no nodes', () => {
    const layout = layoutGraph([], [], { view: { width: 800, height: 600 } })
    expect(layout.positions.size).toBe(0)
    expect([layout.width, layout.height]).toEqual([0, 0])
  })
})

describe('needsLayout', () => {
  const at = (id: string, x: number, y: number): PlacedNode => ({ id, width: 240, height: 100, position: { x, y } })
  const view = { width: 960, height: 680 }

  it('lays out nodes stored without positions (all at the origin) or on top of each other', () => {
    expect(needsLayout([at('a', 0, 0), at('b', 0, 0)])).toBe(true)
    expect(needsLayout([at('a', 0, 0), at('b', 100, 40)])).toBe(true)
  })

  it('lays out a long row only when it cannot be read in the view', () => {
    const row = Array.from({ length: 11 }, (_, i) => at(`n${i}`, i * 300, 0))
    expect(needsLayout(row, view, 0.85)).toBe(true)
    expect(needsLayout(row.slice(0, 3), view, 0.85)).toBe(false)
    expect(needsLayout(row, { width: 4000, height: 900 }, 0.85)).toBe(false)
    expect(needsLayout(row, undefined, 0.85)).toBe(false)
  })

  it('keeps a layout made by hand', () => {
    const grid = Array.from({ length: 8 }, (_, i) => at(`n${i}`, (i % 4) * 300, Math.floor(i / 4) * 160))
    expect(needsLayout(grid, view, 0.85)).toBe(false)
  })
})
