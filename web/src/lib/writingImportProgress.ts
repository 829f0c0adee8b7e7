// The curation of a manuscript import as a whole: one CurationView per chapter the import
// started (the import's answer names them), folded from the same `curation:progress`
// messages the chapter panel follows, and summed up as "k of n chapters" with the failed
// steps named. After a reload the book's unfinished outputs stand in for the import.
import { computed, onBeforeUnmount, ref } from 'vue'
import type { CurationStarted, OutputStatus } from '../api/writing'
import type { Connection, ServerMessage } from './connection'
import {
  applyProgress,
  type CurationView,
  curationFinished,
  curationFromStatus,
  curationSkipped,
  newCuration,
  stepFinished,
} from './writingCuration'

export interface ImportProgress {
  bookId: string
  /** In chapter order. */
  outputs: CurationView[]
}

export interface StepFailure {
  outputId: string
  chapter: number
  step: string
  error: string
}

export interface ImportSummary {
  total: number
  /** Chapters whose every step finished (done, or skipped for want of an agent model). */
  finished: number
  failures: StepFailure[]
  /** Finished chapters read without the agent model: their memory is thinner. */
  limited: number
  done: boolean
}

function byChapter(outputs: CurationView[]): CurationView[] {
  return [...outputs].sort((a, b) => a.chapter - b.chapter)
}

/** The progress of an import just answered: every chapter's steps still to come. */
export function importProgress(bookId: string, started: CurationStarted[]): ImportProgress {
  return { bookId, outputs: byChapter(started.map((s) => newCuration(s.outputId, s.chapter))) }
}

/** After a reload: the book's outputs whose curation has not finished (or failed), or
 * null when every output is finished. */
export function resumedProgress(bookId: string, outputs: OutputStatus[]): ImportProgress | null {
  const open = outputs.map(curationFromStatus).filter((view) => !curationFinished(view))
  return open.length ? { bookId, outputs: byChapter(open) } : null
}

/** Apply one `curation:progress` to the output it names; false when it names none here.
 * A finished step stays finished: a message that was held while the outputs list was read
 * may be older than the list (retrying re-runs failed steps only, never finished ones). */
export function followProgress(progress: ImportProgress, message: ServerMessage): boolean {
  if (message.bookId !== progress.bookId) return false
  const view = progress.outputs.find((o) => o.outputId === message.outputId)
  if (!view) return false
  const step = view.steps.find((s) => s.step === message.step)
  if (step && stepFinished(step)) return true
  return applyProgress(view, message)
}

export function summarizeImport(progress: ImportProgress): ImportSummary {
  const finished = progress.outputs.filter(curationFinished)
  const failures = progress.outputs.flatMap((view) =>
    view.steps
      .filter((s) => s.state === 'failed')
      .map((s) => ({ outputId: view.outputId, chapter: view.chapter, step: s.step, error: s.error })),
  )
  const total = progress.outputs.length
  return {
    total,
    finished: finished.length,
    failures,
    limited: finished.filter(curationSkipped).length,
    done: finished.length === total,
  }
}

/** The failed steps of an output are queued again: show them waiting. */
export function markRetried(progress: ImportProgress, outputId: string): void {
  const view = progress.outputs.find((o) => o.outputId === outputId)
  for (const s of view?.steps ?? []) if (s.state === 'failed') Object.assign(s, { state: 'pending', error: '' })
}

/** Held messages of one book while its import, or its outputs list, is being answered:
 * curation starts before the answer names its outputs. */
interface Held {
  bookId: string
  messages: ServerMessage[]
}

export function useImportProgress(connection: Connection | null) {
  const progress = ref<ImportProgress | null>(null)
  let held: Held | null = null

  function hold(bookId: string): Held {
    held = { bookId, messages: [] }
    return held
  }

  function replay(next: ImportProgress, from: Held): ImportProgress {
    for (const message of from.messages) followProgress(next, message)
    return next
  }

  /** Before the import is sent: keep the book's progress until the answer names outputs. */
  function expectImport(bookId: string): void {
    hold(bookId)
  }

  /** The import was answered: follow the curation it started. */
  function followImport(bookId: string, started: CurationStarted[]): void {
    const from = held?.bookId === bookId ? held : { bookId, messages: [] }
    held = null
    progress.value = started.length ? replay(importProgress(bookId, started), from) : null
  }

  function cancelImport(): void {
    held = null
  }

  /** A book was opened: show its unfinished curation, unless its import is followed here. */
  async function openBook(bookId: string | null, list: (bookId: string) => Promise<OutputStatus[]>): Promise<void> {
    if (bookId !== null && progress.value?.bookId === bookId) return
    progress.value = null
    if (bookId === null) return
    const mine = hold(bookId)
    try {
      const outputs = await list(bookId)
      if (held !== mine) return // another book, or an import, came since
      const next = resumedProgress(bookId, outputs)
      progress.value = next ? replay(next, mine) : null
    } catch {
      // Nothing to show: the list is only a convenience after a reload.
    } finally {
      if (held === mine) held = null
    }
  }

  function onProgress(message: ServerMessage): void {
    if (held && message.bookId === held.bookId) held.messages.push(message)
    if (progress.value) followProgress(progress.value, message)
  }

  function retried(outputId: string): void {
    if (progress.value) markRetried(progress.value, outputId)
  }

  function dismiss(): void {
    progress.value = null
  }

  const off = connection?.on('curation:progress', onProgress)
  onBeforeUnmount(() => off?.())

  return {
    progress,
    summary: computed(() => (progress.value ? summarizeImport(progress.value) : null)),
    expectImport,
    followImport,
    cancelImport,
    openBook,
    retried,
    dismiss,
  }
}
