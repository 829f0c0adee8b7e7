// What the canvas shows of a run, built from its events (storyloom/workflow/events.py).
//
// Events carry `seq` counting from 1 within the run. The same event may arrive twice (the
// socket's broadcast and a REST catch-up after a reload overlap) and, after a reconnect,
// some may be missing; `RunTracker` applies each seq once and in order, holding back any
// event after a gap until the missing ones are fetched.
import type { RunEventMessage, RunStatus } from '../api/workflows'

export type NodeState =
  | 'idle'
  | 'running'
  | 'streaming'
  | 'done'
  | 'cached'
  | 'frozen'
  | 'error'
  | 'needs-human'
  | 'cancelled'
  | 'skipped'

export const NODE_STATES: readonly NodeState[] = [
  'idle',
  'running',
  'streaming',
  'done',
  'cached',
  'frozen',
  'error',
  'needs-human',
  'cancelled',
  'skipped',
]

export interface Iteration {
  iteration: number
  total: number
  kind: string
  candidateCount: number | null
}

export interface NodeRunView {
  state: NodeState
  /** Text streamed so far (node:streaming chunks in order). */
  text: string
  /** The finished output preview (node:completed / node:cached `output`). */
  output: string
  outputs: Record<string, unknown> | null
  error: string
  iteration: Iteration | null
  historyId: number | null
}

export interface HumanRequest {
  runId: string
  /** The seq of the node:needs-human event: a retried node asks again under a new one. */
  seq: number
  nodeId: string
  reason: string
  outputPreview: string
  options: string[]
  candidates: string[] | null
}

export interface LogLine {
  seq: number
  type: string
  nodeId: string | null
  /** Untranslated detail: an error message, an output preview, a cache source. */
  detail: string
}

export interface RunView {
  runId: string
  workflowId: string | null
  status: RunStatus
  lastSeq: number
  nodes: Record<string, NodeRunView>
  waiting: Record<string, HumanRequest>
  log: LogLine[]
  error: string
  interfaceOutputs: Record<string, unknown>
}

export const LOG_LIMIT = 500
const PREVIEW_CHARS = 160

export function newRunView(runId: string, workflowId: string | null = null): RunView {
  return {
    runId,
    workflowId,
    status: 'running',
    lastSeq: 0,
    nodes: {},
    waiting: {},
    log: [],
    error: '',
    interfaceOutputs: {},
  }
}

function idleNode(): NodeRunView {
  return { state: 'idle', text: '', output: '', outputs: null, error: '', iteration: null, historyId: null }
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null
}

function record(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null
}

function preview(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat
}

function node(view: RunView, nodeId: string): NodeRunView {
  let n = view.nodes[nodeId]
  if (!n) view.nodes[nodeId] = n = idleNode()
  return n
}

function log(view: RunView, event: RunEventMessage, nodeId: string | null, detail = ''): void {
  view.log.push({ seq: event.seq, type: event.type, nodeId, detail })
  if (view.log.length > LOG_LIMIT) view.log.splice(0, view.log.length - LOG_LIMIT)
}

const UNFINISHED: ReadonlySet<NodeState> = new Set(['running', 'streaming', 'needs-human'])

