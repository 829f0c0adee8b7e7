// Writing a chapter over the WebSocket: start the book's chapter workflow with
// `workflow:run`, follow its events, answer `node:needs-human` with `human:decision`, then
// keep the chapter (`output:persist`) or discard it, and follow its curation
// (`output:persisted`, `curation:progress`, `profile:updated`, `output:checked`).
import { computed, onBeforeUnmount, reactive, ref, shallowRef } from 'vue'
import type { RunEventMessage } from '../api/workflows'
import { runEvents } from '../api/workflows'
import { chapterWorkflow } from '../api/writing'
import type { Connection, ServerMessage } from './connection'
import { failureMessage } from './knowledgeEditor'
import { applyProgress, type CurationView, newCuration } from './writingCuration'
import { isRunEvent, RUN_EVENT_TYPES, type HumanRequest } from './workflowRun'
import { keptText, newWritingRun, pickKeepNode, WritingRunTracker, type WritingRunView } from './writingRun'

export type KeepState = 'open' | 'persisting' | 'persisted' | 'discarded'

export interface HumanAnswer {
  decision: 'approve' | 'retry' | 'edit'
  editedOutput?: string
  choice?: number
}

export interface ProfileNotice {
  type: string
  name: string
  uri: string
}

export interface ChapterRunHooks {
  bookId: () => string | null
  /** The chapter was stored: refresh the tree. */
  onPersisted: (chapter: number) => void
  onProfilesUpdated: (profiles: ProfileNotice[]) => void
  /** Role C's checks of a kept chapter finished: refresh the warnings. */
  onChecked: () => void
}

/** How many outputs' unshown progress is remembered (the newest ones). */
const UNSHOWN_OUTPUTS = 16

const requestKey = (r: HumanRequest) => `${r.runId}/${r.nodeId}/${r.seq}`

