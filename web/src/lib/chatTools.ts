// Tool calls in the chat, without Vue components: the steps of an agent turn (stored in
// the assistant message's `extra.tool_steps`, streamed live as `chat:tool-step`), the
// approvals an `ask` rule waits on (`tool:approval-needed`, answered with allow once /
// always / deny), and the agent profiles a conversation may pick.
//
// One store per page: startToolEvents(connection) is called once by the app; the chat and
// the canvas read from it.
import { reactive, shallowReactive, watch } from 'vue'
import { type Fetch, fetchJson, requestJson } from '../api/client'
import { codeRunOf, codeRunSummary } from './codeRun'
import type { Connection, ServerMessage } from './connection'

export type CallDecision = 'allowed' | 'approved' | 'denied' | 'invalid' | 'unknown'
export type ApprovalDecision = 'allow_once' | 'always' | 'deny'

/** One tool call of an agent turn (storyloom/workflow/agent_host.py ToolStep). */
export interface ToolStep {
  step: number
  index: number
  tool: string
  arguments: Record<string, unknown>
  callId: string | null
  protocol: 'tam' | 'native'
  decision: CallDecision
  ok: boolean
  result: unknown
  error: string | null
  durationMs: number
  stealth: boolean
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

const DECISIONS: readonly CallDecision[] = ['allowed', 'approved', 'denied', 'invalid', 'unknown']

/** A step as the server sent it (camelCase aliases, or the field names), or null. */
export function toolStepFrom(raw: unknown): ToolStep | null {
  if (!isRecord(raw) || typeof raw.tool !== 'string') return null
  const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d)
  const decision = DECISIONS.includes(raw.decision as CallDecision) ? (raw.decision as CallDecision) : 'allowed'
  return {
    step: num(raw.step, 1),
    index: num(raw.index, 0),
    tool: raw.tool,
    arguments: isRecord(raw.arguments) ? raw.arguments : {},
    callId: typeof (raw.callId ?? raw.call_id) === 'string' ? ((raw.callId ?? raw.call_id) as string) : null,
    protocol: raw.protocol === 'native' ? 'native' : 'tam',
    decision,
    ok: raw.ok === true,
    result: raw.result ?? null,
    error: typeof raw.error === 'string' && raw.error ? raw.error : null,
    durationMs: num(raw.durationMs ?? raw.duration_ms, 0),
    stealth: raw.stealth === true,
  }
}

const stepKey = (s: Pick<ToolStep, 'step' | 'index'>) => `${s.step}/${s.index}`

/** The steps stored with a message (`extra.tool_steps`), in call order. */
export function storedSteps(message: { extra?: Record<string, unknown> }): ToolStep[] {
  const raw = message.extra?.tool_steps
  if (!Array.isArray(raw)) return []
  return sortSteps(raw.map(toolStepFrom).filter((s): s is ToolStep => s !== null))
}

function sortSteps(steps: ToolStep[]): ToolStep[] {
  return [...steps].sort((a, b) => a.step - b.step || a.index - b.index)
}

/** Stored steps, then live ones not stored yet (a turn still running), one per call. */
export function mergeSteps(stored: readonly ToolStep[], live: readonly ToolStep[]): ToolStep[] {
  const seen = new Map(stored.map((s) => [stepKey(s), s]))
  for (const s of live) if (!seen.has(stepKey(s))) seen.set(stepKey(s), s)
  return sortSteps([...seen.values()])
}

/** "1.2 s", "35 ms". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return ''
  if (ms < 1000) return `${Math.round(ms)} ms`
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`
}

/** A result or arguments as text to read: strings as they are, the rest as JSON. */
export function shownValue(value: unknown): string {
  if (typeof value === 'string') return value
  if (value === undefined || value === null) return ''
  try {
    return JSON.stringify(value, null, 2)
  } catch {
    return String(value)
  }
}

