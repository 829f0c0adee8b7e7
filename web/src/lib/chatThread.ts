// The open conversation as the chat page holds it, and how server events change it.
//
// A thread is an immutable record: every change makes a new one (and new arrays), so the
// page keeps it in one shallowRef and Vue never walks 10,000 messages deeply. Events the
// page cannot place (a message whose parent it does not show, a change it did not see)
// answer `reload: true`, and the page fetches the conversation again.
import type {
  ChatChangedEvent,
  ChatDoneEvent,
  ChatMessage,
  ChatMessageEvent,
  ChatServerMessage,
  ChatStreamEvent,
  ChatView,
  Conversation,
  MessageStatus,
} from '../api/chat'
import type { ServerMessage } from './connection'

export interface ThreadState {
  conversation: Conversation
  /** Root → pointer. */
  messages: readonly ChatMessage[]
  /** After the pointer, following the active children: shown greyed (time travel). */
  continuation: readonly ChatMessage[]
  /** A reply is being generated. */
  running: boolean
  /** Messages of the path before `messages[0]` that were not fetched (a tail was asked). */
  earlier: number
  /** The chat plays an MVU card: its actions are offered. */
  mvu?: boolean
}

export interface ThreadChange {
  state: ThreadState
  /** The event did not fit what the page shows: fetch the conversation again. */
  reload: boolean
}

export function threadFromView(view: ChatView): ThreadState {
  const messages = view.messages ?? []
  return {
    conversation: view.conversation,
    messages,
    continuation: view.continuation ?? [],
    running: Boolean(view.running) || messages.some((m) => m.status === 'streaming'),
    earlier: typeof view.earlier === 'number' && view.earlier > 0 ? view.earlier : 0,
    mvu: view.mvu === true,
  }
}

export function version(state: ThreadState): number {
  return state.conversation.version
}

function withVersion(state: ThreadState, v: number | undefined): Conversation {
  if (v === undefined || v <= state.conversation.version) return state.conversation
  return { ...state.conversation, version: v }
}

function lastOf<T>(items: readonly T[]): T | undefined {
  return items[items.length - 1]
}

/** Index of a message id in a list, looking from the end (where changes happen). */
export function indexFromEnd(items: readonly ChatMessage[], id: string): number {
  for (let i = items.length - 1; i >= 0; i--) if (items[i]!.id === id) return i
  return -1
}

function replaceAt(items: readonly ChatMessage[], index: number, message: ChatMessage): ChatMessage[] {
  const out = items.slice()
  out[index] = message
  return out
}

/**
 * A message was added or finalised (`chat:message`, or the answer of a write). A known
 * message is replaced; a new one whose parent is on the shown path becomes the new end of
 * the path (the server moved the pointer to it: a reply, a swipe generated on an older
 * message, an edit).
 *
 * `v` is the conversation's version the message was read at. One read before what the
 * thread already holds is stale and changes nothing: a fast reply's events can arrive
 * before the answer of the request that started it, and that answer's message (still
 * `streaming`, no text) must not replace the finished reply.
 */
export function applyChatMessage(state: ThreadState, message: ChatMessage, v?: number): ThreadChange {
  if (message.conversation_id && message.conversation_id !== state.conversation.id) return { state, reload: false }
  const stale = v !== undefined && v < state.conversation.version
  const conversation = withVersion(state, v)
  const running = state.running || message.status === 'streaming'
  const at = indexFromEnd(state.messages, message.id)
  if (at >= 0) {
    if (stale) return { state, reload: false }
    return { state: { ...state, conversation, running, messages: replaceAt(state.messages, at, message) }, reload: false }
  }
  const inFuture = indexFromEnd(state.continuation, message.id)
  if (inFuture >= 0) {
    if (stale) return { state, reload: false }
    return { state: { ...state, conversation, running, continuation: replaceAt(state.continuation, inFuture, message) }, reload: false }
  }
  // Not shown, and older than what is: where it belongs now only the server knows.
  if (stale) return { state, reload: true }
  let parentAt: number
  if (message.parent_id === null) {
    if (state.earlier > 0) return { state, reload: true }
    parentAt = -1
  } else {
    parentAt = indexFromEnd(state.messages, message.parent_id)
    if (parentAt < 0) return { state: { ...state, conversation: state.conversation }, reload: true }
  }
  const kept = state.messages.slice(0, parentAt + 1)
  // A new sibling of a shown message: the sibling counts shown beside it grow as well.
  const replaced = state.messages[parentAt + 1]
  const messages = [...kept, message]
  if (replaced && message.sibling_count <= replaced.sibling_count) {
    messages[messages.length - 1] = { ...message, sibling_count: replaced.sibling_count + 1 }
  }
  return {
    state: {
      conversation: { ...conversation, pointer: message.id },
      messages,
      continuation: [],
      running,
      earlier: state.earlier,
      mvu: state.mvu,
    },
    reload: false,
  }
}

