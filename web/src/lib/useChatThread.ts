// The conversation the chat page has open: fetched, followed over the WebSocket
// (`chat:subscribe`), changed by the server's `chat:*` events and fetched again when an event
// says the page missed something. A 10,000-message chat opens fast: the thread is one
// immutable record in a shallowRef (no deep reactivity over messages), and only the last
// `loadTail` messages of its path are fetched until "show earlier" asks for more.
import { onBeforeUnmount, type Ref, ref, shallowRef, watch } from 'vue'
import { type ChatSubscribeMessage, getChat } from '../api/chat'
import {
  applyChatMessage,
  applyDone,
  applyStream,
  CHAT_EVENT_TYPES,
  chatEvent,
  isNewer,
  LOAD_TAIL,
  type ThreadState,
  threadFromView,
  version,
} from './chatThread'
import type { Connection, ServerMessage } from './connection'
import { failureMessage } from './knowledgeEditor'

export interface ChatNotice {
  /** `info`: worth knowing, nothing went wrong (what a swipe left on the other version). */
  kind: 'conflict' | 'error' | 'info'
  /** Made at render time, so it follows a change of language. */
  text: () => string
}

export interface ChatThreadOptions {
  connection: Connection | null
  conversationId: Ref<string | null>
  /** A write of the page is on its way (its own reload follows it). */
  busy: Ref<boolean>
  t: (key: string, values?: Record<string, unknown>) => string
  /** A conversation was created, renamed or deleted anywhere. */
  onListChanged: () => void
  /** The open conversation was deleted elsewhere. */
  onDeleted: () => void
}

export function useChatThread(options: ChatThreadOptions) {
  const { connection, conversationId, busy, t } = options
  const thread = shallowRef<ThreadState | null>(null)
  const loadError = ref('')
  const notice = ref<ChatNotice | null>(null)
  /** The message being edited (forgotten when a reload no longer shows it). */
  const editingId = ref<string | null>(null)
  /** Messages of the path asked of the server (the rest stay there until asked for). */
  const loadTail = ref(LOAD_TAIL)

  let openToken = 0
  let subscribed: string | null = null
  /** The newest version any event named: a reload that comes back older goes again. */
  let seenVersion = 0

  function subscribe(id: string | null): void {
    if (subscribed && subscribed !== id) send({ type: 'chat:unsubscribe', conversationId: subscribed })
    subscribed = id
    if (id) send({ type: 'chat:subscribe', conversationId: id })
  }

  function send(message: ChatSubscribeMessage): void {
    connection?.send(message)
  }

  /** A version a write of the page answered with. */
  function seen(v: number): void {
    seenVersion = Math.max(seenVersion, v)
  }

  /** Show conversation `id` (or none); true once it is shown. */
  async function open(id: string | null): Promise<boolean> {
    const token = ++openToken
    thread.value = null
    loadError.value = ''
    notice.value = null
    editingId.value = null
    loadTail.value = LOAD_TAIL
    seenVersion = 0
    subscribe(id)
    if (!id) return false
    try {
      const view = await getChat(id, loadTail.value)
      if (token !== openToken) return false
      thread.value = threadFromView(view)
      return true
    } catch (exc) {
      if (token === openToken) loadError.value = t('chat.loadFailed', { message: failureMessage(exc) })
      return false
    }
  }

  let reloading: Promise<void> | null = null
  let reloadAgain = false

  /** Fetch the open conversation again (coalesced: one request at a time, one more after). */
  function reload(): Promise<void> {
    if (reloading) {
      reloadAgain = true
      return reloading
    }
    reloading = (async () => {
      for (let round = 0; round < 4; round++) {
        reloadAgain = false
        const id = conversationId.value
        if (!id) return
        const token = openToken
        try {
          const view = await getChat(id, loadTail.value)
          if (token !== openToken) return
          thread.value = threadFromView(view)
          if (editingId.value && !view.messages.some((m) => m.id === editingId.value)) editingId.value = null
        } catch (exc) {
          if (token === openToken) notice.value = { kind: 'error', text: () => t('chat.errors.reload', { message: failureMessage(exc) }) }
          return
        }
        const st = thread.value
        if (!reloadAgain && !(st && seenVersion > version(st))) return
      }
    })().finally(() => {
      reloading = null
    })
    return reloading
  }

  function setRunning(value: boolean): void {
    if (thread.value && thread.value.running !== value) thread.value = { ...thread.value, running: value }
  }

  function onChatEvent(msg: ServerMessage): void {
    const ev = chatEvent(msg)
    if (!ev) return
    // Created, renamed or deleted anywhere: the list shows it.
    if (ev.type === 'chat:changed' && ev.listed) options.onListChanged()
    if (ev.conversationId !== conversationId.value) return
    if ('version' in ev) seen(ev.version)
    const st = thread.value
    if (!st) return
    switch (ev.type) {
      case 'chat:message': {
        const change = applyChatMessage(st, ev.message, ev.version)
        thread.value = change.state
        if (change.reload) void reload()
        break
      }
      case 'chat:stream':
        thread.value = applyStream(st, ev.messageId, ev.text, ev.thought ?? undefined)
        break
      case 'chat:done': {
        const change = applyDone(st, ev)
        thread.value = change.state
        if (change.reload) void reload()
        options.onListChanged()
        break
      }
      case 'chat:changed':
        if (ev.deleted) {
          options.onDeleted()
          break
        }
        // A write of this page reloads when it ends; anything newer than that reloads then.
        if (isNewer(st, ev.version) && !busy.value) void reload()
        break
    }
  }

  const offs = connection ? CHAT_EVENT_TYPES.map((type) => connection.on(type, onChatEvent)) : []

  // After the socket was lost the server forgot the subscription and events were missed.
  let lostSocket = false
  if (connection) {
    watch(connection.state, (state) => {
      if (state === 'disconnected') lostSocket = true
      else if (state === 'connected' && lostSocket) {
        lostSocket = false
        if (subscribed) {
          send({ type: 'chat:subscribe', conversationId: subscribed })
          void reload()
        }
      }
    })
  }

  onBeforeUnmount(() => {
    subscribe(null)
    for (const off of offs) off()
  })

  return { thread, loadError, notice, editingId, loadTail, open, reload, seen, setRunning }
}
