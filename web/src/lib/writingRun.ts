// A chapter-workflow run as the Writing page shows it: the run view of workflowRun.ts
// (node states, streamed text, waiting decisions) plus what the writing nodes add to
// `node:completed` — Role C's evaluation and the context sources (provenance) — and the
// order the nodes started in, so the stream reads top to bottom.
import type { RunEventMessage } from '../api/workflows'
import type { ContextSourceRef } from '../api/writing'
import { type Accepted, newRunView, RunTracker, type RunView, shownText } from './workflowRun'

/** A sentence an evaluator made, as a term and values (`writing.evaluation.note.*`,
 * a finding's `writing.warnings.frame.*`); a model's own words come without one. */
export interface EvaluationNote {
  term: string
  values: Record<string, unknown>
}

export interface EvaluationCheck {
  dimension: string
  passed: boolean
  detail: string
  findings: EvaluationNote[]
}

export interface RunEvaluation {
  decision: 'approve' | 'retry' | 'flag-human'
  confidence: number
  reason: string
  reasonNote: EvaluationNote | null
  checks: EvaluationCheck[]
}

function note(value: unknown): EvaluationNote | null {
  const raw = record(value)
  if (!raw || typeof raw.term !== 'string') return null
  return { term: raw.term, values: record(raw.values) ?? {} }
}

export interface WritingRunView {
  run: RunView
  /** Node ids in the order they first started (or streamed). */
  order: string[]
  names: Record<string, string>
  /** Node ids in the order they completed; a node completing again moves to the end. */
  completed: string[]
  evaluations: Record<string, RunEvaluation>
  contextSources: Record<string, ContextSourceRef[]>
}

export interface StreamSection {
  nodeId: string
  name: string
  text: string
  state: string
  /** Only the newest section is shown open. */
  open: boolean
}

/** The node ids whose output is the chapter text, in the order they are preferred. */
export const KEEP_PREFERENCE = ['choose', 'revise', 'draft'] as const

export function newWritingRun(runId: string, workflowId: string | null = null): WritingRunView {
  return { run: newRunView(runId, workflowId), order: [], names: {}, completed: [], evaluations: {}, contextSources: {} }
}

function record(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null
}

const DECISIONS = new Set(['approve', 'retry', 'flag-human'])

/** Read `node:completed.evaluation`; null when absent or not the contract's shape. */
export function parseEvaluation(value: unknown): RunEvaluation | null {
  const raw = record(value)
  if (!raw || typeof raw.decision !== 'string' || !DECISIONS.has(raw.decision)) return null
  const checks = Array.isArray(raw.checks) ? raw.checks.map(record).filter((c): c is Record<string, unknown> => c !== null) : []
  return {
    decision: raw.decision as RunEvaluation['decision'],
    confidence: typeof raw.confidence === 'number' ? raw.confidence : 1,
    reason: typeof raw.reason === 'string' ? raw.reason : '',
    reasonNote: note(raw.reason_note),
    checks: checks.map((c) => ({
      dimension: String(c.dimension ?? ''),
      passed: c.passed === true,
      detail: typeof c.detail === 'string' ? c.detail : '',
      findings: Array.isArray(c.findings) ? c.findings.map(note).filter((n): n is EvaluationNote => n !== null) : [],
    })),
  }
}

export function parseSources(value: unknown): ContextSourceRef[] {
  if (!Array.isArray(value)) return []
  const out: ContextSourceRef[] = []
  for (const item of value) {
    const s = record(item)
    if (!s || typeof s.uri !== 'string') continue
    out.push({
      uri: s.uri,
      level: typeof s.level === 'string' ? s.level : 'L2',
      version: typeof s.version === 'number' ? s.version : null,
      reason: typeof s.reason === 'string' ? s.reason : '',
    })
  }
  return out
}

