// The chat page's frame host: the config each sandboxed frame starts with, the answers to
// its requests, and the events it hears (a reply arrived, the variables changed). One per
// open chat; frames find it by injection (FRAME_HOST). See frameBridge.ts for the rules.
import { computed, type ComputedRef, type InjectionKey, type Ref, ref, watch } from 'vue'
import { type ChatMessage, type Conversation, type FrameAccess, getFrameAccess, getMessageVariables, setMessageVariables } from '../api/chat'
import {
  answerCall,
  FRAME_CALL,
  FRAME_EVENT,
  FRAME_HEIGHT,
  FRAME_LOADED,
  FRAME_REPLY,
  FRAME_SYNC,
  type FrameConfig,
  type FrameMessage,
  messageVariables,
  type Variables,
} from './frameBridge'

/** Messages a frame's config carries (the newest ones; cards read the last few). */
const MESSAGES_SENT = 100

export interface AttachedFrame {
  id: string
  nonce: string
  window: () => Window | null
  height: (value: number) => void
  /** The frame's own document finished loading. */
  loaded?: () => void
}

export interface FrameHost {
  /** The character's answers for this chat (null until loaded, or no chat). */
  access: Ref<FrameAccess | null>
  /** The library character the chat speaks with (null: none, or a group). */
  characterId: ComputedRef<string | null>
  /** The config of a frame of the message `messageId` (null: a script frame). */
  config: (messageId: string | null, frame: string, nonce: string) => Promise<FrameConfig>
  /** Start answering the frame; the function returned stops it. */
  attach: (frame: AttachedFrame) => () => void
  /** The libraries to inline into a scripted frame running `code` (loaded on first use). */
  libraries: (code: string) => Promise<string>
}

export const FRAME_HOST: InjectionKey<FrameHost> = Symbol('storyloom-frame-host')

export interface FrameHostOptions {
  conversationId: Ref<string | null>
  conversation: Ref<Conversation | null>
  messages: Ref<readonly ChatMessage[]>
  /** Messages of the path before the first one fetched. */
  earlier: Ref<number>
  userName: Ref<string>
  send: (text: string) => Promise<void>
}

