// The run the Workflows page shows, followed over the WebSocket: which run that is (the
// page's own, or one started elsewhere on the same workflow), catching up on events it
// missed, re-attaching after a reload or a reconnect, and the human decisions it waits on.
import { computed, onBeforeUnmount, reactive, ref, shallowRef, watch } from 'vue'
import { type Decision, listRuns, runEvents, sendDecision } from '../api/workflows'
import type { Connection, ServerMessage } from './connection'
import { failureMessage } from './knowledgeEditor'
import { type HumanRequest, isRunEvent, newRunView, RUN_EVENT_TYPES, RunTracker, type RunView } from './workflowRun'

export interface WorkflowRunOptions {
  connection: Connection | null
  /** The id of the workflow the page shows (runs of others are not adopted). */
  workflowId: () => string | null
  /** A run the page showed running has ended. */
  onEnded: () => void
}

const requestKey = (r: { runId: string; nodeId: string; seq: number }) => `${r.runId}/${r.nodeId}/${r.seq}`

export function useWorkflowRun(options: WorkflowRunOptions) {
  const { connection } = options
  const tracker = shallowRef<RunTracker | null>(null)
  const run = computed<RunView | null>(() => tracker.value?.view ?? null)

  // -- human decisions: asked by the run's waiting nodes, answered or put off here --------
  const answered = reactive(new Set<string>())
  const deferred = reactive(new Set<string>())
  const humanError = ref('')
  const humanBusy = ref(false)
  const waitingRequests = computed(() => Object.values(run.value?.waiting ?? {}).filter((r) => !answered.has(requestKey(r))))
  const humanRequest = computed<HumanRequest | null>(() => waitingRequests.value.find((r) => !deferred.has(requestKey(r))) ?? null)

  /** Show no run (another workflow opened). */
  function clear(): void {
    tracker.value = null
    answered.clear()
    deferred.clear()
  }

  /**
   * Show run `runId` from now on. `follow`: this socket may not be among the run's followers
   * (the page was opened or reconnected after the run started), so fetch what happened so
   * far and ask the server to send the rest (`workflow:attach`).
   */
  function adopt(runId: string, follow: boolean): void {
    if (tracker.value?.view.runId === runId) return
    const tr = new RunTracker(reactive(newRunView(runId, options.workflowId())) as RunView)
    tracker.value = tr
    answered.clear()
    deferred.clear()
    if (follow) void catchUp().then(() => attach(tr))
  }

  function attach(tr: RunTracker): void {
    if (tracker.value !== tr || !connection) return
    connection.send({ type: 'workflow:attach', runId: tr.view.runId, afterSeq: tr.view.lastSeq })
  }

  let catching = false
  let catchAgain = false

  /** Fetch the events this page has not seen (after a gap, a reload or an adoption). */
  async function catchUp(): Promise<void> {
    const tr = tracker.value
    if (!tr) return
    if (catching) {
      catchAgain = true
      return
    }
    catching = true
    try {
      do {
        catchAgain = false
        const result = await runEvents(tr.view.runId, tr.view.lastSeq)
        if (tracker.value !== tr) return
        tr.acceptAll(result.events)
      } while (catchAgain && tracker.value === tr)
    } catch {
      // The server no longer knows the run (restarted): keep what was shown.
    } finally {
      catching = false
    }
  }

  /** Show the workflow's running run, else its latest one (after opening it). */
  async function reattach(id: string): Promise<void> {
    try {
      const runs = await listRuns()
      if (options.workflowId() !== id || tracker.value) return
      const mine = runs.filter((r) => r.workflowId === id)
      const pick = mine.find((r) => r.status === 'running') ?? mine[0]
      if (pick) adopt(pick.runId, true)
    } catch {
      // no runs to show
    }
  }

  function onRunEvent(msg: ServerMessage): void {
    if (!isRunEvent(msg)) return
    const tr = tracker.value
    if (
      msg.type === 'workflow:started' &&
      msg.workflowId === options.workflowId() &&
      (!tr || (tr.view.runId !== msg.runId && tr.view.status !== 'running'))
    ) {
      adopt(msg.runId, msg.seq !== 1)
    }
    const active = tracker.value
    if (!active || msg.runId !== active.view.runId) return
    const wasRunning = active.view.status === 'running'
    if (active.accept(msg) === 'gap') void catchUp()
    if (wasRunning && active.view.status !== 'running') options.onEnded()
  }

  const unsubscribe = connection ? RUN_EVENT_TYPES.map((type) => connection.on(type, onRunEvent)) : []
  onBeforeUnmount(() => {
    for (const off of unsubscribe) off()
  })

  // A reconnected socket follows no run: attach again, the server replays what was missed.
  if (connection) {
    watch(connection.state, (state, previous) => {
      const tr = tracker.value
      if (state === 'connected' && (previous === 'connecting' || previous === 'disconnected') && tr) {
        attach(tr)
      }
    })
  }

  async function decide(decision: Decision): Promise<void> {
    const request = humanRequest.value
    if (!request) return
    humanBusy.value = true
    try {
      await sendDecision(request.runId, decision)
      answered.add(requestKey(request))
      humanError.value = ''
    } catch (exc) {
      humanError.value = failureMessage(exc)
    } finally {
      humanBusy.value = false
    }
  }

  /** Put the request shown off; the toolbar offers the waiting ones again. */
  function later(): void {
    const request = humanRequest.value
    if (request) deferred.add(requestKey(request))
    humanError.value = ''
  }

  function showWaiting(): void {
    deferred.clear()
  }

  return {
    run,
    clear,
    adopt,
    reattach,
    human: { request: humanRequest, waiting: waitingRequests, error: humanError, busy: humanBusy, decide, later, showWaiting },
  }
}
