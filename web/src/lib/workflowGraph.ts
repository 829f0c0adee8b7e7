// The workflow file ↔ the canvas (Vue Flow nodes and edges), and the graph rules the canvas
// applies while editing: which slots a node has, which connections are allowed, one edge
// per input.
//
// Handle ids are slot names: a node's output `text` is its source handle `text`, its input
// `prompt` the target handle `prompt`. Node config stays a mapping by name.
import type { InterfaceSlot, NodeTypeInfo, SlotInfo, Workflow, WorkflowEdge, WorkflowNode } from '../api/workflows'
import { canConnect } from './slotTypes'

/** The one Vue Flow node type of the canvas (rendered by components/workflow/WorkflowNode.vue). */
export const FLOW_NODE_TYPE = 'storyloom'

export const GROUP_INPUT = 'core:GroupInput'
export const GROUP_OUTPUT = 'core:GroupOutput'

export interface FlowNodeData {
  nodeType: string
  label: string
  config: Record<string, unknown>
  /** Fields of the file's node this page does not edit, written back unchanged. */
  extra: Record<string, unknown>
}

export interface FlowNode {
  id: string
  type: string
  position: { x: number; y: number }
  data: FlowNodeData
}

export interface FlowEdgeData {
  /** The edge's id in the file; edges written without one are saved without one. */
  fileId: string | null
  extra: Record<string, unknown>
}

export interface FlowEdge {
  id: string
  source: string
  target: string
  sourceHandle: string
  targetHandle: string
  data: FlowEdgeData
}

/** What the file holds besides nodes and edges (id, name, interface, unknown fields). */
export interface WorkflowMeta {
  id: string
  name?: string
  description?: string
  formatVersion?: number
  interfaceInputs?: Record<string, InterfaceSlot>
  interfaceOutputs?: Record<string, InterfaceSlot>
  /** Run the TAM blocks of the text outputs once a run completes (docs/tools.md §4). */
  executeToolCalls?: boolean
  [extra: string]: unknown
}

export interface ConnectionLike {
  source: string
  target: string
  sourceHandle?: string | null
  targetHandle?: string | null
}

function clone<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T)
}

export function flowEdgeId(source: string, sourceSlot: string, target: string, targetSlot: string): string {
  return `${source}.${sourceSlot}->${target}.${targetSlot}`
}

export function workflowToFlow(workflow: Workflow): { meta: WorkflowMeta; nodes: FlowNode[]; edges: FlowEdge[] } {
  const { nodes, edges, ...meta } = clone(workflow)
  return {
    meta,
    nodes: nodes.map((node) => nodeToFlow(node)),
    edges: edges.map((edge) => edgeToFlow(edge)),
  }
}

function nodeToFlow(node: WorkflowNode): FlowNode {
  const { id, type, label, config, position, ...extra } = node
  return {
    id,
    type: FLOW_NODE_TYPE,
    position: { x: position?.x ?? 0, y: position?.y ?? 0 },
    data: { nodeType: type, label: label ?? '', config: config ?? {}, extra },
  }
}

function edgeToFlow(edge: WorkflowEdge): FlowEdge {
  const { id, source, sourceSlot, target, targetSlot, ...extra } = edge
  return {
    id: flowEdgeId(source, sourceSlot, target, targetSlot),
    source,
    target,
    sourceHandle: sourceSlot,
    targetHandle: targetSlot,
    data: { fileId: id ?? null, extra },
  }
}

/** The file as the canvas shows it: positions rounded to whole pixels. */
export function flowToWorkflow(meta: WorkflowMeta, nodes: readonly FlowNode[], edges: readonly FlowEdge[]): Workflow {
  return {
    ...clone(meta),
    nodes: nodes.map((n) => {
      const node: WorkflowNode = {
        ...clone(n.data.extra),
        id: n.id,
        type: n.data.nodeType,
        config: clone(n.data.config),
        position: { x: Math.round(n.position.x), y: Math.round(n.position.y) },
      }
      if (n.data.label.trim()) node.label = n.data.label
      return node
    }),
    edges: edges.map((e) => {
      const edge: WorkflowEdge = {
        ...clone(e.data?.extra ?? {}),
        source: e.source,
        sourceSlot: e.sourceHandle,
        target: e.target,
        targetSlot: e.targetHandle,
      }
      if (e.data?.fileId) edge.id = e.data.fileId
      return edge
    }),
  }
}

