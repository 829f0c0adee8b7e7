// The curation of a kept chapter as the page shows it: one line per step, folded from the
// `curation:progress` messages (or the outputs list after a reload).
import type { OutputStatus, StepState } from '../api/writing'

export const CURATION_STEPS = ['summarize', 'extract', 'profiles', 'index', 'check'] as const

export interface StepView {
  step: string
  state: StepState
  error: string
}

export interface CurationView {
  outputId: string
  chapter: number
  steps: StepView[]
}

const STATES = new Set<StepState>(['pending', 'running', 'done', 'failed'])

function asState(value: unknown): StepState {
  return typeof value === 'string' && STATES.has(value as StepState) ? (value as StepState) : 'pending'
}

export function newCuration(outputId: string, chapter: number): CurationView {
  return { outputId, chapter, steps: CURATION_STEPS.map((step) => ({ step, state: 'pending', error: '' })) }
}

function stepOf(view: CurationView, step: string): StepView {
  let found = view.steps.find((s) => s.step === step)
  if (!found) view.steps.push((found = { step, state: 'pending', error: '' }))
  return found
}

/** Apply one `curation:progress {outputId, step, state, error}`; others' outputs are ignored. */
export function applyProgress(view: CurationView, message: Record<string, unknown>): boolean {
  if (message.outputId !== view.outputId || typeof message.step !== 'string') return false
  const step = stepOf(view, message.step)
  step.state = asState(message.state)
  step.error = step.state === 'failed' && typeof message.error === 'string' ? message.error : ''
  return true
}

/** The view of an output from `GET /outputs` (its steps' states, the error on the failed one). */
export function curationFromStatus(status: OutputStatus): CurationView {
  const view = newCuration(status.outputId, status.chapter)
  for (const [step, state] of Object.entries(status.steps)) {
    const s = stepOf(view, step)
    s.state = asState(state)
    if (s.state === 'failed') s.error = status.error ?? ''
  }
  return view
}

export function curationFinished(view: CurationView): boolean {
  return view.steps.every((s) => s.state === 'done')
}

export function curationFailed(view: CurationView): boolean {
  return view.steps.some((s) => s.state === 'failed')
}