/** The roll of a `chat:RollDice` result, or any short result, for the one-line summary. */
export function resultSummary(step: ToolStep, max = 60): string {
  if (!step.ok) return step.error ?? ''
  const run = codeRunOf(step)
  if (run) return codeRunSummary(run, max)
  const r = step.result
  if (isRecord(r)) {
    // A roll's total, an entry's name: what a reader looks for first.
    for (const key of ['total', 'result', 'value', 'text', 'displayName', 'name', 'title', 'id']) {
      const v = r[key]
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v)
    }
  }
  const text = shownValue(r).replace(/\s+/g, ' ').trim()
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

// -- live steps (chat:tool-step) ---------------------------------------------------------------

const LIVE_MESSAGES_KEPT = 50
/** Message id → the steps streamed for it (a turn still running, or not reloaded yet). */
const liveSteps = shallowReactive(new Map<string, readonly ToolStep[]>())

export function liveStepsFor(messageId: string): readonly ToolStep[] {
  return liveSteps.get(messageId) ?? []
}

export function acceptToolStep(msg: ServerMessage): void {
  const messageId = typeof msg.messageId === 'string' ? msg.messageId : null
  const step = toolStepFrom(msg.step)
  if (!messageId || !step) return
  const before = liveSteps.get(messageId) ?? []
  const next = [...before.filter((s) => stepKey(s) !== stepKey(step)), step]
  liveSteps.delete(messageId)
  liveSteps.set(messageId, sortSteps(next))
  while (liveSteps.size > LIVE_MESSAGES_KEPT) liveSteps.delete(liveSteps.keys().next().value!)
}

// -- approvals -----------------------------------------------------------------------------------

export interface ApprovalCaller {
  kind?: string
  name?: string
  [extra: string]: unknown
}

/** A call an `ask` rule holds until a person answers (ApprovalBroker's PendingApproval). */
export interface PendingApproval {
  id: string
  tool: string
  arguments: Record<string, unknown>
  caller: ApprovalCaller | string | null
  conversationId: string | null
  runId: string | null
  createdAt?: number | string | null
}

export function approvalFrom(raw: unknown): PendingApproval | null {
  if (!isRecord(raw) || typeof raw.id !== 'string' || typeof raw.tool !== 'string') return null
  const str = (v: unknown) => (typeof v === 'string' && v ? v : null)
  return {
    id: raw.id,
    tool: raw.tool,
    arguments: isRecord(raw.arguments) ? raw.arguments : {},
    caller: isRecord(raw.caller) || typeof raw.caller === 'string' ? (raw.caller as ApprovalCaller | string) : null,
    conversationId: str(raw.conversationId ?? raw.conversation_id),
    runId: str(raw.runId ?? raw.run_id),
    createdAt: (raw.createdAt ?? raw.created_at ?? null) as number | string | null,
  }
}

export function callerName(caller: PendingApproval['caller']): string {
  if (!caller) return ''
  if (typeof caller === 'string') return caller
  return [caller.kind, caller.name].filter((p) => typeof p === 'string' && p).join(' · ')
}

interface ApprovalState {
  pending: PendingApproval[]
  /** Answers on their way (the buttons wait). */
  sending: Record<string, boolean>
  errors: Record<string, string>
}

export const approvals: ApprovalState = reactive({ pending: [], sending: {}, errors: {} })

function addApproval(a: PendingApproval): void {
  if (!approvals.pending.some((p) => p.id === a.id)) approvals.pending.push(a)
}

function dropApproval(id: string): void {
  const at = approvals.pending.findIndex((p) => p.id === id)
  if (at >= 0) approvals.pending.splice(at, 1)
  delete approvals.sending[id]
  delete approvals.errors[id]
}

export function approvalsForConversation(conversationId: string | null): PendingApproval[] {
  return conversationId ? approvals.pending.filter((a) => a.conversationId === conversationId) : []
}