/** What the writing page adds on top of the base fold for one (applied) event. */
function foldExtras(view: WritingRunView, event: RunEventMessage): void {
  const nodeId = typeof event.nodeId === 'string' ? event.nodeId : null
  if (!nodeId) return
  if ((event.type === 'node:started' || event.type === 'node:streaming') && !view.order.includes(nodeId)) view.order.push(nodeId)
  if (event.type === 'node:started' && typeof event.nodeName === 'string' && event.nodeName) view.names[nodeId] = event.nodeName
  if (event.type === 'node:completed' || event.type === 'node:cached') {
    if (!view.order.includes(nodeId)) view.order.push(nodeId)
    view.completed = [...view.completed.filter((id) => id !== nodeId), nodeId]
    const evaluation = parseEvaluation(event.evaluation)
    if (evaluation) view.evaluations[nodeId] = evaluation
    const sources = parseSources(event.contextSources)
    if (sources.length) view.contextSources[nodeId] = sources
  }
}

/**
 * Applies a run's events once each and in seq order (the base RunTracker's rules), folding
 * the writing extras of each event it applies. `gap`: events are missing; fetch them.
 */
export class WritingRunTracker {
  readonly view: WritingRunView
  private readonly base: RunTracker
  private applied = 0
  /** Events not yet folded, by seq (the base may hold them back after a gap). */
  private readonly pending = new Map<number, RunEventMessage>()

  constructor(view: WritingRunView) {
    this.view = view
    this.base = new RunTracker(view.run)
  }

  accept(event: RunEventMessage): Accepted {
    if (event.runId !== this.view.run.runId) return 'duplicate'
    if (event.seq > this.applied) this.pending.set(event.seq, event)
    const result = this.base.accept(event)
    // The base applied everything up to its lastSeq: fold those events' extras in order.
    while (this.applied < this.view.run.lastSeq) {
      this.applied += 1
      const next = this.pending.get(this.applied)
      this.pending.delete(this.applied)
      if (next) foldExtras(this.view, next)
    }
    return result
  }

  acceptAll(events: readonly RunEventMessage[]): Accepted {
    let result: Accepted = 'duplicate'
    for (const event of [...events].sort((a, b) => a.seq - b.seq)) {
      const r = this.accept(event)
      if (r !== 'duplicate') result = r
    }
    return this.base.missing ? 'gap' : result
  }
}

/** The streamed text per node, in start order, with the node's name; the newest open. */
export function streamSections(view: WritingRunView): StreamSection[] {
  const sections: StreamSection[] = []
  for (const nodeId of view.order) {
    const node = view.run.nodes[nodeId]
    const text = shownText(node)
    if (!node || !text) continue
    sections.push({ nodeId, name: view.names[nodeId] ?? nodeId, text, state: node.state, open: false })
  }
  const last = sections[sections.length - 1]
  if (last) last.open = true
  return sections
}

const KEEPABLE = new Set(['done', 'cached', 'frozen'])

/**
 * The node whose output is the chapter text: among the finished nodes, `choose` before
 * `revise` before `draft`; null when none of them finished.
 */
export function pickKeepNode(view: WritingRunView): string | null {
  const finished = new Set(view.completed.filter((id) => KEEPABLE.has(view.run.nodes[id]?.state ?? '')))
  return KEEP_PREFERENCE.find((id) => finished.has(id)) ?? null
}

/** The text the kept node produced (what `output:persist` will store). */
export function keptText(view: WritingRunView): string {
  const nodeId = pickKeepNode(view)
  return nodeId ? shownText(view.run.nodes[nodeId]) : ''
}

/** Role C's newest verdict: the evaluation of the last node that completed with one. */
export function latestEvaluation(view: WritingRunView): { nodeId: string; evaluation: RunEvaluation } | null {
  for (let i = view.completed.length - 1; i >= 0; i -= 1) {
    const nodeId = view.completed[i]!
    const evaluation = view.evaluations[nodeId]
    if (evaluation) return { nodeId, evaluation }
  }
  return null
}

/** The node that writes the chapter: its prompt is the one the provenance panel explains. */
export const GENERATING_NODE = 'draft'

/** The context the generating node saw: the draft's sources, else those of the last node
 *  that reported any. */
export function generatingSources(view: WritingRunView): { nodeId: string; sources: ContextSourceRef[] } | null {
  const drafted = view.contextSources[GENERATING_NODE]
  if (drafted?.length) return { nodeId: GENERATING_NODE, sources: drafted }
  for (let i = view.completed.length - 1; i >= 0; i -= 1) {
    const nodeId = view.completed[i]!
    const sources = view.contextSources[nodeId]
    if (sources?.length) return { nodeId, sources }
  }
  return null
}
