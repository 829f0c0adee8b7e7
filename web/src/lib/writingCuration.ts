// The curation of a kept chapter as the page shows it: one line per step, folded from the
// `curation:progress` messages (or the outputs list after a reload).
import type { OutputStatus, StepReason, StepState } from '../api/writing'

export const CURATION_STEPS = ['summarize', 'extract', 'profiles', 'index', 'check'] as const

export interface StepView {
  step: string
  state: StepState
  /** Why it failed, why it was skipped (no agent model, and where to set one), or what a
   * step done without the agent model could not do (the offline prose reader's note). */
  error: string
  /** The same reason as a term and values (`writing.curation.reason.<term>`), when the
   * server sent one: the page says it in its language, else shows `error`. */
  reason: StepReason | null
}

export interface CurationView {
  outputId: string
  chapter: number
  steps: StepView[]
}

const STATES = new Set<StepState>(['pending', 'running', 'done', 'skipped', 'failed'])

function asState(value: unknown): StepState {
  return typeof value === 'string' && STATES.has(value as StepState) ? (value as StepState) : 'pending'
}

export function newCuration(outputId: string, chapter: number): CurationView {
  return { outputId, chapter, steps: CURATION_STEPS.map((step) => ({ step, state: 'pending', error: '', reason: null })) }
}

function stepOf(view: CurationView, step: string): StepView {
  let found = view.steps.find((s) => s.step === step)
  if (!found) view.steps.push((found = { step, state: 'pending', error: '', reason: null }))
  return found
}

const TERMS = new Set<StepReason['term']>(['summary_no_model', 'summary_agent_down', 'facts_no_model', 'facts_agent_down'])

/** A step reason the page knows the words of, else null (the sentence is shown). */
function asReason(value: unknown): StepReason | null {
  if (!value || typeof value !== 'object') return null
  const raw = value as { term?: unknown; problem?: unknown }
  if (typeof raw.term !== 'string' || !TERMS.has(raw.term as StepReason['term'])) return null
  return { term: raw.term as StepReason['term'], problem: typeof raw.problem === 'string' ? raw.problem : null }
}

/** What a step says about running without a model, in the page's language. */
export function stepReasonText(step: StepView, t: (key: string, values?: Record<string, unknown>) => string): string {
  if (!step.reason) return step.error
  return t(`writing.curation.reason.${step.reason.term}`, { problem: step.reason.problem ?? '' })
}

function said(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/** Apply one `curation:progress {outputId, step, state, error, reason}`; others' outputs are
 * ignored. A failed step shows its error, a skipped one its reason, a done one its note. */
export function applyProgress(view: CurationView, message: Record<string, unknown>): boolean {
  if (message.outputId !== view.outputId || typeof message.step !== 'string') return false
  const step = stepOf(view, message.step)
  step.state = asState(message.state)
  step.error =
    step.state === 'failed'
      ? said(message.error)
      : step.state === 'skipped' || step.state === 'done'
        ? said(message.reason)
        : ''
  step.reason = step.state === 'skipped' || step.state === 'done' ? asReason(message.reasonTerm) : null
  return true
}

/** The view of an output from `GET /outputs` (its steps' states, the error on the failed
 * one, the reasons of the skipped ones and the notes of the done ones). */
export function curationFromStatus(status: OutputStatus): CurationView {
  const view = newCuration(status.outputId, status.chapter)
  for (const [step, state] of Object.entries(status.steps)) {
    const s = stepOf(view, step)
    s.state = asState(state)
    if (s.state === 'failed') s.error = status.error ?? ''
    if (s.state === 'skipped' || s.state === 'done') {
      s.error = status.reasons?.[step] ?? ''
      s.reason = asReason(status.reasonTerms?.[step])
    }
  }
  return view
}

/** The step has run (a skipped one did what it could without the agent model). */
export function stepFinished(step: StepView): boolean {
  return step.state === 'done' || step.state === 'skipped'
}

/** Every step has run. */
export function curationFinished(view: CurationView): boolean {
  return view.steps.every(stepFinished)
}

/** Some step ran without the agent model: the memory is thinner than it could be. */
export function curationSkipped(view: CurationView): boolean {
  return view.steps.some((s) => s.state === 'skipped')
}

export function curationFailed(view: CurationView): boolean {
  return view.steps.some((s) => s.state === 'failed')
}
