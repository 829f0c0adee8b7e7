import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { backoffDelay, createConnection, wsUrl } from '../src/lib/connection'

class FakeSocket {
  static instances: FakeSocket[] = []
  onopen: (() => void) | null = null
  onmessage: ((e: { data: unknown }) => void) | null = null
  onclose: (() => void) | null = null
  closed = false
  constructor(public url: string) {
    FakeSocket.instances.push(this)
  }
  close() {
    this.closed = true
    this.onclose?.()
  }
  serverSends(msg: unknown) {
    this.onmessage?.({ data: typeof msg === 'string' ? msg : JSON.stringify(msg) })
  }
}

beforeEach(() => {
  FakeSocket.instances = []
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe('connection', () => {
  it('builds ws:// and wss:// URLs from the page address', () => {
    expect(wsUrl({ protocol: 'http:', host: '127.0.0.1:8420' })).toBe('ws://127.0.0.1:8420/ws')
    expect(wsUrl({ protocol: 'https:', host: 'example.org' })).toBe('wss://example.org/ws')
  })

  it('backs off exponentially up to a cap', () => {
    expect([0, 1, 2, 3].map(backoffDelay)).toEqual([500, 1000, 2000, 4000])
    expect(backoffDelay(20)).toBe(15_000)
  })

  it('follows status messages and reconnects after a close', () => {
    const conn = createConnection({ url: 'ws://h/ws', WebSocketImpl: FakeSocket as unknown as typeof WebSocket })
    const seen: unknown[] = []
    conn.on('status', (m) => seen.push(m))
    conn.start()
    expect(conn.state.value).toBe('connecting')
    const first = FakeSocket.instances[0]!
    first.onopen?.()
    first.serverSends({ type: 'status', status: 'connected', message: 'storyloom 0.1.0' })
    expect(conn.state.value).toBe('connected')
    expect(conn.message.value).toBe('storyloom 0.1.0')
    first.serverSends({ type: 'status', status: 'busy' })
    expect(conn.state.value).toBe('busy')
    first.serverSends('not json')
    first.serverSends({ type: 'other' })
    expect(seen).toHaveLength(2)

    first.onclose?.()
    expect(conn.state.value).toBe('disconnected')
    expect(conn.retryInSeconds.value).toBe(1)
    vi.advanceTimersByTime(499)
    expect(FakeSocket.instances).toHaveLength(1)
    vi.advanceTimersByTime(1)
    expect(FakeSocket.instances).toHaveLength(2)
    // Never opened: the next delay doubles.
    FakeSocket.instances[1]!.onclose?.()
    vi.advanceTimersByTime(999)
    expect(FakeSocket.instances).toHaveLength(2)
    vi.advanceTimersByTime(1)
    expect(FakeSocket.instances).toHaveLength(3)

    conn.stop()
    expect(FakeSocket.instances[2]!.closed).toBe(true)
    vi.advanceTimersByTime(60_000)
    expect(FakeSocket.instances).toHaveLength(3)
  })
})
