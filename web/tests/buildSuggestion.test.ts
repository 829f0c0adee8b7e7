// Role B on the canvas: a suggestion merged into the displayed graph as "proposed" items,
// kept out of the workflow that is saved, cleared on reject and on apply; and the
// build:* conversation over a fake WebSocket.
import { describe, expect, it } from 'vitest'
import {
  type BuildSuggestion,
  clearProposal,
  isProposed,
  mergeProposal,
  parseSuggestion,
  PROPOSED_DASH,
  proposedEdgeStyle,
  proposedGraph,
  useBuildSuggestion,
  withoutProposed,
} from '../src/lib/buildSuggestion'
import { flowToWorkflow, workflowToFlow } from '../src/lib/workflowGraph'
import { fakeConnection } from './fakeConnection'

const WORKFLOW = {
  id: 'wf',
  name: 'Chapter',
  nodes: [
    { id: 'draft', type: 'writing:Draft', config: {}, position: { x: 0, y: 0 } },
    { id: 'out', type: 'core:GroupOutput', config: {}, position: { x: 400, y: 0 } },
  ],
  edges: [{ source: 'draft', sourceSlot: 'text', target: 'out', targetSlot: 'text' }],
}

function suggestion(overrides: Partial<BuildSuggestion> = {}): BuildSuggestion {
  return {
    suggestionId: 'sg_1',
    workflowId: 'wf',
    nodes: [{ id: 'check', type: 'writing:Check', label: 'Continuity', config: { strict: true }, position: { x: 700, y: 240 } }],
    edges: [
      { source: 'draft', sourceSlot: 'text', target: 'check', targetSlot: 'text' },
      { source: 'check', sourceSlot: 'text', target: 'out', targetSlot: 'text' },
    ],
    explanation: 'Check the draft before it is kept.',
    ...overrides,
  }
}

describe('merging a suggestion into the displayed graph', () => {
  it('adds the proposed nodes and edges, marked proposed, beside the workflow', () => {
    const { nodes, edges } = workflowToFlow(WORKFLOW)
    const merged = mergeProposal(nodes, edges, suggestion())
    expect(merged.nodes.map((n) => [n.id, isProposed(n)])).toEqual([
      ['draft', false],
      ['out', false],
      ['check', true],
    ])
    const check = merged.nodes[2]!
    expect(check.position).toEqual({ x: 700, y: 240 })
    expect(check.data).toMatchObject({ nodeType: 'writing:Check', label: 'Continuity', config: { strict: true }, proposed: true })
    expect(merged.edges.filter(isProposed).map((e) => [e.source, e.sourceHandle, e.target, e.targetHandle])).toEqual([
      ['draft', 'text', 'check', 'text'],
      ['check', 'text', 'out', 'text'],
    ])
  })

  it('leaves the workflow that is saved unchanged until accepted', () => {
    const { meta, nodes, edges } = workflowToFlow(WORKFLOW)
    const merged = mergeProposal(nodes, edges, suggestion())
    const saved = flowToWorkflow(meta, withoutProposed(merged.nodes), withoutProposed(merged.edges))
    expect(saved).toEqual(flowToWorkflow(meta, nodes, edges))
  })

  it('makes proposed items impossible to select, connect or delete', () => {
    const { nodes, edges } = proposedGraph(suggestion(), ['draft', 'out'])
    expect(nodes[0]).toMatchObject({ selectable: false, connectable: false, deletable: false, class: 'wf-proposed' })
    expect(edges[0]).toMatchObject({ selectable: false, deletable: false, updatable: false, class: 'wf-proposed' })
  })

  it('draws a proposed edge in its own id space, so an identical existing edge stays', () => {
    const { nodes, edges } = workflowToFlow(WORKFLOW)
    const same = suggestion({ nodes: [], edges: [{ source: 'draft', sourceSlot: 'text', target: 'out', targetSlot: 'text' }] })
    const merged = mergeProposal(nodes, edges, same)
    expect(merged.edges).toHaveLength(2)
    expect(new Set(merged.edges.map((e) => e.id)).size).toBe(2)
  })

  it('draws a node whose id is taken on the canvas under a free id, its edges following', () => {
    const clash = suggestion({
      nodes: [{ id: 'draft', type: 'writing:Draft', config: {}, position: { x: 0, y: 300 } }],
      edges: [{ source: 'draft', sourceSlot: 'text', target: 'out', targetSlot: 'text' }],
    })
    const { nodes, edges, ids } = proposedGraph(clash, ['draft', 'out'])
    expect(ids).toEqual({ draft: 'draft~2' })
    expect(nodes[0]!.id).toBe('draft~2')
    expect(edges[0]).toMatchObject({ source: 'draft~2', target: 'out' })
  })

  it('replaces an earlier proposal instead of stacking two', () => {
    const { nodes, edges } = workflowToFlow(WORKFLOW)
    const first = mergeProposal(nodes, edges, suggestion())
    const second = mergeProposal(first.nodes, first.edges, suggestion({ suggestionId: 'sg_2', edges: [] }))
    expect(second.nodes.filter(isProposed)).toHaveLength(1)
    expect(second.edges.filter(isProposed)).toHaveLength(0)
  })

  it('clearing the proposal gives back the workflow as it was', () => {
    const { nodes, edges } = workflowToFlow(WORKFLOW)
    const merged = mergeProposal(nodes, edges, suggestion())
    expect(clearProposal(merged.nodes, merged.edges)).toEqual({ nodes, edges })
  })

  it('dashes a proposed edge and keeps its colour', () => {
    expect(proposedEdgeStyle({ stroke: '#123456', strokeWidth: 2 })).toEqual({ stroke: '#123456', strokeWidth: 2, strokeDasharray: PROPOSED_DASH })
  })

  it('reads a build:suggestion message and refuses a malformed one', () => {
    const msg = { type: 'build:suggestion', ...suggestion() }
    expect(parseSuggestion(msg)).toEqual(suggestion())
    expect(parseSuggestion({ type: 'build:suggestion', suggestionId: 'x' })).toBeNull()
  })
})

