import { describe, expect, it } from 'vitest'
import type { RunEventMessage } from '../src/api/workflows'
import { applyEvent, isRunEvent, newRunView, RunTracker, shownText } from '../src/lib/workflowRun'

const RUN = 'run-1'

/** Events with seq 1..n in the order given. */
function sequence(...events: Omit<RunEventMessage, 'runId' | 'seq'>[]): RunEventMessage[] {
  return events.map((e, i) => ({ runId: RUN, seq: i + 1, ...e }) as RunEventMessage)
}

const STREAMED = sequence(
  { type: 'workflow:started', workflowId: 'wf', nodeIds: ['in', 'chat', 'after'] },
  { type: 'node:started', nodeId: 'in', nodeName: 'Text Input', nodeType: 'core:TextInput' },
  { type: 'node:cached', nodeId: 'in', source: 'cache', output: 'Hello', outputs: { text: 'Hello' } },
  { type: 'node:started', nodeId: 'chat', nodeName: 'LLM Chat', nodeType: 'llm:Chat' },
  { type: 'node:streaming', nodeId: 'chat', chunk: 'Once ' },
  { type: 'node:streaming', nodeId: 'chat', chunk: 'upon ' },
  { type: 'node:streaming', nodeId: 'chat', chunk: 'a time' },
  { type: 'node:completed', nodeId: 'chat', output: 'Once upon a time', outputs: { text: 'Once upon a time' }, historyId: 7 },
  { type: 'workflow:completed', outputs: [{ nodeId: 'chat', output: 'Once upon a time' }], interfaceOutputs: { story: 'Once upon a time' } },
)

function replay(events: RunEventMessage[]) {
  const tracker = new RunTracker(newRunView(RUN))
  for (const e of events) tracker.accept(e)
  return tracker
}