function isObject(value: unknown): value is Variables {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** Tavern Helper's character variables, as the card carries them. */
function characterVariables(card: Record<string, unknown> | undefined): Variables {
  const extensions = card?.extensions
  if (!isObject(extensions)) return {}
  const helper = extensions.tavern_helper
  if (isObject(helper) && isObject(helper.variables)) return helper.variables
  if (Array.isArray(helper)) {
    const pair = helper.find((p): p is [string, unknown] => Array.isArray(p) && p[0] === 'variables')
    if (pair && isObject(pair[1])) return pair[1]
  }
  return isObject(extensions.TavernHelper_variables) ? extensions.TavernHelper_variables : {}
}

let librariesLoaded: Promise<typeof import('./frameLibraries')> | null = null

export function useFrameHost(options: FrameHostOptions): FrameHost {
  const access = ref<FrameAccess | null>(null)
  let accessLoaded: Promise<FrameAccess | null> = Promise.resolve(null)
  const frames = new Map<string, AttachedFrame>()
  let data = new Map<string, Promise<Variables>>()

  watch(
    options.conversationId,
    (id) => {
      access.value = null
      data = new Map()
      accessLoaded = id
        ? getFrameAccess(id).then(
            (answer) => (options.conversationId.value === id ? (access.value = answer) : null),
            () => null,
          )
        : Promise.resolve(null)
    },
    { immediate: true },
  )

  function indexOf(messageId: string): number {
    return options.earlier.value + options.messages.value.findIndex((m) => m.id === messageId)
  }

  function lastIndex(): number {
    return options.earlier.value + options.messages.value.length - 1
  }

  function frameMessages(): FrameMessage[] {
    const all = options.messages.value
    const from = Math.max(0, all.length - MESSAGES_SENT)
    return all.slice(from).map((m, i) => ({
      message_id: options.earlier.value + from + i,
      name: m.name || (m.role === 'user' ? options.userName.value : String(options.conversation.value?.character.card?.name ?? '')),
      role: m.role === 'user' || m.role === 'assistant' ? m.role : 'system',
      is_hidden: m.extra?.hidden === true,
      message: m.content,
      extra: {},
    }))
  }

  function dataOf(message: ChatMessage): Promise<Variables> {
    const known = data.get(message.id)
    if (known) return known
    const id = options.conversationId.value
    if (!id) return Promise.resolve({})
    const loading = getMessageVariables(id, message.id).then((read) => messageVariables(read.variables, read.before, read.delta))
    // A failed read is tried again next time.
    loading.catch(() => data.delete(message.id))
    data.set(message.id, loading)
    return loading
  }

  async function config(messageId: string | null, frame: string, nonce: string): Promise<FrameConfig> {
    const answer = await accessLoaded
    const all = options.messages.value
    const own = messageId ? all.find((m) => m.id === messageId) : undefined
    const last = all[all.length - 1]
    const loaded: Record<string, Variables> = {}
    const wanted = [...new Set([own, last])].filter((m): m is ChatMessage => m !== undefined)
    const read = await Promise.all(wanted.map((m) => dataOf(m).catch((): Variables => ({}))))
    wanted.forEach((m, i) => (loaded[String(indexOf(m.id))] = read[i]!))
    const card = options.conversation.value?.character.card ?? {}
    return {
      frame,
      nonce,
      messageId: own ? indexOf(own.id) : null,
      lastMessageId: lastIndex(),
      messages: frameMessages(),
      data: loaded,
      chat: last ? (loaded[String(indexOf(last.id))] ?? {}) : {},
      global: answer?.global_variables ?? {},
      character: characterVariables(card),
      card,
      charName: String(card.name ?? ''),
      userName: options.userName.value,
    }
  }

  function post(frame: AttachedFrame, message: Record<string, unknown>): void {
    // The frame's origin is opaque: "*" is the only target; what is sent is its own data.
    frame.window()?.postMessage(message, '*')
  }

  function broadcast(message: Record<string, unknown>): void {
    for (const frame of frames.values()) post(frame, message)
  }

  async function replaceVariables(index: number, variables: Variables): Promise<Variables> {
    const id = options.conversationId.value
    const message = options.messages.value[index - options.earlier.value]
    if (!id || !message) throw new Error(`storyloom: no message ${index} in this chat`)
    await setMessageVariables(id, message.id, variables)
    data = new Map()
    const saved = await dataOf(message)
    const update: Record<string, unknown> = { type: FRAME_SYNC, data: { [String(index)]: saved } }
    if (index === lastIndex()) update.chat = saved
    broadcast(update)
    return saved
  }

  function onMessage(event: MessageEvent): void {
    const msg = event.data as Record<string, unknown> | null
    if (!msg || typeof msg !== 'object' || typeof msg.frame !== 'string') return
    const frame = frames.get(msg.frame)
    // Only the frame's own window with its own nonce: another frame cannot speak for it.
    if (!frame || event.source === null || event.source !== frame.window() || msg.nonce !== frame.nonce) return
    if (msg.type === FRAME_HEIGHT && typeof msg.height === 'number') frame.height(msg.height)
    else if (msg.type === FRAME_LOADED) frame.loaded?.()
    else if (msg.type === FRAME_CALL && typeof msg.fn === 'string') {
      const callId = msg.id
      const args = isObject(msg.args) ? msg.args : {}
      answerCall(
        { fn: msg.fn, args },
        { writes: () => access.value?.writes === true, replaceVariables, sendMessage: options.send },
      ).then(
        (value) => post(frame, { type: FRAME_REPLY, id: callId, ok: true, value }),
        (exc: unknown) => post(frame, { type: FRAME_REPLY, id: callId, ok: false, error: exc instanceof Error ? exc.message : String(exc) }),
      )
    }
  }

  function attach(frame: AttachedFrame): () => void {
    if (!frames.size) window.addEventListener('message', onMessage)
    frames.set(frame.id, frame)
    return () => {
      if (frames.get(frame.id) === frame) frames.delete(frame.id)
      if (!frames.size) window.removeEventListener('message', onMessage)
    }
  }

  function emit(name: string, ...args: unknown[]): void {
    broadcast({ type: FRAME_EVENT, name, args })
  }

  // A finished reply: the frames hear of it (and of its variables) as Tavern Helper's do.
  let lastSeen = ''
  watch(
    () => {
      const m = options.messages.value[options.messages.value.length - 1]
      return m ? `${m.id}:${m.status}:${m.role}` : ''
    },
    async (key) => {
      if (key === lastSeen) return
      lastSeen = key
      const m = options.messages.value[options.messages.value.length - 1]
      if (!m || m.status === 'streaming') return
      // The reply's own status bar will ask for its variables: start reading them now.
      if (m.role === 'assistant') {
        data.delete(m.id)
        void dataOf(m).catch(() => null)
      }
      if (!frames.size) return
      const index = lastIndex()
      if (m.role === 'user') {
        broadcast({ type: FRAME_SYNC, messages: frameMessages(), lastMessageId: index })
        emit('message_sent', index)
        return
      }
      const now = await dataOf(m).catch(() => null)
      broadcast({ type: FRAME_SYNC, messages: frameMessages(), lastMessageId: index, ...(now ? { data: { [String(index)]: now }, chat: now } : {}) })
      emit('message_received', index)
      emit('character_message_rendered', index)
      emit('generation_ended', index)
      if (now) {
        for (const [path, text] of changedLeaves(now.delta_data)) emit('mag_variable_updated', now.stat_data, path, ...text.split('->', 2))
        emit('mag_variable_update_ended', now)
      }
    },
  )

  const characterId = computed(() => {
    const current = options.conversation.value
    if (!current || current.settings.group) return null
    return current.character.source_preset ?? null
  })

  return {
    access,
    characterId,
    config,
    attach,
    libraries: async (code) => (await (librariesLoaded ??= import('./frameLibraries'))).librariesFor(code),
  }
}

function changedLeaves(delta: unknown, at = ''): [string, string][] {
  if (!isObject(delta)) return typeof delta === 'string' && at ? [[at, delta]] : []
  return Object.entries(delta).flatMap(([key, value]) => changedLeaves(value, at ? `${at}.${key}` : key))
}
