// Following a SillyTavern import: the job is asked every POLL_INTERVAL_MS until it is done
// or failed, and useStImport holds the section's state (the folder typed, its preview, the
// job's progress, the report). Polling ends with the job, on stop(), and when the component
// that started it goes away.
import { computed, getCurrentScope, onScopeDispose, ref, shallowRef } from 'vue'
import { ApiError } from '../api/client'
import {
  getStImport,
  previewStFolder,
  startStImport,
  type StFolderPreview,
  type StFolderRequest,
  type StImportJob,
  type StImportProgress,
  type StKindPreview,
} from '../api/sillytavern'
import type { Problem } from '../api/types'
import { folderRequest, progressBars, sameRequest } from './stImport'

export const POLL_INTERVAL_MS = 500
/** Unanswered asks in a row before the job is given up on (a server restarting, a laptop
 * waking): an HTTP error answer gives up at once. */
export const NETWORK_RETRIES = 5

export interface PollHandlers {
  /** Every answer, the last one done or failed. */
  progress(progress: StImportProgress): void
  /** The job could not be followed (not found, the server gone). */
  lost(error: ShownError): void
}

export interface ImportPoll {
  stop(): void
}

export interface ShownError {
  message: string
  problems: Problem[]
}

export function shownError(exc: unknown): ShownError {
  if (exc instanceof ApiError) return { message: exc.message, problems: exc.problems }
  return { message: exc instanceof Error ? exc.message : String(exc), problems: [] }
}

/** Ask for the job now, then POLL_INTERVAL_MS after each answer (never two asks at once)
 * while it runs. */
export function pollStImport(
  jobId: string,
  get: (jobId: string) => Promise<StImportProgress>,
  handlers: PollHandlers,
  intervalMs: number = POLL_INTERVAL_MS,
): ImportPoll {
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | null = null
  let misses = 0

  function schedule(): void {
    timer = setTimeout(() => void ask(), intervalMs)
  }

  async function ask(): Promise<void> {
    timer = null
    let progress: StImportProgress
    try {
      progress = await get(jobId)
    } catch (exc) {
      if (stopped) return
      if (exc instanceof ApiError && exc.isNetworkError && misses < NETWORK_RETRIES) {
        misses += 1
        schedule()
        return
      }
      stopped = true
      handlers.lost(shownError(exc))
      return
    }
    if (stopped) return
    misses = 0
    if (progress.state !== 'running') stopped = true
    handlers.progress(progress)
    if (!stopped) schedule()
  }

  void ask()
  return {
    stop(): void {
      stopped = true
      if (timer !== null) clearTimeout(timer)
      timer = null
    },
  }
}

export interface StImportApi {
  preview(request: StFolderRequest): Promise<StFolderPreview>
  start(request: StFolderRequest): Promise<StImportJob>
  get(jobId: string): Promise<StImportProgress>
}

const SERVER_API: StImportApi = {
  preview: (request) => previewStFolder(request),
  start: (request) => startStImport(request),
  get: (jobId) => getStImport(jobId),
}

export function useStImport(api: StImportApi = SERVER_API) {
  const path = ref('')
  const user = ref('')
  const preview = shallowRef<StFolderPreview | null>(null)
  const previewError = shallowRef<ShownError | null>(null)
  const previewing = ref(false)
  const progress = shallowRef<StImportProgress | null>(null)
  const importError = shallowRef<ShownError | null>(null)
  const starting = ref(false)
  /** What the preview found, for the bars of kinds the job has not reached yet. */
  let planned: StKindPreview[] = []
  let previewedFor: StFolderRequest | null = null
  let previewSeq = 0
  let poll: ImportPoll | null = null

  const request = computed(() => folderRequest(path.value, user.value))
  const running = computed(() => starting.value || progress.value?.state === 'running')
  /** The preview shown is of the folder typed now (an edit makes it stale). */
  const previewCurrent = computed(() => preview.value !== null && sameRequest(previewedFor, request.value))
  const canPreview = computed(() => request.value !== null && !previewing.value && !running.value)
  const canImport = computed(() => previewCurrent.value && !previewing.value && !running.value)
  const bars = computed(() => (progress.value?.state === 'running' ? progressBars(progress.value, planned) : []))
  const report = computed(() => (progress.value?.state === 'done' ? (progress.value.report ?? null) : null))

  function stopPolling(): void {
    poll?.stop()
    poll = null
  }

  async function runPreview(): Promise<void> {
    const req = request.value
    if (req === null || running.value) return
    const seq = ++previewSeq
    previewing.value = true
    previewError.value = null
    progress.value = null
    importError.value = null
    try {
      const answer = await api.preview(req)
      if (seq !== previewSeq) return
      preview.value = answer
      previewedFor = req
    } catch (exc) {
      if (seq !== previewSeq) return
      preview.value = null
      previewedFor = null
      previewError.value = shownError(exc)
    } finally {
      if (seq === previewSeq) previewing.value = false
    }
  }

  async function runImport(): Promise<void> {
    const req = request.value
    if (req === null || !canImport.value) return
    stopPolling()
    starting.value = true
    importError.value = null
    progress.value = null
    let job: StImportJob
    try {
      job = await api.start(req)
    } catch (exc) {
      importError.value = shownError(exc)
      return
    } finally {
      starting.value = false
    }
    // Until the first answer, the bars are those of the kinds the preview found, at nothing done.
    planned = preview.value?.kinds ?? []
    progress.value = { job_id: job.job_id, state: 'running', kinds: planned.map((k) => ({ kind: k.kind, done: 0, total: 0 })) }
    poll = pollStImport(
      job.job_id,
      api.get,
      {
        progress(next) {
          progress.value = next
          if (next.state === 'failed') importError.value = { message: next.error ?? '', problems: [] }
          // What the preview promised has come (or failed): a new preview is needed to import again.
          if (next.state !== 'running') preview.value = null
        },
        lost(error) {
          progress.value = null
          importError.value = error
        },
      },
    )
  }

  if (getCurrentScope()) onScopeDispose(stopPolling)

  return {
    path,
    user,
    preview,
    previewError,
    previewing,
    previewCurrent,
    progress,
    importError,
    running,
    bars,
    report,
    canPreview,
    canImport,
    runPreview,
    runImport,
  }
}
