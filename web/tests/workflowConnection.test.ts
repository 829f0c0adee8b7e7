import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createConnection, SEND_QUEUE_LIMIT } from '../src/lib/connection'

class FakeSocket {
  static instances: FakeSocket[] = []
  onopen: (() => void) | null = null
  onmessage: ((e: { data: unknown }) => void) | null = null
  onclose: (() => void) | null = null
  sent: string[] = []
  constructor(public url: string) {
    FakeSocket.instances.push(this)
  }
  send(text: string) {
    this.sent.push(text)
  }
  close() {
    this.onclose?.()
  }
}

beforeEach(() => {
  FakeSocket.instances = []
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

function connect() {
  const conn = createConnection({ url: 'ws://h/ws', WebSocketImpl: FakeSocket as unknown as typeof WebSocket })
  conn.start()
  return conn
}

describe('connection.send', () => {
  it('holds messages until the socket opens, then sends them in order', () => {
    const conn = connect()
    conn.send({ type: 'workflow:attach', runId: 'r', afterSeq: 3 })
    conn.send({ type: 'workflow:list' })
    const ws = FakeSocket.instances[0]!
    expect(ws.sent).toEqual([])
    ws.onopen?.()
    expect(ws.sent.map((s) => JSON.parse(s).type)).toEqual(['workflow:attach', 'workflow:list'])
    conn.send({ type: 'workflow:cancel' })
    expect(JSON.parse(ws.sent[2]!)).toEqual({ type: 'workflow:cancel' })
  })

  it('keeps what is sent while reconnecting for the next socket', () => {
    const conn = connect()
    const first = FakeSocket.instances[0]!
    first.onopen?.()
    first.onclose?.()
    conn.send({ type: 'human:decision', nodeId: 'h', decision: 'approve' })
    expect(first.sent).toEqual([])
    vi.advanceTimersByTime(500)
    const second = FakeSocket.instances[1]!
    second.onopen?.()
    expect(second.sent.map((s) => JSON.parse(s).type)).toEqual(['human:decision'])
  })

  it('drops the oldest messages beyond the queue limit', () => {
    const conn = connect()
    for (let i = 0; i < SEND_QUEUE_LIMIT + 5; i++) conn.send({ type: 'n', i })
    const ws = FakeSocket.instances[0]!
    ws.onopen?.()
    expect(ws.sent).toHaveLength(SEND_QUEUE_LIMIT)
    expect(JSON.parse(ws.sent[0]!).i).toBe(5)
  })
})