/** A visible-text delta of the reply being written (`chat:stream`). */
export function applyStream(state: ThreadState, messageId: string, text: string, thought?: string): ThreadState {
  const at = indexFromEnd(state.messages, messageId)
  if (at < 0 || (!text && !thought)) return state
  const m = state.messages[at]!
  const next: ChatMessage = {
    ...m,
    content: m.content + text,
    thought: thought ? (m.thought ?? '') + thought : m.thought,
    status: m.status === 'complete' ? m.status : 'streaming',
  }
  return { ...state, running: true, messages: replaceAt(state.messages, at, next) }
}

/** The reply ended (`chat:done`): complete, or partial/error with why. */
export function applyDone(
  state: ThreadState,
  done: { messageId: string; status: MessageStatus; error?: string | null; version?: number },
): ThreadChange {
  const conversation = withVersion(state, done.version)
  const at = indexFromEnd(state.messages, done.messageId)
  if (at < 0) return { state: { ...state, conversation, running: false }, reload: true }
  const m = state.messages[at]!
  const next: ChatMessage = { ...m, status: done.status, error: done.error ?? null }
  return { state: { ...state, conversation, running: false, messages: replaceAt(state.messages, at, next) }, reload: false }
}

/** A change the page did not make itself (`chat:changed`) needs a reload when it is newer. */
export function isNewer(state: ThreadState, v: number): boolean {
  return v > state.conversation.version
}

// -- server events ----------------------------------------------------------------------

/** A `chat:*` message as the server's models declare it, checked; the message of a
 * `chat:message` is completed the way the chat view's are (the server leaves out what is
 * null or at its default). */
export type ChatEvent =
  | (Omit<ChatMessageEvent, 'message'> & { message: ChatMessage })
  | ChatStreamEvent
  | ChatDoneEvent
  | ChatChangedEvent

export const CHAT_EVENT_TYPES = ['chat:message', 'chat:stream', 'chat:done', 'chat:changed'] as const satisfies readonly ChatServerMessage['type'][]

const STATUSES: readonly string[] = ['complete', 'streaming', 'partial', 'error']

function str(msg: ServerMessage, camel: string, snake: string): string | undefined {
  const value = msg[camel] ?? msg[snake]
  return typeof value === 'string' ? value : undefined
}

function num(msg: ServerMessage, key: string): number | undefined {
  const value = msg[key]
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

function isMessage(value: unknown): value is ChatMessage {
  if (typeof value !== 'object' || value === null) return false
  const m = value as Record<string, unknown>
  return typeof m.id === 'string' && typeof m.role === 'string' && typeof m.content === 'string'
}

/** A chat event from the WebSocket, checked; null for anything else or malformed. */
export function chatEvent(msg: ServerMessage): ChatEvent | null {
  const conversationId = str(msg, 'conversationId', 'conversation_id')
  if (!conversationId) return null
  switch (msg.type) {
    case 'chat:message': {
      const version = num(msg, 'version')
      if (!isMessage(msg.message) || version === undefined) return null
      const m = msg.message
      const message: ChatMessage = {
        ...m,
        parent_id: m.parent_id ?? null,
        sibling_count: typeof m.sibling_count === 'number' ? m.sibling_count : 1,
        sibling_index: typeof m.sibling_index === 'number' ? m.sibling_index : 0,
      }
      return { type: 'chat:message', conversationId, message, version }
    }
    case 'chat:stream': {
      const messageId = str(msg, 'messageId', 'message_id')
      if (!messageId) return null
      const text = typeof msg.text === 'string' ? msg.text : ''
      const thought = typeof msg.thought === 'string' ? msg.thought : undefined
      return { type: 'chat:stream', conversationId, messageId, text, thought }
    }
    case 'chat:done': {
      const messageId = str(msg, 'messageId', 'message_id')
      const status = typeof msg.status === 'string' && STATUSES.includes(msg.status) ? (msg.status as MessageStatus) : 'complete'
      const version = num(msg, 'version')
      if (!messageId || version === undefined) return null
      const error = typeof msg.error === 'string' ? msg.error : null
      return { type: 'chat:done', conversationId, messageId, status, error, version }
    }
    case 'chat:changed': {
      const v = num(msg, 'version')
      if (v === undefined) return null
      return { type: 'chat:changed', conversationId, version: v, deleted: msg.deleted === true, listed: msg.listed === true }
    }
    default:
      return null
  }
}

// -- what the page shows ------------------------------------------------------------------

/** Messages rendered at first, and added by each "show earlier". */
export const WINDOW_SIZE = 60

/** Messages of the path fetched at first (`?tail=`); "show earlier" fetches more once the
 * rendered window reaches the first fetched message. */
export const LOAD_TAIL = 200

/** The index of the first message rendered when `shown` of `total` are. */
export function windowStart(total: number, shown: number): number {
  return Math.max(0, total - Math.max(0, shown))
}

/** The message the keyboard's arrows swipe: the last one, when it is an assistant's. */
export function lastAssistant(messages: readonly ChatMessage[]): ChatMessage | null {
  const last = lastOf(messages)
  return last && last.role === 'assistant' ? last : null
}

/** The newest reply on the path that a prompt was made for (a greeting has none). */
export function lastReply(messages: readonly ChatMessage[]): ChatMessage | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role === 'assistant' && m.parent_id !== null) return m
  }
  return null
}