/** Apply one event to the view (in seq order; RunTracker sees to that). */
export function applyEvent(view: RunView, event: RunEventMessage): void {
  view.lastSeq = Math.max(view.lastSeq, event.seq)
  const nodeId = typeof event.nodeId === 'string' ? event.nodeId : null
  switch (event.type) {
    case 'workflow:started': {
      view.status = 'running'
      if (typeof event.workflowId === 'string') view.workflowId = event.workflowId
      for (const id of Array.isArray(event.nodeIds) ? event.nodeIds : []) {
        if (typeof id === 'string') view.nodes[id] = idleNode()
      }
      log(view, event, null)
      return
    }
    case 'node:started': {
      if (!nodeId) return
      const n = node(view, nodeId)
      Object.assign(n, idleNode(), { state: 'running' })
      log(view, event, nodeId)
      return
    }
    case 'node:streaming': {
      if (!nodeId) return
      const n = node(view, nodeId)
      n.text += str(event.chunk)
      n.state = 'streaming'
      // One log line per streaming node, not one per chunk.
      const last = view.log[view.log.length - 1]
      if (!last || last.type !== 'node:streaming' || last.nodeId !== nodeId) log(view, event, nodeId)
      return
    }
    case 'node:completed':
    case 'node:cached': {
      if (!nodeId) return
      const n = node(view, nodeId)
      const cached = event.type === 'node:cached'
      n.state = cached ? (event.source === 'frozen' ? 'frozen' : 'cached') : 'done'
      n.output = str(event.output)
      n.outputs = record(event.outputs)
      n.historyId = num(event.historyId)
      n.error = ''
      if (cached) n.text = ''
      delete view.waiting[nodeId]
      log(view, event, nodeId, cached ? str(event.source) : preview(shownText(n)))
      return
    }
    case 'node:needs-human': {
      if (!nodeId) return
      node(view, nodeId).state = 'needs-human'
      view.waiting[nodeId] = {
        runId: view.runId,
        seq: event.seq,
        nodeId,
        reason: str(event.reason),
        outputPreview: str(event.outputPreview),
        options: Array.isArray(event.options) ? event.options.map(String) : ['approve', 'retry', 'edit'],
        candidates: Array.isArray(event.candidates) ? event.candidates.map(String) : null,
      }
      log(view, event, nodeId, str(event.reason))
      return
    }
    case 'node:iteration': {
      if (!nodeId) return
      const n = node(view, nodeId)
      n.iteration = {
        iteration: num(event.iteration) ?? 0,
        total: num(event.totalIterations) ?? 0,
        kind: str(event.iterationType),
        candidateCount: num(event.candidateCount),
      }
      if (!UNFINISHED.has(n.state)) n.state = 'running'
      log(view, event, nodeId, `${n.iteration.iteration}/${n.iteration.total}`)
      return
    }
    case 'node:tool-step': {
      // An agent's tool call: one log line with the tool and how it ended.
      const step = record(event.step) ?? {}
      const outcome = step.ok === true ? 'ok' : str(step.decision) === 'allowed' ? str(step.error) : str(step.decision)
      log(view, event, nodeId, `${str(step.tool)}: ${preview(outcome || 'failed')}`)
      return
    }
    case 'node:error': {
      if (!nodeId) return
      const n = node(view, nodeId)
      n.state = 'error'
      n.error = str(event.error)
      delete view.waiting[nodeId]
      for (const id of Array.isArray(event.skipped) ? event.skipped : []) {
        if (typeof id === 'string') node(view, id).state = 'skipped'
      }
      log(view, event, nodeId, n.error)
      return
    }
    case 'node:cancelled': {
      if (!nodeId) return
      const n = node(view, nodeId)
      n.state = 'cancelled'
      const partial = str(event.partialOutput)
      if (partial && !n.text) n.text = partial
      delete view.waiting[nodeId]
      log(view, event, nodeId)
      return
    }
    case 'workflow:completed': {
      view.status = 'completed'
      view.interfaceOutputs = record(event.interfaceOutputs) ?? {}
      view.waiting = {}
      log(view, event, null)
      return
    }
    case 'workflow:error': {
      const cancelled = event.cancelled === true
      view.status = cancelled ? 'cancelled' : 'failed'
      view.error = str(event.error)
      view.waiting = {}
      for (const n of Object.values(view.nodes)) {
        if (UNFINISHED.has(n.state)) n.state = cancelled ? 'cancelled' : 'error'
      }
      log(view, event, nodeId, view.error)
      return
    }
    default:
      log(view, event, nodeId)
  }
}

/**
 * What a node shows as its text: the streamed text, else its `text` output or its first
 * string output (a cached Chat node has text and messages), else the output preview.
 */
export function shownText(n: NodeRunView | undefined): string {
  if (!n) return ''
  if (n.text) return n.text
  const outputs = n.outputs ?? {}
  if (typeof outputs.text === 'string') return outputs.text
  const strings = Object.values(outputs).filter((v): v is string => typeof v === 'string')
  return strings[0] ?? n.output
}

export type Accepted = 'applied' | 'duplicate' | 'gap'

/** Applies a run's events once each, in seq order. */
export class RunTracker {
  readonly view: RunView
  private readonly held = new Map<number, RunEventMessage>()

  constructor(view: RunView) {
    this.view = view
  }

  /**
   * `applied`: the event (and any held ones it unblocked) took effect; `duplicate`: seen
   * before; `gap`: events before it are missing, so it is held: fetch them
   * (`runEvents(runId, view.lastSeq)`) and pass them here.
   */
  accept(event: RunEventMessage): Accepted {
    if (event.runId !== this.view.runId || event.seq <= this.view.lastSeq) return 'duplicate'
    if (event.seq !== this.view.lastSeq + 1) {
      this.held.set(event.seq, event)
      return 'gap'
    }
    applyEvent(this.view, event)
    for (let next = this.held.get(this.view.lastSeq + 1); next; next = this.held.get(this.view.lastSeq + 1)) {
      this.held.delete(next.seq)
      applyEvent(this.view, next)
    }
    return this.held.size ? 'gap' : 'applied'
  }

  acceptAll(events: readonly RunEventMessage[]): Accepted {
    let result: Accepted = 'duplicate'
    for (const event of [...events].sort((a, b) => a.seq - b.seq)) {
      const r = this.accept(event)
      if (r !== 'duplicate') result = r
    }
    return this.held.size ? 'gap' : result
  }

  get missing(): boolean {
    return this.held.size > 0
  }
}

/** Is `message` a run event (has a run id and a sequence number)? */
export function isRunEvent(message: { type: string; [k: string]: unknown }): message is RunEventMessage {
  return typeof message.runId === 'string' && typeof message.seq === 'number' && /^(node|workflow):/.test(message.type)
}

export const RUN_EVENT_TYPES = [
  'workflow:started',
  'node:started',
  'node:streaming',
  'node:completed',
  'node:cached',
  'node:needs-human',
  'node:iteration',
  'node:tool-step',
  'node:error',
  'node:cancelled',
  'workflow:completed',
  'workflow:error',
] as const
