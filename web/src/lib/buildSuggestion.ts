// Role B on the canvas: the agent's proposed change to a workflow (`build:suggestion`)
// shown as a diff — its nodes and edges drawn beside the workflow's own, marked "proposed"
// (dashed) — until the author accepts (`build:accept` → `build:applied`, the workflow is
// reloaded from the server) or rejects it (`build:reject` → `build:rejected`).
//
// Proposed items live in the same Vue Flow store as the workflow's, flagged in their data,
// so the canvas lays them out and draws their edges between real handles; the page leaves
// them out of the workflow it saves (`withoutProposed`), so nothing changes until accept.
import { getCurrentInstance, onBeforeUnmount, ref } from 'vue'
import type { WorkflowEdge, WorkflowNode } from '../api/workflows'
import type { Connection, ServerMessage } from './connection'
import { FLOW_NODE_TYPE, type FlowEdge, flowEdgeId, type FlowNode } from './workflowGraph'

export interface BuildSuggestion {
  suggestionId: string
  workflowId: string
  nodes: WorkflowNode[]
  edges: WorkflowEdge[]
  explanation: string
}

/** A proposed node: not selectable, connectable or deletable, so nothing edits it. */
export type ProposedNode = FlowNode & {
  data: FlowNode['data'] & { proposed: true }
  class: string
  selectable: false
  connectable: false
  deletable: false
}

export type ProposedEdge = FlowEdge & {
  data: FlowEdge['data'] & { proposed: true }
  class: string
  selectable: false
  deletable: false
  updatable: false
}

export const PROPOSED_CLASS = 'wf-proposed'
/** The dash of a proposed edge's stroke. */
export const PROPOSED_DASH = '6 4'

function isRecord(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value)
}

/** The suggestion a `build:suggestion` message carries, or null when it is malformed. */
export function parseSuggestion(message: ServerMessage): BuildSuggestion | null {
  const { suggestionId, workflowId, nodes, edges, explanation } = message
  if (typeof suggestionId !== 'string' || typeof workflowId !== 'string') return null
  if (!Array.isArray(nodes) || !Array.isArray(edges)) return null
  const okNodes = nodes.filter((n): n is WorkflowNode => isRecord(n) && typeof n.id === 'string' && typeof n.type === 'string')
  const okEdges = edges.filter(
    (e): e is WorkflowEdge =>
      isRecord(e) &&
      typeof e.source === 'string' &&
      typeof e.target === 'string' &&
      typeof e.sourceSlot === 'string' &&
      typeof e.targetSlot === 'string',
  )
  return { suggestionId, workflowId, nodes: okNodes, edges: okEdges, explanation: typeof explanation === 'string' ? explanation : '' }
}

export function isProposed(item: { data?: unknown }): boolean {
  return isRecord(item.data) && item.data.proposed === true
}

/** The workflow's own nodes or edges: what is saved, validated and run. */
export function withoutProposed<T extends { data?: unknown }>(items: readonly T[]): T[] {
  return items.filter((item) => !isProposed(item))
}

/**
 * The suggestion as canvas items. The server gives its nodes the ids they will be applied
 * with; one that clashes with a node shown now (added since the request) is drawn under a
 * free id, and its edges follow.
 */
export function proposedGraph(
  suggestion: BuildSuggestion,
  shownIds: Iterable<string>,
): { nodes: ProposedNode[]; edges: ProposedEdge[]; ids: Record<string, string> } {
  const taken = new Set(shownIds)
  const ids: Record<string, string> = {}
  for (const node of suggestion.nodes) {
    let id = node.id
    for (let n = 2; taken.has(id); n++) id = `${node.id}~${n}`
    taken.add(id)
    ids[node.id] = id
  }
  const nodes = suggestion.nodes.map((node): ProposedNode => {
    const { id, type, label, config, position, ...extra } = node
    return {
      id: ids[id] ?? id,
      type: FLOW_NODE_TYPE,
      position: { x: position?.x ?? 0, y: position?.y ?? 0 },
      data: { nodeType: type, label: label ?? '', config: config ?? {}, extra, proposed: true },
      class: PROPOSED_CLASS,
      selectable: false,
      connectable: false,
      deletable: false,
    }
  })
  const edges = suggestion.edges.map((edge): ProposedEdge => {
    const source = ids[edge.source] ?? edge.source
    const target = ids[edge.target] ?? edge.target
    return {
      // Its own id space: the same connection may exist already.
      id: `proposed:${flowEdgeId(source, edge.sourceSlot, target, edge.targetSlot)}`,
      source,
      target,
      sourceHandle: edge.sourceSlot,
      targetHandle: edge.targetSlot,
      data: { fileId: null, extra: {}, proposed: true },
      class: PROPOSED_CLASS,
      selectable: false,
      deletable: false,
      updatable: false,
    }
  })
  return { nodes, edges, ids }
}