export type SwipeAction = { kind: 'swipe'; toIndex: number } | { kind: 'generate'; messageId: string }

/** How many versions a message has, itself included (never fewer than its index says). */
export function siblingCount(message: Pick<ChatMessage, 'sibling_index' | 'sibling_count'>): number {
  return Math.max(message.sibling_count, message.sibling_index + 1)
}

/**
 * Whether a message shows swipe arrows with n/m: every reply of the character (its right
 * arrow can write a new version), and any other message that has versions (an edited
 * message of the user, a greeting with alternates).
 */
export function hasSwipes(message: Pick<ChatMessage, 'role' | 'sibling_index' | 'sibling_count'>): boolean {
  return message.role === 'assistant' || siblingCount(message) > 1
}

/**
 * What a swipe arrow does. Left: the previous sibling. Right: the next sibling, or past the
 * last one a new reply generated beside it (as SillyTavern's right swipe; here on any
 * assistant message, since nothing is ever lost). Only a reply is generated: a root
 * message (a greeting) has nothing to answer, and the user's own versions are theirs.
 */
export function swipeAction(message: ChatMessage, direction: 'left' | 'right'): SwipeAction | null {
  const index = message.sibling_index
  const count = siblingCount(message)
  if (direction === 'left') return index > 0 ? { kind: 'swipe', toIndex: index - 1 } : null
  if (index < count - 1) return { kind: 'swipe', toIndex: index + 1 }
  if (message.role !== 'assistant' || message.parent_id === null) return null
  return { kind: 'generate', messageId: message.id }
}

export type ComposerAction = 'send' | 'swipe-left' | 'swipe-right' | null

export interface KeyInfo {
  key: string
  shiftKey?: boolean
  ctrlKey?: boolean
  altKey?: boolean
  metaKey?: boolean
  isComposing?: boolean
}

/** SillyTavern's keys in the message box: Enter sends, Shift+Enter is a new line, and
 * with the box empty the arrows swipe the last reply. Keys typed into an IME are its own. */
export function composerKeyAction(key: KeyInfo, inputEmpty: boolean): ComposerAction {
  if (key.isComposing || key.key === 'Process') return null
  const modified = Boolean(key.ctrlKey || key.altKey || key.metaKey)
  if (key.key === 'Enter') return key.shiftKey || key.altKey ? null : 'send'
  if (!inputEmpty || modified || key.shiftKey) return null
  if (key.key === 'ArrowLeft') return 'swipe-left'
  if (key.key === 'ArrowRight') return 'swipe-right'
  return null
}

export type MessageMark = 'streaming' | 'stopped' | 'interrupted' | 'partial' | 'failed' | null

/** The error a stop leaves on a reply ("stopped", or "stopped: why"). */
function isStopError(error: string): boolean {
  return /^(stopped|cancel)/.test(error)
}

/** How a message that is not plainly complete is marked. A reply stopped before any text
 * came (status `error`, error "stopped") is stopped, not failed. */
