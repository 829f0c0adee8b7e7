// Auto-layout of a workflow graph for the canvas: layers left to right, wrapped into bands
// when one row of layers would not fit the view at a readable zoom.
//
// Pure functions over node sizes and edges, no Vue Flow: the page measures the nodes, asks
// for positions and moves them. The steps are the usual layered (Sugiyama-style) ones,
// kept small:
//
// 1. Layers by longest path from the sources: a node sits one layer right of its furthest
//    upstream node, so every edge points to a later layer.
// 2. The order within each layer by barycenter sweeps (down, then up, a few times), keeping
//    the order with the fewest crossings between neighbouring layers.
// 3. Columns left to right, one per layer, nodes stacked and centred in their column.
// 4. A long chain (the chat pipeline is eleven layers of one node) is wrapped: consecutive
//    layers go into bands laid out top to bottom, read like lines of text. The number of
//    layers per band is the one that lets the whole graph be shown at the largest zoom in
//    the given view; without a view there is one band.
//
// Everything is deterministic: ties keep the nodes' order in the file.

export interface Size {
  width: number
  height: number
}

export interface Point {
  x: number
  y: number
}

export interface LayoutNode extends Size {
  id: string
}

export interface LayoutEdge {
  source: string
  target: string
}

export interface LayoutOptions {
  /** Horizontal space between two layers' columns. */
  layerGap?: number
  /** Vertical space between two nodes of one layer. */
  nodeGap?: number
  /** Vertical space between two bands. */
  bandGap?: number
  /** The view the graph should fill: layers wrap into bands to fit it best. */
  view?: Size
  /** The padding the view's fit adds around the graph, as a fraction of its size. */
  padding?: number
  /** The zoom the view will not go above; a layout that fits at it is as good as any. */
  maxZoom?: number
}

export interface Layout {
  /** Each node's top-left corner, by id. */
  positions: Map<string, Point>
  /** Which band each node went into (0 is the top one), by id. */
  bands: Map<string, number>
  /** The layout's bounding box (it starts at 0, 0). */
  width: number
  height: number
  /** Layers per band. */
  layersPerBand: number
}

export const LAYOUT_DEFAULTS = {
  layerGap: 48,
  nodeGap: 24,
  bandGap: 48,
  padding: 0.06,
  maxZoom: 1,
} as const

const SWEEPS = 8

/** The zoom at which a box of `size` fits `view`, as Vue Flow's fitView works it out
 * (the box grown by `padding` of itself), capped at `maxZoom`. */
export function fitZoom(size: Size, view: Size, padding: number = LAYOUT_DEFAULTS.padding, maxZoom = Infinity): number {
  const width = Math.max(size.width, 1) * (1 + padding)
  const height = Math.max(size.height, 1) * (1 + padding)
  return Math.min(view.width / width, view.height / height, maxZoom)
}

/** The edges worth laying out: between two known, different nodes, each pair once. */
function usableEdges(nodes: readonly LayoutNode[], edges: readonly LayoutEdge[]): LayoutEdge[] {
  const known = new Set(nodes.map((n) => n.id))
  const seen = new Set<string>()
  const out: LayoutEdge[] = []
  for (const e of edges) {
    const key = `${e.source}\u0000${e.target}`
    if (e.source === e.target || !known.has(e.source) || !known.has(e.target) || seen.has(key)) continue
    seen.add(key)
    out.push({ source: e.source, target: e.target })
  }
  return out
}

/**
 * Each node's layer: 0 for a node nothing feeds, else one more than its furthest upstream
 * node. A cycle (a graph being edited may hold one) is broken at its first node in file
 * order, whose edges from inside the cycle are then left out.
 */
export function assignLayers(nodes: readonly LayoutNode[], edges: readonly LayoutEdge[]): Map<string, number> {
  const index = new Map(nodes.map((n, i) => [n.id, i]))
  const preds = new Map<string, string[]>(nodes.map((n) => [n.id, []]))
  const succs = new Map<string, string[]>(nodes.map((n) => [n.id, []]))
  for (const e of usableEdges(nodes, edges)) {
    preds.get(e.target)!.push(e.source)
    succs.get(e.source)!.push(e.target)
  }
  const waiting = new Map(nodes.map((n) => [n.id, preds.get(n.id)!.length]))
  const placed = new Set<string>()
  const layer = new Map<string, number>()
  // Ready nodes in file order; a sorted array is plenty for canvas-sized graphs.
  let ready = nodes.filter((n) => waiting.get(n.id) === 0).map((n) => n.id)
  while (placed.size < nodes.length) {
    if (!ready.length) {
      // Only cycles are left: start from the first of their nodes in file order.
      ready = [nodes.find((n) => !placed.has(n.id))!.id]
    }
    const id = ready.shift()!
    if (placed.has(id)) continue
    placed.add(id)
    const from = preds.get(id)!.filter((p) => placed.has(p) && p !== id)
    layer.set(id, from.length ? Math.max(...from.map((p) => layer.get(p)! + 1)) : 0)
    for (const next of succs.get(id)!) {
      if (placed.has(next)) continue
      const left = waiting.get(next)! - 1
      waiting.set(next, left)
      if (left === 0) {
        ready.push(next)
        ready.sort((a, b) => index.get(a)! - index.get(b)!)
      }
    }
  }
  return layer
}