describe('run events → node states', () => {
  it('concatenates streamed chunks and ends done, with cached nodes marked cached', () => {
    const tracker = new RunTracker(newRunView(RUN))
    const states: string[] = []
    for (const e of STREAMED) {
      tracker.accept(e)
      states.push(tracker.view.nodes.chat?.state ?? '-')
    }
    expect(states).toEqual(['idle', 'idle', 'idle', 'running', 'streaming', 'streaming', 'streaming', 'done', 'done'])
    const { view } = tracker
    expect(view.nodes.chat).toMatchObject({ state: 'done', text: 'Once upon a time', output: 'Once upon a time', historyId: 7 })
    expect(view.nodes.in).toMatchObject({ state: 'cached', output: 'Hello', outputs: { text: 'Hello' } })
    expect(view.nodes.after!.state).toBe('idle')
    expect(view.status).toBe('completed')
    expect(view.workflowId).toBe('wf')
    expect(view.interfaceOutputs).toEqual({ story: 'Once upon a time' })
    expect(view.lastSeq).toBe(9)
    // Streaming makes one log line per node, not one per chunk.
    expect(view.log.map((l) => l.type)).toEqual([
      'workflow:started',
      'node:started',
      'node:cached',
      'node:started',
      'node:streaming',
      'node:completed',
      'workflow:completed',
    ])
  })

  it('marks a frozen output, an error with the skipped nodes, and the failed run', () => {
    const { view } = replay(
      sequence(
        { type: 'workflow:started', workflowId: 'wf', nodeIds: ['a', 'b', 'c'] },
        { type: 'node:cached', nodeId: 'a', source: 'frozen', output: 'pinned', outputs: { text: 'pinned' } },
        { type: 'node:started', nodeId: 'b', nodeName: 'B', nodeType: 'x:B' },
        { type: 'node:streaming', nodeId: 'b', chunk: 'par' },
        { type: 'node:error', nodeId: 'b', error: 'HTTP 500 from the model', skipped: ['c'] },
        { type: 'workflow:error', error: 'node b failed', nodeId: 'b', outputs: [] },
      ),
    )
    expect(view.nodes.a!.state).toBe('frozen')
    expect(view.nodes.b).toMatchObject({ state: 'error', error: 'HTTP 500 from the model', text: 'par' })
    expect(view.nodes.c!.state).toBe('skipped')
    expect(view.status).toBe('failed')
    expect(view.error).toBe('node b failed')
    expect(view.log.at(-2)).toMatchObject({ type: 'node:error', nodeId: 'b', detail: 'HTTP 500 from the model' })
  })

  it('tracks a human decision from request to answer, and a cancelled run', () => {
    const events = sequence(
      { type: 'workflow:started', workflowId: 'wf', nodeIds: ['h', 'd'] },
      { type: 'node:started', nodeId: 'h', nodeName: 'H', nodeType: 'core:HumanDecision' },
      { type: 'node:needs-human', nodeId: 'h', reason: 'check it', outputPreview: 'draft', options: ['approve', 'edit'], candidates: ['x', 'y'] },
    )
    const tracker = replay(events)
    expect(tracker.view.nodes.h!.state).toBe('needs-human')
    expect(tracker.view.waiting.h).toEqual({
      runId: RUN,
      seq: 3,
      nodeId: 'h',
      reason: 'check it',
      outputPreview: 'draft',
      options: ['approve', 'edit'],
      candidates: ['x', 'y'],
    })
    tracker.accept({ runId: RUN, seq: 4, type: 'node:completed', nodeId: 'h', output: 'y', outputs: { text: 'y' } })
    expect(tracker.view.waiting).toEqual({})
    tracker.accept({ runId: RUN, seq: 5, type: 'node:started', nodeId: 'd', nodeName: 'D', nodeType: 'llm:Chat' })
    tracker.accept({ runId: RUN, seq: 6, type: 'node:cancelled', nodeId: 'd', partialOutput: 'half' })
    tracker.accept({ runId: RUN, seq: 7, type: 'workflow:error', error: 'cancelled', cancelled: true, outputs: [] })
    expect(tracker.view.nodes.d).toMatchObject({ state: 'cancelled', text: 'half' })
    expect(tracker.view.status).toBe('cancelled')
  })

  it('reports iterations without losing the running state', () => {
    const view = newRunView(RUN)
    applyEvent(view, { runId: RUN, seq: 1, type: 'node:started', nodeId: 'r', nodeName: 'R', nodeType: 'core:Recursive' })
    applyEvent(view, { runId: RUN, seq: 2, type: 'node:iteration', nodeId: 'r', iteration: 2, totalIterations: 5, iterationType: 'recursive' })
    expect(view.nodes.r).toMatchObject({ state: 'running', iteration: { iteration: 2, total: 5, kind: 'recursive', candidateCount: null } })
  })

  it('a new start of a node clears what it showed before', () => {
    const { view } = replay(
      sequence(
        { type: 'node:started', nodeId: 'n', nodeName: 'N', nodeType: 't' },
        { type: 'node:error', nodeId: 'n', error: 'boom' },
        { type: 'node:started', nodeId: 'n', nodeName: 'N', nodeType: 't' },
      ),
    )
    expect(view.nodes.n).toMatchObject({ state: 'running', error: '', text: '' })
  })
})

describe('the text a node shows', () => {
  it('is the stream, else the text output, else the first string output, else the preview', () => {
    const view = newRunView(RUN)
    const base = { runId: RUN, type: 'node:cached', source: 'cache' }
    applyEvent(view, { ...base, seq: 1, nodeId: 'chat', output: '{"text": "hi", "messages": []}', outputs: { text: 'hi', messages: [] } })
    applyEvent(view, { ...base, seq: 2, nodeId: 'one', output: '{"answer": "yes", "n": 2}', outputs: { answer: 'yes', n: 2 } })
    applyEvent(view, { ...base, seq: 3, nodeId: 'obj', output: '{"a": {}}', outputs: { a: {} } })
    applyEvent(view, { ...base, seq: 4, nodeId: 'two', output: '…', outputs: { value: 'ok', decision: 'approve', retries: 0 } })
    expect(shownText(view.nodes.chat)).toBe('hi')
    expect(shownText(view.nodes.one)).toBe('yes')
    expect(shownText(view.nodes.obj)).toBe('{"a": {}}')
    expect(shownText(view.nodes.two)).toBe('ok')
    expect(shownText(replay(STREAMED.slice(0, 6)).view.nodes.chat)).toBe('Once upon ')
    expect(shownText(undefined)).toBe('')
  })
})

