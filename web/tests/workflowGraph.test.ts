import { describe, expect, it } from 'vitest'
import type { NodeTypeInfo, Workflow } from '../src/api/workflows'
import {
  connectEdges,
  calledKey,
  connectionProblem,
  defaultConfig,
  FLOW_NODE_TYPE,
  type FlowNode,
  flowToWorkflow,
  newFlowNode,
  newNodeId,
  newWorkflow,
  paletteGroups,
  type ResolvedSlots,
  resolveSlots,
  type ServerSlots,
  serverSlotsOf,
  serverSlotsRequestKey,
  slotsFromServer,
  workflowToFlow,
} from '../src/lib/workflowGraph'

function nodeType(over: Partial<NodeTypeInfo> & Pick<NodeTypeInfo, 'type'>): NodeTypeInfo {
  return {
    displayName: over.type,
    category: 'Text',
    description: '',
    version: 1,
    idempotent: true,
    streaming: false,
    dynamicSlots: false,
    inputs: [],
    outputs: [],
    configSchema: { type: 'object', properties: {}, required: [] },
    ...over,
  }
}

const TEXT_INPUT = nodeType({
  type: 'core:TextInput',
  displayName: 'Text Input',
  outputs: [{ name: 'text', type: 'STRING' }],
  configSchema: { type: 'object', properties: { text: { type: 'string', default: '', 'x-widget': 'textarea' } } },
})
const CHAT = nodeType({
  type: 'llm:Chat',
  displayName: 'LLM Chat',
  category: 'LLM',
  streaming: true,
  inputs: [
    { name: 'prompt', type: 'STRING', required: true },
    { name: 'temperature', type: 'FLOAT', required: false },
  ],
  outputs: [
    { name: 'text', type: 'STRING' },
    { name: 'messages', type: 'MESSAGES' },
  ],
  configSchema: {
    type: 'object',
    properties: {
      role: { type: 'string', enum: ['user_llm', 'agent_llm'], default: 'user_llm' },
      system: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null },
    },
  },
})
const COUNTER = nodeType({ type: 'test:Counter', outputs: [{ name: 'n', type: 'INTEGER' }] })
const GROUP_INPUT = nodeType({ type: 'core:GroupInput', category: 'Interface', dynamicSlots: true })
const GROUP_OUTPUT = nodeType({ type: 'core:GroupOutput', category: 'Interface', dynamicSlots: true })
const SUB = nodeType({
  type: 'core:SubWorkflow',
  category: 'Interface',
  dynamicSlots: true,
  configSchema: { type: 'object', properties: { workflow: { type: 'string', 'x-widget': 'workflow' } }, required: ['workflow'] },
})
const TYPES = new Map([TEXT_INPUT, CHAT, COUNTER, GROUP_INPUT, GROUP_OUTPUT, SUB].map((t) => [t.type, t]))

const SAMPLE: Workflow = {
  id: 'story-step',
  name: 'Story step',
  description: 'one beat',
  formatVersion: 1,
  nodes: [
    { id: 'in', type: 'core:TextInput', config: { text: 'Once upon a time' }, position: { x: 40, y: 80 } },
    {
      id: 'chat',
      type: 'llm:Chat',
      label: 'Narrator',
      config: { role: 'agent_llm', system: 'Be brief.' },
      position: { x: 360, y: 64 },
      color: 'teal',
    },
  ],
  edges: [
    { id: 'e1', source: 'in', sourceSlot: 'text', target: 'chat', targetSlot: 'prompt' },
    { source: 'in', sourceSlot: 'text', target: 'chat', targetSlot: 'system', note: 'kept' },
  ],
  interfaceInputs: { topic: { dataFlowType: 'STRING', required: true, description: 'what about' } },
  interfaceOutputs: {},
  authoredBy: 'another tool',
}