/** Crossings between the edges joining neighbouring layers, with the layers in `order`. */
export function countCrossings(order: readonly (readonly string[])[], edges: readonly LayoutEdge[]): number {
  const where = new Map<string, [number, number]>()
  order.forEach((ids, l) => ids.forEach((id, i) => where.set(id, [l, i])))
  const byGap = new Map<number, [number, number][]>()
  for (const e of edges) {
    const s = where.get(e.source)
    const t = where.get(e.target)
    if (!s || !t || t[0] !== s[0] + 1) continue
    byGap.set(s[0], [...(byGap.get(s[0]) ?? []), [s[1], t[1]]])
  }
  let crossings = 0
  for (const pairs of byGap.values()) {
    for (let i = 0; i < pairs.length; i++) {
      for (let j = i + 1; j < pairs.length; j++) {
        const [a, b] = [pairs[i]!, pairs[j]!]
        if ((a[0] - b[0]) * (a[1] - b[1]) < 0) crossings++
      }
    }
  }
  return crossings
}

/**
 * The nodes of each layer, top to bottom: file order first, then barycenter sweeps (a
 * node moves towards the mean place of its neighbours in earlier layers going down, in
 * later layers going up); the order with the fewest crossings wins, the first on a tie.
 */
export function orderLayers(
  nodes: readonly LayoutNode[],
  edges: readonly LayoutEdge[],
  layer: ReadonlyMap<string, number>,
): string[][] {
  const usable = usableEdges(nodes, edges)
  const count = nodes.length ? Math.max(...nodes.map((n) => layer.get(n.id) ?? 0)) + 1 : 0
  let order: string[][] = Array.from({ length: count }, () => [])
  for (const n of nodes) order[layer.get(n.id) ?? 0]!.push(n.id)
  const preds = new Map<string, string[]>(nodes.map((n) => [n.id, []]))
  const succs = new Map<string, string[]>(nodes.map((n) => [n.id, []]))
  for (const e of usable) {
    if ((layer.get(e.target) ?? 0) <= (layer.get(e.source) ?? 0)) continue
    preds.get(e.target)!.push(e.source)
    succs.get(e.source)!.push(e.target)
  }

  // A node's place as a fraction of its layer, so layers of different sizes compare.
  const place = (current: string[][]): Map<string, number> => {
    const at = new Map<string, number>()
    for (const ids of current) ids.forEach((id, i) => at.set(id, (i + 0.5) / ids.length))
    return at
  }
  const sweep = (current: string[][], layers: number[], neighbours: Map<string, string[]>): string[][] => {
    const next = current.map((ids) => [...ids])
    for (const l of layers) {
      const at = place(next)
      const keyed = next[l]!.map((id, i) => {
        const near = neighbours.get(id)!.map((n) => at.get(n)!)
        return { id, i, key: near.length ? near.reduce((a, b) => a + b, 0) / near.length : at.get(id)! }
      })
      keyed.sort((a, b) => a.key - b.key || a.i - b.i)
      next[l] = keyed.map((k) => k.id)
    }
    return next
  }

  let best = order
  let fewest = countCrossings(order, usable)
  const down = Array.from({ length: count }, (_, l) => l).slice(1)
  const up = Array.from({ length: count }, (_, l) => count - 1 - l).slice(1)
  for (let s = 0; s < SWEEPS && fewest > 0; s++) {
    order = s % 2 === 0 ? sweep(order, down, preds) : sweep(order, up, succs)
    const crossings = countCrossings(order, usable)
    if (crossings < fewest) {
      best = order
      fewest = crossings
    }
  }
  return best
}

interface Column {
  ids: string[]
  width: number
  height: number
}

function bandsOf(columns: readonly Column[], perBand: number): Column[][] {
  const bands: Column[][] = []
  for (let i = 0; i < columns.length; i += perBand) bands.push(columns.slice(i, i + perBand))
  return bands
}

