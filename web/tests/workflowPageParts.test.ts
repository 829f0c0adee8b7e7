import { describe, expect, it } from 'vitest'
import { completeWorkflow, startRun, WorkflowInvalidError, workflowProblemsFrom } from '../src/api/workflows'
import { en, zh } from '../src/locales'
import { parseRunInput } from '../src/lib/workflowEditor'
import { NODE_STATES, RUN_EVENT_TYPES } from '../src/lib/workflowRun'

function has(messages: unknown, key: string): boolean {
  let node: unknown = messages
  for (const part of key.split('.')) {
    if (!node || typeof node !== 'object' || !(part in node)) return false
    node = (node as Record<string, unknown>)[part]
  }
  return typeof node === 'string' && node.trim() !== ''
}

describe('workflow page messages', () => {
  it('exist for every key built at run time, in both languages', () => {
    const keys = [
      ...NODE_STATES.map((s) => `workflows.state.${s}`),
      ...RUN_EVENT_TYPES.map((type) => `workflows.events.${type.replace(':', '_').replace('-', '_')}`),
      ...['none', 'running', 'completed', 'failed', 'cancelled'].map((s) => `workflows.run.status.${s}`),
      ...['required', 'number', 'json'].map((e) => `workflows.run.inputError.${e}`),
      ...['self', 'unknownSlot', 'typeMismatch', 'cycle'].map((c) => `workflows.connect.${c}`),
      'workflows.inspector.node',
      'workflows.inspector.history',
      'workflows.side.node',
      'workflows.side.interface',
      'workflows.side.run',
      'workflows.interface.inputs',
      'workflows.interface.outputs',
      'workflows.interface.add.inputs',
      'workflows.interface.add.outputs',
    ]
    expect(keys.filter((k) => !has(en, k))).toEqual([])
    expect(keys.filter((k) => !has(zh, k))).toEqual([])
  })
})

describe('run inputs', () => {
  it('are typed by the interface slot', () => {
    expect(parseRunInput('  hi ', 'STRING')).toEqual({ value: '  hi ' })
    expect(parseRunInput('3', 'INTEGER')).toEqual({ value: 3 })
    expect(parseRunInput('3.5', 'INTEGER')).toEqual({ error: 'number' })
    expect(parseRunInput('3.5', 'FLOAT')).toEqual({ value: 3.5 })
    expect(parseRunInput('', 'FLOAT')).toEqual({})
    expect(parseRunInput(true, 'BOOLEAN')).toEqual({ value: true })
    expect(parseRunInput('[{"role": "user", "content": "hi"}]', 'MESSAGES')).toEqual({ value: [{ role: 'user', content: 'hi' }] })
    expect(parseRunInput('{oops', 'OBJECT')).toEqual({ error: 'json' })
  })
})

describe('a workflow as received', () => {
  it('gets empty node and edge lists when the file leaves them out', () => {
    expect(completeWorkflow({ id: 'x', name: 'X' })).toEqual({ id: 'x', name: 'X', nodes: [], edges: [] })
  })
})

describe('starting a run', () => {
  const workflow = { id: 'wf', nodes: [], edges: [] }

  it('posts the graph on the canvas with the inputs', async () => {
    const calls: [string, RequestInit][] = []
    const fetchImpl = async (url: RequestInfo | URL, init?: RequestInit) => {
      calls.push([String(url), init!])
      return new Response(JSON.stringify({ runId: 'r1', workflowId: 'wf' }), { status: 202 })
    }
    await expect(startRun(workflow, { topic: 'sea' }, fetchImpl)).resolves.toEqual({ runId: 'r1', workflowId: 'wf' })
    expect(calls[0]![0]).toBe('/api/workflows/wf/runs')
    expect(JSON.parse(String(calls[0]![1].body))).toEqual({ inputs: { topic: 'sea' }, workflow })
  })

  it('turns a 422 into the problems of the graph, each naming its node and slot', async () => {
    const problem = { nodeId: 'chat', slot: 'prompt', field: null, code: 'missing-input', message: 'chat.prompt is not connected' }
    const fetchImpl = async () =>
      new Response(JSON.stringify({ error: { message: 'workflow wf is invalid', problems: [] }, problems: [problem] }), { status: 422 })
    const error = await startRun(workflow, {}, fetchImpl).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WorkflowInvalidError)
    expect((error as WorkflowInvalidError).workflowProblems).toEqual([problem])
    expect((error as WorkflowInvalidError).message).toBe('workflow wf is invalid')
  })

  it('finds problems at the top level or inside the error envelope', () => {
    const p = { code: 'cycle', message: 'a → b → a' }
    expect(workflowProblemsFrom({ problems: [p] })).toEqual([p])
    expect(workflowProblemsFrom({ error: { message: 'x', problems: [p] } })).toEqual([p])
    expect(workflowProblemsFrom({ error: { message: 'x', problems: [{ field: 'a', reason: 'b' }] } })).toEqual([])
  })
})