describe('workflow ↔ canvas', () => {
  it('round-trips a workflow: positions, config by name, slots, ids and unknown fields', () => {
    const { meta, nodes, edges } = workflowToFlow(SAMPLE)
    expect(nodes.map((n) => [n.id, n.type, n.position])).toEqual([
      ['in', FLOW_NODE_TYPE, { x: 40, y: 80 }],
      ['chat', FLOW_NODE_TYPE, { x: 360, y: 64 }],
    ])
    expect(nodes[1]!.data).toEqual({
      nodeType: 'llm:Chat',
      label: 'Narrator',
      config: { role: 'agent_llm', system: 'Be brief.' },
      extra: { color: 'teal' },
    })
    expect(edges.map((e) => [e.source, e.sourceHandle, e.target, e.targetHandle])).toEqual([
      ['in', 'text', 'chat', 'prompt'],
      ['in', 'text', 'chat', 'system'],
    ])
    expect(new Set(edges.map((e) => e.id)).size).toBe(2)
    expect(flowToWorkflow(meta, nodes, edges)).toEqual(SAMPLE)
  })

  it('does not share objects with the file it came from', () => {
    const { nodes } = workflowToFlow(SAMPLE)
    nodes[0]!.data.config.text = 'changed'
    expect(SAMPLE.nodes[0]!.config.text).toBe('Once upon a time')
  })

  it('writes moved nodes at whole-pixel positions and leaves out an empty label', () => {
    const { meta, nodes, edges } = workflowToFlow(SAMPLE)
    nodes[0]!.position = { x: 101.6, y: -3.2 }
    nodes[1]!.data.label = '  '
    const out = flowToWorkflow(meta, nodes, edges)
    expect(out.nodes[0]!.position).toEqual({ x: 102, y: -3 })
    expect(out.nodes[1]).not.toHaveProperty('label')
  })

  it('makes new nodes with fresh ids and the config defaults', () => {
    expect(newNodeId('core:TextInput', ['TextInput-1', 'TextInput-3'])).toBe('TextInput-2')
    expect(newNodeId('llm:Chat', [])).toBe('Chat-1')
    expect(defaultConfig(CHAT)).toEqual({ role: 'user_llm' })
    const node: FlowNode = newFlowNode(TEXT_INPUT, 'TextInput-1', { x: 10.4, y: 20.6 })
    expect(node).toMatchObject({ id: 'TextInput-1', type: FLOW_NODE_TYPE, position: { x: 10, y: 21 } })
    expect(node.data).toEqual({ nodeType: 'core:TextInput', label: '', config: { text: '' }, extra: {} })
  })

  it('names a new workflow after its title, unique and file-safe', () => {
    expect(newWorkflow('My Story Step', []).id).toBe('my-story-step')
    expect(newWorkflow('My Story Step', ['my-story-step']).id).toBe('my-story-step-2')
    expect(newWorkflow('故事', []).id).toBe('workflow')
    expect(newWorkflow('.hidden', []).id).toBe('hidden')
    expect(newWorkflow('x', [])).toMatchObject({ name: 'x', nodes: [], edges: [], interfaceInputs: {}, interfaceOutputs: {} })
  })
})

