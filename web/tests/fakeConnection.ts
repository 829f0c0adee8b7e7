// A stand-in for the app's WebSocket connection: records what is sent, and `emit` hands
// a server message to whoever listens for its type.
import { ref } from 'vue'
import type { Connection, ServerMessage } from '../src/lib/connection'

export type FakeConnection = Connection & { sent: ServerMessage[]; emit: (msg: ServerMessage) => void }

export function fakeConnection(): FakeConnection {
  const handlers = new Map<string, Set<(m: ServerMessage) => void>>()
  const sent: ServerMessage[] = []
  return {
    state: ref('connected'),
    message: ref(''),
    retryInSeconds: ref(0),
    start() {},
    stop() {},
    on(type, handler) {
      if (!handlers.has(type)) handlers.set(type, new Set())
      handlers.get(type)!.add(handler)
      return () => handlers.get(type)!.delete(handler)
    },
    send(msg) {
      sent.push(msg)
    },
    sent,
    emit(msg) {
      for (const h of handlers.get(msg.type) ?? []) h(msg)
    },
  }
}