describe('the build conversation', () => {
  function setup() {
    const connection = fakeConnection()
    const shown: BuildSuggestion[] = []
    const log: string[] = []
    const build = useBuildSuggestion({
      connection,
      show: (s) => shown.push(s),
      clear: () => log.push('clear'),
      applied: (id) => log.push(`applied ${id}`),
      rejected: () => log.push('rejected'),
    })
    return { connection, shown, log, build }
  }

  it('asks for a suggestion about the open workflow and shows the answer', () => {
    const { connection, shown, build } = setup()
    expect(build.request('  add a continuity check ', 'wf')).toBe(true)
    expect(connection.sent).toEqual([{ type: 'build:request', intent: 'add a continuity check', currentWorkflow: 'wf' }])
    expect(build.pending.value).toBe('request')
    expect(build.request('again', 'wf')).toBe(false)
    connection.emit({ type: 'build:suggestion', ...suggestion() })
    expect(build.pending.value).toBeNull()
    expect(build.suggestion.value?.suggestionId).toBe('sg_1')
    expect(shown).toHaveLength(1)
  })

  it('asks for a new workflow when none is open', () => {
    const { connection, build } = setup()
    build.request('a workflow that drafts a chapter', null)
    expect(connection.sent[0]).toEqual({ type: 'build:request', intent: 'a workflow that drafts a chapter' })
  })

  it('accepting clears the proposal and reloads the workflow it was applied to', () => {
    const { connection, log, build } = setup()
    build.request('check', 'wf')
    connection.emit({ type: 'build:suggestion', ...suggestion() })
    build.accept()
    expect(connection.sent.at(-1)).toEqual({ type: 'build:accept', suggestionId: 'sg_1' })
    expect(build.pending.value).toBe('accept')
    connection.emit({ type: 'build:applied', suggestionId: 'sg_1', workflowId: 'wf' })
    expect(log).toEqual(['clear', 'applied wf'])
    expect(build.suggestion.value).toBeNull()
    expect(build.pending.value).toBeNull()
  })

  it('rejecting sends the reason and clears the proposal', () => {
    const { connection, log, build } = setup()
    build.request('check', 'wf')
    connection.emit({ type: 'build:suggestion', ...suggestion() })
    build.reject(' too slow ')
    expect(connection.sent.at(-1)).toEqual({ type: 'build:reject', suggestionId: 'sg_1', reason: 'too slow' })
    connection.emit({ type: 'build:rejected', suggestionId: 'sg_1' })
    expect(log).toEqual(['clear', 'rejected'])
    expect(build.suggestion.value).toBeNull()
  })

  it('shows a status error that arrives while waiting, and ignores one that does not', () => {
    const { connection, build } = setup()
    connection.emit({ type: 'status', status: 'error', message: 'unrelated' })
    expect(build.error.value).toBe('')
    build.request('check', 'wf')
    connection.emit({ type: 'status', status: 'error', message: 'Role B needs the agent model' })
    expect(build.error.value).toBe('Role B needs the agent model')
    expect(build.pending.value).toBeNull()
    expect(build.suggestion.value).toBeNull()
  })

  it('ignores a decision about another suggestion', () => {
    const { connection, log, build } = setup()
    build.request('check', 'wf')
    connection.emit({ type: 'build:suggestion', ...suggestion() })
    connection.emit({ type: 'build:applied', suggestionId: 'sg_other', workflowId: 'wf' })
    expect(log).toEqual([])
    expect(build.suggestion.value?.suggestionId).toBe('sg_1')
  })
})