/** An empty workflow named `name`, its id made from the name (file-safe, unique in `taken`). */
export function newWorkflow(name: string, taken: readonly string[]): Workflow {
  const base =
    name
      .normalize('NFKD')
      .replace(/[^\w.-]+/g, '-')
      .replace(/^[-.]+|-+$/g, '')
      .slice(0, 100)
      .toLowerCase() || 'workflow'
  let id = base
  for (let n = 2; taken.includes(id); n++) id = `${base}-${n}`
  return { id, name, description: '', nodes: [], edges: [], interfaceInputs: {}, interfaceOutputs: {} }
}

/** A fresh node id for a node of `type`: its short name and the next free number. */
export function newNodeId(type: string, existing: Iterable<string>): string {
  const short = (type.split(':').pop() ?? type).replace(/[^\w.-]+/g, '') || 'node'
  const taken = new Set(existing)
  let n = 1
  while (taken.has(`${short}-${n}`)) n++
  return `${short}-${n}`
}

/** The config a new node starts with: every field that has a default. */
export function defaultConfig(info: NodeTypeInfo | undefined): Record<string, unknown> {
  const config: Record<string, unknown> = {}
  for (const [name, field] of Object.entries(info?.configSchema.properties ?? {})) {
    if (field.default !== null && field.default !== undefined) config[name] = clone(field.default)
  }
  return config
}

export function newFlowNode(info: NodeTypeInfo, id: string, position: { x: number; y: number }): FlowNode {
  return {
    id,
    type: FLOW_NODE_TYPE,
    position: { x: Math.round(position.x), y: Math.round(position.y) },
    data: { nodeType: info.type, label: '', config: defaultConfig(info), extra: {} },
  }
}

export interface ResolvedSlots {
  inputs: SlotInfo[]
  outputs: SlotInfo[]
}

function interfaceSlots(slots: Record<string, InterfaceSlot> | undefined): SlotInfo[] {
  return Object.entries(slots ?? {}).map(([name, slot]) => ({
    name,
    type: slot.dataFlowType ?? 'STRING',
    description: slot.description ?? '',
    required: slot.required ?? false,
  }))
}

function merged(declared: readonly SlotInfo[], added: readonly SlotInfo[]): SlotInfo[] {
  const names = new Set(declared.map((s) => s.name))
  return [...declared, ...added.filter((s) => !names.has(s.name))]
}

/**
 * Whether the server works out this node type's slots: a dynamic-slot type other than
 * GroupInput/GroupOutput (those mirror this workflow's own interface, so the page follows
 * edits to it at once). SubWorkflow and Recursive get theirs from the workflow they call.
 */
export function slotsFromServer(info: NodeTypeInfo | undefined): boolean {
  return !!info?.dynamicSlots && info.type !== GROUP_INPUT && info.type !== GROUP_OUTPUT
}

/** What a node's server-given slots were worked out for: its type and its `workflow` config. */
export function calledKey(data: Pick<FlowNodeData, 'nodeType' | 'config'>, info: NodeTypeInfo | undefined): string {
  const called = Object.entries(info?.configSchema.properties ?? {})
    .filter(([, field]) => field['x-widget'] === 'workflow' || field.anyOf?.some((o) => o['x-widget'] === 'workflow'))
    .map(([name]) => data.config[name] ?? null)
  return JSON.stringify([data.nodeType, ...called])
}

/** A node's slots from the server, with the `calledKey` of the node they were worked out for. */
export interface ServerSlots {
  key: string
  slots: ResolvedSlots
}

/** The server's slots by node id (`slots` of a validate or save answer), keyed for the nodes sent. */
export function serverSlotsOf(
  sent: Workflow,
  slots: Readonly<Record<string, ResolvedSlots>>,
  typeInfo: (type: string) => NodeTypeInfo | undefined,
): Record<string, ServerSlots> {
  const out: Record<string, ServerSlots> = {}
  for (const node of sent.nodes) {
    const found = slots[node.id]
    if (!found) continue
    const data = { nodeType: node.type, config: node.config ?? {} }
    out[node.id] = { key: calledKey(data, typeInfo(node.type)), slots: found }
  }
  return out
}

/**
 * What the server's slots depend on, for every node that takes them (its id, type and
 * config): when this changes the page asks again. "[]" when no node takes them.
 */
