// Connecting slots on the canvas: what Vue Flow may connect (types match, no cycle), an
// edge dropped on an input that already has one replacing it, edges coloured by their
// type, and a sentence saying why a connection was refused.
import type { Connection, VueFlowStore } from '@vue-flow/core'
import { ref } from 'vue'
import { slotColor } from './slotTypes'
import { type ConnectionLike, type ConnectionRefusal, connectEdges, connectionProblem, type FlowEdge, type ResolvedSlots } from './workflowGraph'

const REFUSAL_KEYS: Record<ConnectionRefusal, string> = {
  self: 'workflows.connect.self',
  'unknown-slot': 'workflows.connect.unknownSlot',
  'type-mismatch': 'workflows.connect.typeMismatch',
  cycle: 'workflows.connect.cycle',
}

export interface WorkflowConnectionsOptions {
  flow: VueFlowStore
  slotsOf: (nodeId: string) => ResolvedSlots
  edges: () => FlowEdge[]
  t: (key: string, values?: Record<string, unknown>) => string
}

export type DecoratedEdge = FlowEdge & { style: Record<string, string | number>; ariaLabel: string }

export function useWorkflowConnections(options: WorkflowConnectionsOptions) {
  const { flow, slotsOf, t } = options
  /** Why the last connection was refused ('' when it was not). */
  const message = ref('')

  /** The edge as the canvas draws it: in its slot type's colour, named for screen readers. */
  function decorate(edge: FlowEdge): DecoratedEdge {
    const type = slotsOf(edge.source).outputs.find((s) => s.name === edge.sourceHandle)?.type ?? 'ANY'
    return {
      ...edge,
      style: { stroke: slotColor(type), strokeWidth: 2 },
      ariaLabel: t('workflows.edge.aria', { from: `${edge.source}.${edge.sourceHandle}`, to: `${edge.target}.${edge.targetHandle}` }),
    }
  }

  function isValid(c: Connection): boolean {
    return connectionProblem(c, slotsOf, options.edges()) === null
  }

  function describeRefusal(c: ConnectionLike, problem: ConnectionRefusal): string {
    const fromType = slotsOf(c.source).outputs.find((s) => s.name === c.sourceHandle)?.type ?? '?'
    const toType = slotsOf(c.target).inputs.find((s) => s.name === c.targetHandle)?.type ?? '?'
    return t(REFUSAL_KEYS[problem], {
      from: `${c.source}.${c.sourceHandle} (${fromType})`,
      to: `${c.target}.${c.targetHandle} (${toType})`,
    })
  }

  let connectStart: { nodeId: string; handleId: string; handleType: 'source' | 'target' } | null = null
  let connectedThisDrag = false

  function connect(c: ConnectionLike): void {
    const problem = connectionProblem(c, slotsOf, options.edges())
    if (problem) {
      message.value = describeRefusal(c, problem)
      return
    }
    connectedThisDrag = true
    message.value = ''
    const { edges, replaced } = connectEdges(options.edges(), c)
    if (replaced.length) flow.removeEdges(replaced.map((e) => e.id))
    const added = edges[edges.length - 1]!
    flow.addEdges([decorate(added)])
  }

  /** Remove the edge into `slot` of `nodeId`. */
  function disconnect(nodeId: string, slot: string): void {
    flow.removeEdges(options.edges().filter((e) => e.target === nodeId && e.targetHandle === slot).map((e) => e.id))
  }

  flow.onConnect((c) => connect(c))
  flow.onConnectStart(({ nodeId, handleId, handleType }) => {
    connectedThisDrag = false
    message.value = ''
    connectStart = nodeId && handleType ? { nodeId, handleId: handleId ?? '', handleType } : null
  })
  // A drag let go over a handle Vue Flow would not connect to: say why not.
  flow.onConnectEnd((event) => {
    const start = connectStart
    connectStart = null
    if (!start || connectedThisDrag || !event || !('clientX' in event)) return
    const el = document.elementFromPoint(event.clientX, event.clientY)?.closest('.vue-flow__handle')
    const nodeId = el?.getAttribute('data-nodeid')
    const handleId = el?.getAttribute('data-handleid')
    if (!el || !nodeId || handleId === null || handleId === undefined) return
    const endType = el.classList.contains('source') ? 'source' : 'target'
    if (endType === start.handleType) return
    const c: ConnectionLike =
      start.handleType === 'source'
        ? { source: start.nodeId, sourceHandle: start.handleId, target: nodeId, targetHandle: handleId }
        : { source: nodeId, sourceHandle: handleId, target: start.nodeId, targetHandle: start.handleId }
    const problem = connectionProblem(c, slotsOf, options.edges())
    if (problem) message.value = describeRefusal(c, problem)
  })

  return { message, decorate, isValid, connect, disconnect }
}