describe('slots and connections', () => {
  const { meta, nodes, edges } = workflowToFlow({
    ...SAMPLE,
    nodes: [
      ...SAMPLE.nodes,
      { id: 'count', type: 'test:Counter', config: {}, position: { x: 0, y: 300 } },
      { id: 'gin', type: 'core:GroupInput', config: {}, position: { x: 0, y: 400 } },
      { id: 'gout', type: 'core:GroupOutput', config: {}, position: { x: 600, y: 400 } },
    ],
    interfaceOutputs: { story: { dataFlowType: 'STRING' } },
  })
  const slotsOf = (id: string): ResolvedSlots | undefined => {
    const n = nodes.find((x) => x.id === id)
    return n ? resolveSlots(n.data, TYPES.get(n.data.nodeType), meta) : undefined
  }

  it('gives GroupInput the interface inputs as outputs and GroupOutput the outputs as inputs', () => {
    expect(slotsOf('gin')!.outputs).toEqual([{ name: 'topic', type: 'STRING', description: 'what about', required: true }])
    expect(slotsOf('gout')!.inputs.map((s) => [s.name, s.type])).toEqual([['story', 'STRING']])
  })

  it('gives a sub-workflow node the slots the server worked out for the workflow it calls', () => {
    const data = { nodeType: 'core:SubWorkflow', config: { workflow: 'other' } }
    const answer = { inputs: [{ name: 'q', type: 'INTEGER' }], outputs: [{ name: 'a', type: 'STRING' }] }
    const sent: Workflow = { id: 'story-step', nodes: [{ id: 'sub', type: data.nodeType, config: data.config, position: { x: 0, y: 0 } }], edges: [] }
    const fromServer = serverSlotsOf(sent, { sub: answer, gone: answer }, (type) => TYPES.get(type))
    expect(Object.keys(fromServer)).toEqual(['sub'])
    expect(resolveSlots(data, SUB, meta, fromServer.sub)).toEqual(answer)
    // Pending (no answer yet) or worked out for another called workflow: the static slots.
    expect(resolveSlots(data, SUB, meta)).toEqual({ inputs: [], outputs: [] })
    expect(resolveSlots({ ...data, config: { workflow: 'third' } }, SUB, meta, fromServer.sub)).toEqual({ inputs: [], outputs: [] })
    // Another type under a reused node id does not take them either.
    const recursive = { ...SUB, type: 'core:Recursive', outputs: [{ name: 'iterations', type: 'INTEGER' }] }
    const loop = resolveSlots({ ...data, nodeType: 'core:Recursive' }, recursive, meta, fromServer.sub)
    expect(loop.outputs.map((s) => s.name)).toEqual(['iterations'])
  })

  it('keeps GroupInput and GroupOutput on the local interface, whatever the server says', () => {
    const answer: ServerSlots = { key: calledKey({ nodeType: 'core:GroupInput', config: {} }, GROUP_INPUT), slots: { inputs: [], outputs: [] } }
    expect(resolveSlots({ nodeType: 'core:GroupInput', config: {} }, GROUP_INPUT, meta, answer).outputs.map((s) => s.name)).toEqual(['topic'])
    expect(slotsFromServer(GROUP_INPUT)).toBe(false)
    expect(slotsFromServer(GROUP_OUTPUT)).toBe(false)
    expect(slotsFromServer(SUB)).toBe(true)
    expect(slotsFromServer(CHAT)).toBe(false)
  })

  it('asks the server again when a sub-workflow node changes, not when another node does', () => {
    const typeInfo = (type: string) => TYPES.get(type)
    const sub = newFlowNode(SUB, 'sub', { x: 0, y: 0 })
    const before = serverSlotsRequestKey([...nodes, sub], typeInfo)
    expect(serverSlotsRequestKey(nodes, typeInfo)).toBe('[]')
    const moved = nodes.map((n) => ({ ...n, position: { x: n.position.x + 5, y: 0 }, data: { ...n.data, config: { ...n.data.config, x: 1 } } }))
    expect(serverSlotsRequestKey([...moved, sub], typeInfo)).toBe(before)
    const pointed = { ...sub, data: { ...sub.data, config: { workflow: 'other' } } }
    expect(serverSlotsRequestKey([...nodes, pointed], typeInfo)).not.toBe(before)
  })

  it('refuses incompatible types, unknown slots, self-loops and cycles', () => {
    const ok = { source: 'count', sourceHandle: 'n', target: 'chat', targetHandle: 'temperature' }
    expect(connectionProblem(ok, slotsOf, edges)).toBeNull()
    expect(connectionProblem({ ...ok, source: 'in', sourceHandle: 'text' }, slotsOf, edges)).toBe('type-mismatch')
    expect(connectionProblem({ ...ok, sourceHandle: 'nope' }, slotsOf, edges)).toBe('unknown-slot')
    expect(connectionProblem({ source: 'chat', sourceHandle: 'text', target: 'chat', targetHandle: 'prompt' }, slotsOf, edges)).toBe('self')
    // Once chat feeds count, count feeding chat would close a loop.
    const loopEdges = [...edges, { source: 'chat', target: 'count' }]
    expect(connectionProblem(ok, slotsOf, loopEdges)).toBe('cycle')
    expect(connectionProblem({ source: 'chat', sourceHandle: 'messages', target: 'gout', targetHandle: 'story' }, slotsOf, edges)).toBeNull()
  })

  it('keeps one edge per input: a new connection replaces the old one', () => {
    const before = edges.length
    const { edges: after, replaced } = connectEdges(edges, { source: 'gin', sourceHandle: 'topic', target: 'chat', targetHandle: 'prompt' })
    expect(replaced.map((e) => [e.source, e.targetHandle])).toEqual([['in', 'prompt']])
    expect(after).toHaveLength(before)
    const into = after.filter((e) => e.target === 'chat' && e.targetHandle === 'prompt')
    expect(into.map((e) => [e.source, e.sourceHandle])).toEqual([['gin', 'topic']])
    const out = flowToWorkflow(meta, nodes, after)
    expect(out.edges.find((e) => e.targetSlot === 'prompt')).toEqual({ source: 'gin', sourceSlot: 'topic', target: 'chat', targetSlot: 'prompt' })
  })
})

describe('palette', () => {
  it('groups node types by category and searches names, types and descriptions', () => {
    const all = [...TYPES.values()]
    expect(paletteGroups(all, '').map((g) => g.category)).toEqual(['Text', 'LLM', 'Interface'])
    expect(paletteGroups(all, 'chat').flatMap((g) => g.types.map((t) => t.type))).toEqual(['llm:Chat'])
    expect(paletteGroups(all, 'text input').flatMap((g) => g.types.map((t) => t.type))).toEqual(['core:TextInput'])
    expect(paletteGroups(all, 'zzz')).toEqual([])
  })
})