export function useChapterRun(connection: Connection | null, hooks: ChapterRunHooks) {
  const tracker = shallowRef<WritingRunTracker | null>(null)
  const view = computed<WritingRunView | null>(() => tracker.value?.view ?? null)
  const chapter = ref(0)
  const starting = ref(false)
  const error = ref('')
  const keep = ref<KeepState>('open')
  const curation = ref<CurationView | null>(null)
  const answered = reactive(new Set<string>())
  // Progress of this book's outputs that are not on screen: a saved chapter's curation
  // can start (and finish) before the save's answer names its output.
  const unshown = new Map<string, ServerMessage[]>()
  let awaitingWorkflow: string | null = null
  // Events of a run whose `workflow:run-accepted` has not arrived yet.
  let early: RunEventMessage[] = []

  const humanRequest = computed<HumanRequest | null>(
    () => Object.values(view.value?.run.waiting ?? {}).find((r) => !answered.has(requestKey(r))) ?? null,
  )
  const keepNode = computed(() => (view.value ? pickKeepNode(view.value) : null))
  const finished = computed(() => view.value !== null && view.value.run.status !== 'running')

  function adopt(runId: string, workflowId: string | null): void {
    if (tracker.value?.view.run.runId === runId) return
    const tr = new WritingRunTracker(reactive(newWritingRun(runId, workflowId)) as WritingRunView)
    tracker.value = tr
    answered.clear()
    awaitingWorkflow = null
    starting.value = false
    const mine = early.filter((e) => e.runId === runId)
    early = []
    if (mine.length && tr.acceptAll(mine) === 'gap') void catchUp(tr)
  }

  async function catchUp(tr: WritingRunTracker): Promise<void> {
    try {
      const result = await runEvents(tr.view.run.runId, tr.view.run.lastSeq)
      if (tracker.value === tr) tr.acceptAll(result.events)
    } catch {
      // The server no longer knows the run: keep what is shown.
    }
  }

  async function start(brief: string, ordinal: number): Promise<void> {
    const bookId = hooks.bookId()
    if (!bookId || !connection || starting.value) return
    starting.value = true
    error.value = ''
    try {
      const { workflowId } = await chapterWorkflow(bookId)
      tracker.value = null
      curation.value = null
      keep.value = 'open'
      chapter.value = ordinal
      awaitingWorkflow = workflowId
      early = []
      connection.send({ type: 'workflow:run', workflowId, inputs: { book: bookId, chapter: ordinal, brief } })
    } catch (exc) {
      error.value = failureMessage(exc)
      starting.value = false
    }
  }

  function decide(answer: HumanAnswer): void {
    const request = humanRequest.value
    if (!request || !connection) return
    connection.send({ type: 'human:decision', runId: request.runId, nodeId: request.nodeId, ...answer })
    answered.add(requestKey(request))
  }

  function keepOutput(): void {
    const v = view.value
    const bookId = hooks.bookId()
    const nodeId = keepNode.value
    if (!v || !bookId || !nodeId || !connection || keep.value !== 'open') return
    keep.value = 'persisting'
    connection.send({ type: 'output:persist', runId: v.run.runId, nodeId, bookId, chapter: chapter.value })
  }

  /** Forget the run's output here; nothing was stored, so nothing needs undoing. */
  function discardOutput(): void {
    keep.value = 'discarded'
    tracker.value = null
  }

  function onRunEvent(msg: ServerMessage): void {
    if (!isRunEvent(msg)) return
    const tr = tracker.value
    if (tr && msg.runId === tr.view.run.runId) {
      if (tr.accept(msg) === 'gap') void catchUp(tr)
      return
    }
    if (!awaitingWorkflow) return
    if (msg.type === 'workflow:started' && msg.workflowId === awaitingWorkflow) {
      early.push(msg)
      adopt(msg.runId, awaitingWorkflow)
    } else {
      early.push(msg)
    }
  }

  function onAccepted(msg: ServerMessage): void {
    if (awaitingWorkflow && msg.workflowId === awaitingWorkflow && typeof msg.runId === 'string') adopt(msg.runId, awaitingWorkflow)
  }

  function onInvalid(msg: ServerMessage): void {
    if (!awaitingWorkflow || msg.workflowId !== awaitingWorkflow) return
    awaitingWorkflow = null
    starting.value = false
    const problems = Array.isArray(msg.problems) ? msg.problems : []
    error.value = problems
      .map((p) => (p && typeof p === 'object' ? String((p as Record<string, unknown>).reason ?? '') : String(p)))
      .filter(Boolean)
      .join('; ')
  }

  function onPersisted(msg: ServerMessage): void {
    const v = view.value
    if (msg.bookId !== hooks.bookId() || typeof msg.outputId !== 'string') return
    // Our own keep, or (without a run on screen) one from another tab of this book.
    if (v && msg.runId !== undefined && msg.runId !== v.run.runId) return
    keep.value = 'persisted'
    const ordinal = typeof msg.chapter === 'number' ? msg.chapter : chapter.value
    if (!curation.value || curation.value.outputId !== msg.outputId) {
      if (msg.created === false) {
        // An output persisted before has nothing queued: show it as done.
        const next = newCuration(msg.outputId, ordinal)
        for (const s of next.steps) s.state = 'done'
        curation.value = next
      } else followCuration(msg.outputId, ordinal)
    }
    hooks.onPersisted(ordinal)
  }

  function onProgress(msg: ServerMessage): void {
    if (msg.bookId !== hooks.bookId() || typeof msg.outputId !== 'string') return
    if (curation.value && applyProgress(curation.value, msg)) return
    const seen = unshown.get(msg.outputId) ?? []
    unshown.delete(msg.outputId)
    unshown.set(msg.outputId, [...seen, msg])
    if (unshown.size > UNSHOWN_OUTPUTS) unshown.delete(unshown.keys().next().value as string)
  }

  /** Show the curation of an output just kept, with whatever progress it has made. */
  function followCuration(outputId: string, ordinal: number): void {
    if (curation.value?.outputId === outputId) return
    const next = newCuration(outputId, ordinal)
    for (const msg of unshown.get(outputId) ?? []) applyProgress(next, msg)
    unshown.delete(outputId)
    curation.value = next
  }

  function onProfiles(msg: ServerMessage): void {
    if (msg.bookId !== hooks.bookId() || !Array.isArray(msg.profiles)) return
    const profiles = msg.profiles
      .filter((p): p is Record<string, unknown> => p !== null && typeof p === 'object')
      .map((p) => ({ type: String(p.type ?? ''), name: String(p.name ?? ''), uri: String(p.uri ?? '') }))
    hooks.onProfilesUpdated(profiles)
  }

  // A refused keep is answered with `status: error` (the socket's generic failure).
  function onStatus(msg: ServerMessage): void {
    if (keep.value !== 'persisting' || msg.status !== 'error') return
    keep.value = 'open'
    error.value = typeof msg.message === 'string' ? msg.message : ''
  }

  function onChecked(msg: ServerMessage): void {
    if (msg.bookId === hooks.bookId()) hooks.onChecked()
  }

  const offs = connection
    ? [
        ...RUN_EVENT_TYPES.map((type) => connection.on(type, onRunEvent)),
        connection.on('workflow:run-accepted', onAccepted),
        connection.on('workflow:invalid', onInvalid),
        connection.on('output:persisted', onPersisted),
        connection.on('curation:progress', onProgress),
        connection.on('profile:updated', onProfiles),
        connection.on('output:checked', onChecked),
        connection.on('status', onStatus),
      ]
    : []
  onBeforeUnmount(() => {
    for (const off of offs) off()
  })

  /** Show an output's curation (after a retry, or one found in the outputs list). */
  function showCuration(next: CurationView | null): void {
    curation.value = next
  }

  return {
    view,
    chapter,
    starting,
    error,
    keep,
    keepNode,
    keptText: computed(() => (view.value ? keptText(view.value) : '')),
    finished,
    curation,
    humanRequest,
    start,
    decide,
    keepOutput,
    discardOutput,
    showCuration,
    followCuration,
  }
}