function bandSize(band: readonly Column[], layerGap: number): Size {
  return {
    width: band.reduce((sum, c) => sum + c.width, 0) + layerGap * Math.max(band.length - 1, 0),
    height: Math.max(0, ...band.map((c) => c.height)),
  }
}

function boxOf(bands: readonly Column[][], layerGap: number, bandGap: number): Size {
  const sizes = bands.map((b) => bandSize(b, layerGap))
  return {
    width: Math.max(0, ...sizes.map((s) => s.width)),
    height: sizes.reduce((sum, s) => sum + s.height, 0) + bandGap * Math.max(sizes.length - 1, 0),
  }
}

/** Positions for every node: layers left to right, wrapped into bands to fit `view`. */
export function layoutGraph(nodes: readonly LayoutNode[], edges: readonly LayoutEdge[], options: LayoutOptions = {}): Layout {
  const { layerGap, nodeGap, bandGap, padding, maxZoom } = { ...LAYOUT_DEFAULTS, ...options }
  const size = new Map(nodes.map((n) => [n.id, n]))
  const layer = assignLayers(nodes, edges)
  const columns: Column[] = orderLayers(nodes, edges, layer).map((ids) => ({
    ids,
    width: Math.max(0, ...ids.map((id) => size.get(id)!.width)),
    height: ids.reduce((sum, id) => sum + size.get(id)!.height, 0) + nodeGap * Math.max(ids.length - 1, 0),
  }))

  // Fewest bands first: more bands win only when they show the graph larger.
  let perBand = Math.max(columns.length, 1)
  if (options.view && columns.length > 1) {
    let bestZoom = -1
    for (let per = columns.length; per >= 1; per--) {
      const zoom = fitZoom(boxOf(bandsOf(columns, per), layerGap, bandGap), options.view, padding, maxZoom)
      if (zoom > bestZoom + 1e-9) {
        bestZoom = zoom
        perBand = per
      }
    }
  }

  const bands = bandsOf(columns, perBand)
  const positions = new Map<string, Point>()
  const bandOf = new Map<string, number>()
  let top = 0
  bands.forEach((band, b) => {
    const { height } = bandSize(band, layerGap)
    let left = 0
    for (const column of band) {
      let y = top + (height - column.height) / 2
      for (const id of column.ids) {
        const node = size.get(id)!
        positions.set(id, { x: Math.round(left + (column.width - node.width) / 2), y: Math.round(y) })
        bandOf.set(id, b)
        y += node.height + nodeGap
      }
      left += column.width + layerGap
    }
    top += height + bandGap
  })
  const box = boxOf(bands, layerGap, bandGap)
  return { positions, bands: bandOf, width: box.width, height: box.height, layersPerBand: perBand }
}

export interface PlacedNode extends Size {
  id: string
  position: Point
}

/** Whether two placed nodes' boxes overlap (touching edges do not). */
export function overlap(a: PlacedNode, b: PlacedNode): boolean {
  return (
    a.position.x < b.position.x + b.width &&
    b.position.x < a.position.x + a.width &&
    a.position.y < b.position.y + b.height &&
    b.position.y < a.position.y + a.height
  )
}

/** The bounding box of placed nodes. */
export function boundsOf(nodes: readonly PlacedNode[]): Size & Point {
  if (!nodes.length) return { x: 0, y: 0, width: 0, height: 0 }
  const x = Math.min(...nodes.map((n) => n.position.x))
  const y = Math.min(...nodes.map((n) => n.position.y))
  return {
    x,
    y,
    width: Math.max(...nodes.map((n) => n.position.x + n.width)) - x,
    height: Math.max(...nodes.map((n) => n.position.y + n.height)) - y,
  }
}

/** The fewest nodes in one row that count as a row too long to read (the built-in chat
 * pipeline was saved as eleven in a row). Fewer in a row were put there by hand. */
export const LONG_ROW = 4

/**
 * Whether a workflow opened as it is stored needs laying out: its nodes overlap (nothing
 * was stored: they all sit at 0, 0), or a row of LONG_ROW or more nodes is too wide to be
 * read in `view` (it fits only below `readableZoom`).
 */
export function needsLayout(
  nodes: readonly PlacedNode[],
  view?: Size,
  readableZoom = 0,
  padding: number = LAYOUT_DEFAULTS.padding,
): boolean {
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) if (overlap(nodes[i]!, nodes[j]!)) return true
  }
  if (nodes.length < LONG_ROW || !view) return false
  const first = nodes[0]!.position.y
  const oneRow = nodes.every((n) => Math.abs(n.position.y - first) < 1)
  return oneRow && fitZoom(boundsOf(nodes), view, padding) < readableZoom
}
