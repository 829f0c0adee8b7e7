// The WebSocket to the server (`/ws`, seed 002 envelope: every message is {"type", ...}).
//
// The header shows the last `status` message; when the socket closes it is reopened with
// exponential backoff. Later layers subscribe to other message types through `on()` and
// send with `send()`, which holds messages until the socket is open.
import { type InjectionKey, type Ref, ref } from 'vue'

export type ConnectionState = 'connecting' | 'connected' | 'busy' | 'error' | 'disconnected'

export interface ServerMessage {
  type: string
  [field: string]: unknown
}

/** The app's one connection, provided by App.vue for pages that listen to server events. */
export const CONNECTION_KEY: InjectionKey<Connection> = Symbol('storyloom-connection')

export const BACKOFF_START_MS = 500
export const BACKOFF_MAX_MS = 15_000

/** Delay before reconnect attempt `attempt` (0-based): 0.5 s, 1 s, 2 s … up to 15 s. */
export function backoffDelay(attempt: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** Math.max(0, attempt))
}

export function wsUrl(loc: Pick<Location, 'protocol' | 'host'> = window.location): string {
  return `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}/ws`
}

type Handler = (message: ServerMessage) => void

export interface Connection {
  state: Ref<ConnectionState>
  message: Ref<string>
  /** Seconds until the next reconnect attempt while disconnected. */
  retryInSeconds: Ref<number>
  start(): void
  stop(): void
  on(type: string, handler: Handler): () => void
  /** Send `{type, ...}`; while the socket is not open it waits (at most SEND_QUEUE_LIMIT). */
  send(msg: ServerMessage): void
}

export const SEND_QUEUE_LIMIT = 100

export interface ConnectionOptions {
  url?: string
  WebSocketImpl?: typeof WebSocket
}

export function createConnection(options: ConnectionOptions = {}): Connection {
  const state = ref<ConnectionState>('connecting')
  const message = ref('')
  const retryInSeconds = ref(0)
  const handlers = new Map<string, Set<Handler>>()
  let socket: WebSocket | null = null
  let isOpen = false
  const queue: string[] = []
  let attempt = 0
  let timer: ReturnType<typeof setTimeout> | null = null
  let stopped = true

  function dispatch(msg: ServerMessage): void {
    if (msg.type === 'status') {
      const s = msg.status
      if (s === 'connected' || s === 'busy' || s === 'error') state.value = s
      message.value = typeof msg.message === 'string' ? msg.message : ''
    }
    for (const h of handlers.get(msg.type) ?? []) h(msg)
  }

  function open(): void {
    if (stopped) return
    state.value = 'connecting'
    const Impl = options.WebSocketImpl ?? WebSocket
    let ws: WebSocket
    try {
      ws = new Impl(options.url ?? wsUrl())
    } catch (exc) {
      message.value = exc instanceof Error ? exc.message : String(exc)
      scheduleReconnect()
      return
    }
    socket = ws
    ws.onopen = () => {
      attempt = 0
      isOpen = true
      flush(ws)
    }
    ws.onmessage = (event: MessageEvent) => {
      if (typeof event.data !== 'string') return
      try {
        const parsed: unknown = JSON.parse(event.data)
        if (parsed && typeof parsed === 'object' && typeof (parsed as ServerMessage).type === 'string') {
          dispatch(parsed as ServerMessage)
        }
      } catch {
        // not JSON: ignore, the protocol only sends JSON
      }
    }
    ws.onclose = () => {
      if (socket === ws) {
        socket = null
        isOpen = false
      }
      scheduleReconnect()
    }
  }

  function flush(ws: WebSocket): void {
    while (queue.length && socket === ws && isOpen) {
      const text = queue.shift()!
      try {
        ws.send(text)
      } catch {
        queue.unshift(text)
        return
      }
    }
  }

  function scheduleReconnect(): void {
    if (stopped) return
    const delay = backoffDelay(attempt)
    attempt += 1
    state.value = 'disconnected'
    retryInSeconds.value = Math.ceil(delay / 1000)
    timer = setTimeout(() => {
      timer = null
      open()
    }, delay)
  }

  return {
    state,
    message,
    retryInSeconds,
    start() {
      if (!stopped) return
      stopped = false
      attempt = 0
      open()
    },
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = null
      const ws = socket
      socket = null
      isOpen = false
      ws?.close()
    },
    on(type, handler) {
      let set = handlers.get(type)
      if (!set) handlers.set(type, (set = new Set()))
      set.add(handler)
      return () => set.delete(handler)
    },
    send(msg) {
      queue.push(JSON.stringify(msg))
      if (queue.length > SEND_QUEUE_LIMIT) queue.splice(0, queue.length - SEND_QUEUE_LIMIT)
      if (socket && isOpen) flush(socket)
    },
  }
}