export function serverSlotsRequestKey(
  nodes: readonly Pick<FlowNode, 'id' | 'data'>[],
  typeInfo: (type: string) => NodeTypeInfo | undefined,
): string {
  const asking = nodes.filter((n) => slotsFromServer(typeInfo(n.data.nodeType)))
  return JSON.stringify(asking.map((n) => [n.id, n.data.nodeType, n.data.config]))
}

/**
 * A node's slots. GroupInput's outputs are the workflow's interfaceInputs and GroupOutput's
 * inputs its interfaceOutputs. Another dynamic-slot node takes the slots the server worked
 * out (`fromServer`) while they were worked out for the workflow it calls now; until then,
 * or when the server could not work them out, its type's static slots.
 */
export function resolveSlots(
  data: Pick<FlowNodeData, 'nodeType' | 'config'>,
  info: NodeTypeInfo | undefined,
  meta: Pick<WorkflowMeta, 'interfaceInputs' | 'interfaceOutputs'>,
  fromServer?: ServerSlots,
): ResolvedSlots {
  const inputs = info?.inputs ?? []
  const outputs = info?.outputs ?? []
  if (data.nodeType === GROUP_INPUT) return { inputs, outputs: merged(outputs, interfaceSlots(meta.interfaceInputs)) }
  if (data.nodeType === GROUP_OUTPUT) return { inputs: merged(inputs, interfaceSlots(meta.interfaceOutputs)), outputs }
  if (fromServer && slotsFromServer(info) && fromServer.key === calledKey(data, info)) return fromServer.slots
  return { inputs, outputs }
}

export type ConnectionRefusal = 'self' | 'unknown-slot' | 'type-mismatch' | 'cycle'

/** Why a connection may not be made, or null when it may. */
export function connectionProblem(
  c: ConnectionLike,
  slotsOf: (nodeId: string) => ResolvedSlots | undefined,
  edges: readonly Pick<FlowEdge, 'source' | 'target'>[],
): ConnectionRefusal | null {
  if (c.source === c.target) return 'self'
  const output = slotsOf(c.source)?.outputs.find((s) => s.name === c.sourceHandle)
  const input = slotsOf(c.target)?.inputs.find((s) => s.name === c.targetHandle)
  if (!output || !input) return 'unknown-slot'
  if (!canConnect(output.type, input.type)) return 'type-mismatch'
  if (reaches(c.target, c.source, edges)) return 'cycle'
  return null
}

/** Whether `to` can be reached from `from` following edges downstream. */
export function reaches(from: string, to: string, edges: readonly Pick<FlowEdge, 'source' | 'target'>[]): boolean {
  const next = new Map<string, string[]>()
  for (const e of edges) next.set(e.source, [...(next.get(e.source) ?? []), e.target])
  const seen = new Set<string>()
  const stack = [from]
  while (stack.length) {
    const node = stack.pop()!
    if (node === to) return true
    if (seen.has(node)) continue
    seen.add(node)
    stack.push(...(next.get(node) ?? []))
  }
  return false
}

/**
 * The edges after connecting `c`: an input takes one edge, so an edge already feeding the
 * same input is replaced.
 */
export function connectEdges(edges: readonly FlowEdge[], c: ConnectionLike): { edges: FlowEdge[]; replaced: FlowEdge[] } {
  const sourceSlot = c.sourceHandle ?? ''
  const targetSlot = c.targetHandle ?? ''
  const replaced = edges.filter((e) => e.target === c.target && e.targetHandle === targetSlot)
  const kept = edges.filter((e) => !replaced.includes(e))
  const edge: FlowEdge = {
    id: flowEdgeId(c.source, sourceSlot, c.target, targetSlot),
    source: c.source,
    target: c.target,
    sourceHandle: sourceSlot,
    targetHandle: targetSlot,
    data: { fileId: null, extra: {} },
  }
  return { edges: [...kept, edge], replaced }
}

/** Palette groups: node types by category, filtered by a search over name, type and description. */
export function paletteGroups<T extends NodeTypeInfo>(types: readonly T[], query: string): { category: string; types: T[] }[] {
  const q = query.trim().toLowerCase()
  const groups = new Map<string, T[]>()
  for (const info of types) {
    const hay = `${info.displayName} ${info.type} ${info.category} ${info.description}`.toLowerCase()
    if (q && !q.split(/\s+/).every((word) => hay.includes(word))) continue
    groups.set(info.category, [...(groups.get(info.category) ?? []), info])
  }
  return [...groups.entries()].map(([category, list]) => ({ category, types: list }))
}