describe('re-attaching', () => {
  it('applies each seq once when the live socket and a catch-up overlap', () => {
    const tracker = new RunTracker(newRunView(RUN))
    expect(tracker.acceptAll(STREAMED.slice(0, 6))).toBe('applied')
    // A reload fetches everything from seq 1 while the socket delivers 5..7 again.
    expect(tracker.accept(STREAMED[4]!)).toBe('duplicate')
    expect(tracker.acceptAll(STREAMED)).toBe('applied')
    expect(tracker.accept(STREAMED[6]!)).toBe('duplicate')
    expect(tracker.view.nodes.chat!.text).toBe('Once upon a time')
    expect(tracker.view.log.filter((l) => l.type === 'node:completed')).toHaveLength(1)
  })

  it('holds events after a gap until the missing ones arrive, then applies them in order', () => {
    const tracker = new RunTracker(newRunView(RUN))
    tracker.acceptAll(STREAMED.slice(0, 4))
    expect(tracker.accept(STREAMED[6]!)).toBe('gap') // seq 7 before 5 and 6
    expect(tracker.missing).toBe(true)
    expect(tracker.view.nodes.chat!.text).toBe('')
    expect(tracker.acceptAll([STREAMED[5]!, STREAMED[4]!])).toBe('applied')
    expect(tracker.missing).toBe(false)
    expect(tracker.view.nodes.chat!.text).toBe('Once upon a time')
    expect(tracker.view.lastSeq).toBe(7)
  })

  it('ignores events of other runs', () => {
    const tracker = new RunTracker(newRunView(RUN))
    expect(tracker.accept({ ...STREAMED[0]!, runId: 'other' })).toBe('duplicate')
    expect(tracker.view.lastSeq).toBe(0)
  })

  it('recognises run events among other socket messages', () => {
    expect(isRunEvent({ type: 'node:started', runId: RUN, seq: 1 })).toBe(true)
    expect(isRunEvent({ type: 'status', status: 'connected' })).toBe(false)
    expect(isRunEvent({ type: 'workflow:saved', workflowId: 'x' })).toBe(false)
  })
})

describe('agent tool steps in the run log', () => {
  it('logs each tool call of an agent node with how it ended, without a seq gap', () => {
    const { view } = replay(
      sequence(
        { type: 'workflow:started', workflowId: 'wf', nodeIds: ['agent'] },
        { type: 'node:started', nodeId: 'agent', nodeName: 'Agent', nodeType: 'agent:Run' },
        { type: 'node:tool-step', nodeId: 'agent', step: { tool: 'chat:RollDice', ok: true, decision: 'allowed' } },
        { type: 'node:tool-step', nodeId: 'agent', step: { tool: 'kb:CreateEntry', ok: false, decision: 'denied' } },
        { type: 'node:tool-step', nodeId: 'agent', step: { tool: 'chat:RollDice', ok: false, decision: 'allowed', error: 'not dice' } },
      ),
    )
    expect(view.lastSeq).toBe(5)
    expect(view.log.filter((l) => l.type === 'node:tool-step').map((l) => l.detail)).toEqual([
      'chat:RollDice: ok',
      'kb:CreateEntry: denied',
      'chat:RollDice: not dice',
    ])
    expect(view.nodes.agent!.state).toBe('running')
  })
})
