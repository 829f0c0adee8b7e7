// The canvas's layout actions: lay a workflow out when it opens without a usable layout,
// "Auto layout" (undoable), and fitting the graph into view.
//
// Positions come from lib/workflowLayout.ts over the nodes as Vue Flow measured them; the
// page's dirty check sees the moves like any drag, so a layout is saved with the workflow.
import type { VueFlowStore } from '@vue-flow/core'
import { computed, nextTick, ref, watch } from 'vue'
import { LAYOUT_DEFAULTS, layoutGraph, type LayoutEdge, needsLayout, type PlacedNode, type Point, type Size } from './workflowLayout'

/** The size a node's name and label are set in (WorkflowNode.vue's CSS). */
export const NODE_LABEL_PX = 16
/** Text smaller than this on screen is too small to read comfortably. */
export const READABLE_PX = 12
/** The zoom at which node labels are still READABLE_PX on screen. */
export const READABLE_ZOOM = READABLE_PX / NODE_LABEL_PX
export const FIT_PADDING = LAYOUT_DEFAULTS.padding
export const MIN_ZOOM = 0.2
export const MAX_ZOOM = 2

// A node Vue Flow has not measured yet is taken at about its usual size.
const UNMEASURED: Size = { width: 240, height: 120 }

export interface WorkflowLayoutOptions {
  flow: VueFlowStore
  /** The canvas's size on screen, or null while it is not shown. */
  view: () => Size | null
  edges: () => readonly LayoutEdge[]
}

export function useWorkflowLayout({ flow, view, edges }: WorkflowLayoutOptions) {
  const undoStack = ref<Map<string, Point>[]>([])
  // The view the last fit left: while the user has not moved it since, a canvas that
  // changes size (a status line above it comes or goes) is fitted again.
  let lastFit: { x: number; y: number; zoom: number } | null = null

  function placed(): PlacedNode[] {
    return flow.nodes.value.map((n) => ({
      id: n.id,
      width: n.dimensions.width || UNMEASURED.width,
      height: n.dimensions.height || UNMEASURED.height,
      position: { x: n.position.x, y: n.position.y },
    }))
  }

  function positions(): Map<string, Point> {
    return new Map(flow.nodes.value.map((n) => [n.id, { x: n.position.x, y: n.position.y }]))
  }

  function apply(moved: ReadonlyMap<string, Point>): void {
    for (const [id, position] of moved) {
      if (flow.findNode(id)) flow.updateNode(id, { position: { ...position } })
    }
  }

  function computeLayout(): Map<string, Point> {
    return layoutGraph(placed(), edges(), { view: view() ?? undefined, padding: FIT_PADDING, maxZoom: 1 }).positions
  }

  // The canvas is mounted hidden (until a workflow opens), so the first nodes can be
  // measured before Vue Flow has measured its own pane or set up zooming.
  function viewportReady(): boolean {
    return flow.viewportHelper.value.viewportInitialized && flow.dimensions.value.width > 0 && flow.dimensions.value.height > 0
  }

  async function whenViewportReady(): Promise<void> {
    if (viewportReady()) return
    await new Promise<void>((resolve) => {
      const stop = watch(viewportReady, (ready) => {
        if (!ready) return
        stop()
        resolve()
      })
    })
  }

  /** Show the whole graph, as large as fits up to full size. */
  async function fit(): Promise<void> {
    await nextTick()
    await whenViewportReady()
    await flow.fitView({ padding: FIT_PADDING, maxZoom: 1, minZoom: MIN_ZOOM })
    lastFit = { ...flow.viewport.value }
  }

  function untouched(): boolean {
    const now = flow.viewport.value
    return (
      lastFit !== null &&
      Math.abs(now.x - lastFit.x) < 0.5 &&
      Math.abs(now.y - lastFit.y) < 0.5 &&
      Math.abs(now.zoom - lastFit.zoom) < 1e-4
    )
  }

  /** The canvas changed size: fit again, unless the user has moved the view since. */
  function refit(): void {
    if (!untouched() || !flow.nodes.value.length) return
    // Vue Flow measures its pane in the same resize pass; fit once that is done.
    requestAnimationFrame(() => void fit())
  }

  /** Lay out a workflow just opened when its stored positions cannot be used (none, all
   * on top of each other, or a row too long to read); true when it did. */
  function layoutOnOpen(): boolean {
    undoStack.value = []
    if (!needsLayout(placed(), view() ?? undefined, READABLE_ZOOM, FIT_PADDING)) return false
    apply(computeLayout())
    return true
  }

  async function autoLayout(): Promise<void> {
    if (!flow.nodes.value.length) return
    undoStack.value = [...undoStack.value, positions()]
    apply(computeLayout())
    await fit()
  }

  /** Put the nodes back where they were before the last auto layout. */
  async function undoLayout(): Promise<void> {
    const before = undoStack.value.at(-1)
    if (!before) return
    undoStack.value = undoStack.value.slice(0, -1)
    apply(before)
    await fit()
  }

  function forget(): void {
    undoStack.value = []
    lastFit = null
  }

  return { fit, refit, layoutOnOpen, autoLayout, undoLayout, canUndo: computed(() => undoStack.value.length > 0), forget }
}
