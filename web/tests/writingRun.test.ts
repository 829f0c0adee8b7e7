import { describe, expect, it } from 'vitest'
import type { RunEventMessage } from '../src/api/workflows'
import {
  generatingSources,
  keptText,
  latestEvaluation,
  newWritingRun,
  pickKeepNode,
  streamSections,
  WritingRunTracker,
} from '../src/lib/writingRun'

const RUN = 'run-7'

function sequence(...events: Omit<RunEventMessage, 'runId' | 'seq'>[]): RunEventMessage[] {
  return events.map((e, i) => ({ runId: RUN, seq: i + 1, ...e }) as RunEventMessage)
}

const SOURCES = [
  { uri: 'viking://resources/b1/meta/outline', reason: 'always: /meta', level: 'L1', version: 2 },
  { uri: 'viking://resources/b1/profiles/characters/lin', reason: 'scene entity Lin', level: 'L1', version: 3 },
]

const CHAPTER_RUN = sequence(
  { type: 'workflow:started', workflowId: 'writing-chapter', nodeIds: ['plan', 'draft', 'check', 'revise'] },
  { type: 'node:started', nodeId: 'plan', nodeName: 'Plan scene' },
  { type: 'node:streaming', nodeId: 'plan', chunk: 'Lin meets ' },
  { type: 'node:streaming', nodeId: 'plan', chunk: 'the envoy.' },
  { type: 'node:completed', nodeId: 'plan', output: 'Lin meets the envoy.', outputs: { text: 'Lin meets the envoy.' } },
  { type: 'node:started', nodeId: 'draft', nodeName: 'Draft' },
  { type: 'node:streaming', nodeId: 'draft', chunk: 'The rain had not stopped.' },
  {
    type: 'node:completed',
    nodeId: 'draft',
    output: 'The rain had not stopped.',
    outputs: { text: 'The rain had not stopped.' },
    contextSources: SOURCES,
    evaluation: {
      decision: 'approve',
      confidence: 0.9,
      reason: 'no contradictions',
      checks: [{ dimension: 'timeline', passed: true, detail: '' }],
    },
  },
  { type: 'node:started', nodeId: 'revise', nodeName: 'Revise' },
  { type: 'node:streaming', nodeId: 'revise', chunk: 'The rain never stopped.' },
  { type: 'node:completed', nodeId: 'revise', output: 'The rain never stopped.', outputs: { text: 'The rain never stopped.' } },
  { type: 'workflow:completed', interfaceOutputs: {} },
)

function replay(events: RunEventMessage[]): WritingRunTracker {
  const tracker = new WritingRunTracker(newWritingRun(RUN, 'writing-chapter'))
  for (const e of events) tracker.accept(e)
  return tracker
}

describe('folding a chapter run', () => {
  it('streams each node under its name in start order with only the newest open', () => {
    const sections = streamSections(replay(CHAPTER_RUN).view)
    expect(sections.map((s) => [s.name, s.text, s.open])).toEqual([
      ['Plan scene', 'Lin meets the envoy.', false],
      ['Draft', 'The rain had not stopped.', false],
      ['Revise', 'The rain never stopped.', true],
    ])
  })

  it('concatenates streamed chunks while the node is still writing', () => {
    const view = replay(CHAPTER_RUN.slice(0, 4)).view
    expect(streamSections(view)).toEqual([{ nodeId: 'plan', name: 'Plan scene', text: 'Lin meets the envoy.', state: 'streaming', open: true }])
  })

  it('keeps role C evaluation and the context sources of the generating node', () => {
    const view = replay(CHAPTER_RUN).view
    expect(latestEvaluation(view)).toEqual({
      nodeId: 'draft',
      evaluation: { decision: 'approve', confidence: 0.9, reason: 'no contradictions', reasonNote: null, checks: [{ dimension: 'timeline', passed: true, detail: '', findings: [] }] },
    })
    expect(generatingSources(view)).toEqual({ nodeId: 'draft', sources: SOURCES })
  })

  it('explains the draft prompt even when a later node read context too', () => {
    const revised = [{ uri: 'viking://resources/bk/manuscript/arc-01/chapter-001', reason: 'recent chapter (1)', level: 'L2', version: 1 }]
    const events = sequence(
      { type: 'workflow:started', nodeIds: ['draft', 'revise'] },
      { type: 'node:started', nodeId: 'draft' },
      { type: 'node:completed', nodeId: 'draft', output: 'x', contextSources: SOURCES },
      { type: 'node:started', nodeId: 'revise' },
      { type: 'node:completed', nodeId: 'revise', output: 'y', contextSources: revised },
    )
    expect(generatingSources(replay(events).view)).toEqual({ nodeId: 'draft', sources: SOURCES })
  })

  it('ignores an evaluation that is not the contract shape', () => {
    const events = sequence(
      { type: 'workflow:started', nodeIds: ['draft'] },
      { type: 'node:started', nodeId: 'draft' },
      { type: 'node:completed', nodeId: 'draft', output: 'x', evaluation: { decision: 'maybe' } },
    )
    expect(latestEvaluation(replay(events).view)).toBeNull()
  })

  it('applies a duplicated event once', () => {
    const tracker = replay(CHAPTER_RUN)
    tracker.accept(CHAPTER_RUN[6]!)
    expect(tracker.view.run.nodes.draft!.text).toBe('The rain had not stopped.')
    expect(tracker.view.completed).toEqual(['plan', 'draft', 'revise'])
  })

  it('holds events after a gap and folds them once the missing ones arrive', () => {
    const tracker = new WritingRunTracker(newWritingRun(RUN))
    const [first, second, ...rest] = CHAPTER_RUN
    tracker.accept(first!)
    expect(tracker.acceptAll(rest)).toBe('gap')
    expect(tracker.view.order).toEqual([])
    tracker.accept(second!)
    expect(tracker.view.order).toEqual(['plan', 'draft', 'revise'])
    expect(tracker.view.run.status).toBe('completed')
    expect(generatingSources(tracker.view)?.nodeId).toBe('draft')
  })
})

describe('picking the node to keep', () => {
  it('prefers revise over draft when both finished', () => {
    const view = replay(CHAPTER_RUN).view
    expect(pickKeepNode(view)).toBe('revise')
    expect(keptText(view)).toBe('The rain never stopped.')
  })

  it('prefers choose over revise and draft', () => {
    const n = CHAPTER_RUN.length
    const events = [
      ...CHAPTER_RUN.slice(0, -1),
      { runId: RUN, seq: n, type: 'node:started', nodeId: 'choose' },
      { runId: RUN, seq: n + 1, type: 'node:completed', nodeId: 'choose', output: 'Chosen.', outputs: { text: 'Chosen.' } },
    ] as RunEventMessage[]
    expect(pickKeepNode(replay(events).view)).toBe('choose')
  })

  it('falls back to draft when revise failed', () => {
    const events = [
      ...CHAPTER_RUN.slice(0, 9),
      { runId: RUN, seq: 10, type: 'node:error', nodeId: 'revise', error: 'LLM went away' } as RunEventMessage,
    ]
    const view = replay(events).view
    expect(pickKeepNode(view)).toBe('draft')
  })

  it('offers nothing when no chapter-text node finished', () => {
    expect(pickKeepNode(replay(CHAPTER_RUN.slice(0, 5)).view)).toBeNull()
  })
})