/** The displayed graph with the suggestion drawn in (an earlier proposal replaced). */
export function mergeProposal<N extends { id: string; data?: unknown }, E extends { data?: unknown }>(
  nodes: readonly N[],
  edges: readonly E[],
  suggestion: BuildSuggestion,
): { nodes: (N | ProposedNode)[]; edges: (E | ProposedEdge)[] } {
  const ownNodes = withoutProposed(nodes)
  const proposed = proposedGraph(
    suggestion,
    ownNodes.map((n) => n.id),
  )
  return { nodes: [...ownNodes, ...proposed.nodes], edges: [...withoutProposed(edges), ...proposed.edges] }
}

/** The displayed graph without any proposal. */
export function clearProposal<N extends { data?: unknown }, E extends { data?: unknown }>(
  nodes: readonly N[],
  edges: readonly E[],
): { nodes: N[]; edges: E[] } {
  return { nodes: withoutProposed(nodes), edges: withoutProposed(edges) }
}

/** A proposed edge's stroke: its slot colour, dashed. */
export function proposedEdgeStyle(style: Record<string, string | number> | undefined): Record<string, string | number> {
  return { ...(style ?? {}), strokeDasharray: PROPOSED_DASH }
}

export type BuildPending = 'request' | 'accept' | 'reject' | null

export interface BuildSuggestionOptions {
  connection: Connection | null
  /** Draw the suggestion on the canvas (when it is for the open workflow). */
  show: (suggestion: BuildSuggestion) => void
  /** Take the proposal off the canvas. */
  clear: () => void
  /** The server applied the suggestion to `workflowId`: show the workflow as it is now. */
  applied: (workflowId: string) => void
  /** The server closed the suggestion unapplied. */
  rejected?: () => void
}

/** The Role B conversation of the Workflows page over the WebSocket. */
export function useBuildSuggestion(options: BuildSuggestionOptions) {
  const { connection } = options
  const suggestion = ref<BuildSuggestion | null>(null)
  const pending = ref<BuildPending>(null)
  const error = ref('')

  function forget(): void {
    if (suggestion.value) options.clear()
    suggestion.value = null
    pending.value = null
    error.value = ''
  }

  function request(intent: string, currentWorkflow: string | null): boolean {
    const text = intent.trim()
    if (!text || !connection || pending.value) return false
    forget()
    pending.value = 'request'
    const message: ServerMessage = { type: 'build:request', intent: text }
    if (currentWorkflow) message.currentWorkflow = currentWorkflow
    connection.send(message)
    return true
  }

  function accept(): void {
    const s = suggestion.value
    if (!s || !connection || pending.value) return
    error.value = ''
    pending.value = 'accept'
    connection.send({ type: 'build:accept', suggestionId: s.suggestionId })
  }

  function reject(reason: string): void {
    const s = suggestion.value
    if (!s || !connection || pending.value) return
    error.value = ''
    pending.value = 'reject'
    const message: ServerMessage = { type: 'build:reject', suggestionId: s.suggestionId }
    if (reason.trim()) message.reason = reason.trim()
    connection.send(message)
  }

  function onSuggestion(message: ServerMessage): void {
    if (pending.value !== 'request') return
    const parsed = parseSuggestion(message)
    pending.value = null
    if (!parsed) return
    suggestion.value = parsed
    options.show(parsed)
  }

  function onDecided(message: ServerMessage): void {
    const s = suggestion.value
    if (!s || message.suggestionId !== s.suggestionId) return
    const workflowId = typeof message.workflowId === 'string' ? message.workflowId : s.workflowId
    const wasApplied = message.type === 'build:applied'
    forget()
    if (wasApplied) options.applied(workflowId)
    else options.rejected?.()
  }

  // Errors come back as the connection's `status: error`; one arriving while this page
  // waits on Role B is its answer.
  function onStatus(message: ServerMessage): void {
    if (message.status !== 'error' || !pending.value) return
    pending.value = null
    error.value = typeof message.message === 'string' && message.message ? message.message : 'error'
  }

  const offs = connection
    ? [
        connection.on('build:suggestion', onSuggestion),
        connection.on('build:applied', onDecided),
        connection.on('build:rejected', onDecided),
        connection.on('status', onStatus),
      ]
    : []
  function dispose(): void {
    for (const off of offs) off()
  }
  if (getCurrentInstance()) onBeforeUnmount(dispose)

  return { suggestion, pending, error, request, accept, reject, forget, dispose }
}