/** An agent node's caller names its run as `<runId>:<nodeId>`: both count as the run's. */
export function approvalsForRun(runId: string | null): PendingApproval[] {
  return runId ? approvals.pending.filter((a) => a.runId === runId || a.runId?.startsWith(`${runId}:`)) : []
}

/** The approvals pending now (GET /api/tools/approvals): after a reload or a reconnect. */
export async function refreshApprovals(fetchImpl?: Fetch): Promise<void> {
  const list = await requestJson<unknown[]>('GET', '/api/tools/approvals', undefined, fetchImpl)
  const now = (Array.isArray(list) ? list : []).map(approvalFrom).filter((a): a is PendingApproval => a !== null)
  const ids = new Set(now.map((a) => a.id))
  for (const a of [...approvals.pending]) if (!ids.has(a.id)) dropApproval(a.id)
  for (const a of now) addApproval(a)
}

let socket: Connection | null = null

/**
 * Answer approval `id`: POST /api/tools/approvals/{id}; when the server cannot be reached
 * that way, over the WebSocket (`tool:approval`). The card goes once the server took it.
 */
export async function answerApproval(id: string, decision: ApprovalDecision, fetchImpl?: Fetch): Promise<void> {
  approvals.sending[id] = true
  delete approvals.errors[id]
  try {
    const { res, data } = await fetchJson('POST', `/api/tools/approvals/${encodeURIComponent(id)}`, { decision }, fetchImpl)
    if (res.ok || res.status === 404) {
      // 404: answered elsewhere already (another tab, the canvas); nothing waits on it.
      dropApproval(id)
      return
    }
    const message = isRecord(data) && isRecord(data.error) && typeof data.error.message === 'string' ? data.error.message : `HTTP ${res.status}`
    approvals.errors[id] = message
  } catch (exc) {
    if (socket) {
      socket.send({ type: 'tool:approval', id, decision })
      dropApproval(id)
    } else {
      approvals.errors[id] = exc instanceof Error ? exc.message : String(exc)
    }
  } finally {
    if (approvals.sending[id]) approvals.sending[id] = false
  }
}

/** Follow tool events on the app's one connection: live steps and approvals. */
export function startToolEvents(connection: Connection): () => void {
  socket = connection
  const offs = [
    connection.on('chat:tool-step', acceptToolStep),
    connection.on('tool:approval-needed', (msg) => {
      const a = approvalFrom(msg.approval)
      if (a) addApproval(a)
    }),
    connection.on('tool:approval-resolved', (msg) => {
      if (typeof msg.id === 'string') dropApproval(msg.id)
    }),
  ]
  // A reconnect may have missed requests and answers: ask again once the socket is back.
  if (connection.state) {
    offs.push(
      watch(connection.state, (now, before) => {
        if (now === 'connected' && (before === 'connecting' || before === 'disconnected')) void refreshApprovals().catch(() => {})
      }),
    )
  }
  void refreshApprovals().catch(() => {})
  return () => {
    for (const off of offs) off()
    if (socket === connection) socket = null
  }
}

// -- agent profiles ------------------------------------------------------------------------------

export interface AgentProfileSummary {
  id: string
  name: string
  description?: string
}

export async function listAgentProfiles(fetchImpl?: Fetch): Promise<AgentProfileSummary[]> {
  const list = await requestJson<unknown[]>('GET', '/api/agents', undefined, fetchImpl)
  return (Array.isArray(list) ? list : [])
    .filter((p): p is Record<string, unknown> => isRecord(p) && typeof p.id === 'string')
    .map((p) => ({ id: p.id as string, name: typeof p.name === 'string' && p.name ? p.name : (p.id as string), description: typeof p.description === 'string' ? p.description : '' }))
}

/** Forget everything (tests). */
export function resetToolState(): void {
  liveSteps.clear()
  approvals.pending.splice(0)
  for (const k of Object.keys(approvals.sending)) delete approvals.sending[k]
  for (const k of Object.keys(approvals.errors)) delete approvals.errors[k]
  socket = null
}