export function messageMark(message: Pick<ChatMessage, 'status' | 'error'>): MessageMark {
  const error = (message.error ?? '').trim().toLowerCase()
  switch (message.status) {
    case 'streaming':
      return 'streaming'
    case 'error':
      return isStopError(error) ? 'stopped' : 'failed'
    case 'partial':
      if (/stop|cancel/.test(error)) return 'stopped'
      if (error.includes('interrupt')) return 'interrupted'
      return 'partial'
    default:
      return null
  }
}

/**
 * What the turn reported about itself (`extra.problems`): malformed state updates and the
 * like, which were skipped without losing the reply. Empty when there were none.
 */
export function messageProblems(message: Pick<ChatMessage, 'extra'>): string[] {
  const problems = message.extra?.problems
  if (!Array.isArray(problems)) return []
  return problems.filter((p): p is string => typeof p === 'string' && p.trim() !== '')
}

/** An MVU update the server refused, or MVU's separate updater that failed
 * (`extra.mvu_warnings`, storyloom/chat/reply/mvu_values.py MvuWarning). */
export interface MvuWarning {
  kind: 'not_extensible' | 'required' | 'meta' | 'schema' | 'updater'
  path: string
  rule?: string
  expected?: unknown
  detail?: string
}

const MVU_KINDS: ReadonlySet<string> = new Set(['not_extensible', 'required', 'meta', 'schema', 'updater'])

export function mvuWarnings(message: Pick<ChatMessage, 'extra'>): MvuWarning[] {
  const warnings = message.extra?.mvu_warnings
  if (!Array.isArray(warnings)) return []
  return warnings.filter(
    (w): w is MvuWarning => typeof w === 'object' && w !== null && MVU_KINDS.has(String((w as MvuWarning).kind)),
  )
}

/** A reply that ended early may be generated again (a new sibling). */
export function canRetry(message: ChatMessage): boolean {
  return message.role === 'assistant' && message.parent_id !== null && (message.status === 'partial' || message.status === 'error')
}

/** Hidden from the prompt (`extra.hidden`, SillyTavern's ghost): shown dimmed, never sent. */
export function isHiddenMessage(message: Pick<ChatMessage, 'extra'>): boolean {
  return message.extra?.hidden === true
}

export interface MessageVersion {
  content: string
  replaced_at: number
}

/** The texts an edit in place replaced (`extra.versions`), oldest first. */
export function messageVersions(message: Pick<ChatMessage, 'extra'>): MessageVersion[] {
  const raw = message.extra?.versions
  if (!Array.isArray(raw)) return []
  const out: MessageVersion[] = []
  for (const item of raw) {
    if (item && typeof item === 'object' && typeof (item as { content?: unknown }).content === 'string') {
      const when = (item as { replaced_at?: unknown }).replaced_at
      out.push({ content: (item as { content: string }).content, replaced_at: typeof when === 'number' ? when : 0 })
    }
  }
  return out
}

export interface MessageTime {
  /** For the `datetime` attribute. */
  iso: string
  /** What the message shows: the time, and the date too when it is not today. */
  short: string
  /** The tooltip: date and time in full. */
  full: string
}

/** A message's time (`created_at`, Unix seconds) as the chat shows it. */
export function messageTime(seconds: number, now: Date = new Date(), locale?: string): MessageTime {
  const date = new Date(seconds * 1000)
  const sameDay = date.toDateString() === now.toDateString()
  const time = date.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit' })
  const day = date.toLocaleDateString(locale, { year: date.getFullYear() === now.getFullYear() ? undefined : 'numeric', month: 'short', day: 'numeric' })
  return { iso: date.toISOString(), short: sameDay ? time : `${day} ${time}`, full: date.toLocaleString(locale) }
}

/**
 * How many messages of the shown path lie below `messageId`: what a swipe (or a new
 * version) of it leaves on the version it was on. 0 for the last message or one not shown.
 */
export function laterOnBranch(messages: readonly ChatMessage[], messageId: string): number {
  const index = indexFromEnd(messages, messageId)
  return index < 0 ? 0 : messages.length - 1 - index
}

/** Messages whose token count is not known for their current text: the ones to count. */
export function uncounted(messages: readonly ChatMessage[], known: ReadonlyMap<string, { content: string; tokens: number }>): string[] {
  return messages.filter((m) => m.status !== 'streaming' && known.get(m.id)?.content !== m.content).map((m) => m.id)
}
