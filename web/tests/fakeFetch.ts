// A fake server for the component tests: fetch stubbed before each test (and restored
// after), each call recorded and answered by `respond`, which a test may replace.
import { afterEach, beforeEach, vi } from 'vitest'

export type Call = { url: string; method: string; body: unknown }
export type Reply = { status: number; body: unknown }

export function jsonResponse({ status, body }: Reply): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

/** `calls` and `respond` start over for each test (`respond`: 200 `{}`). `passOver` answers
 * the calls the tests do not check (a component's own lookups); those are not recorded. */
export function useFakeFetch(passOver?: (url: string) => Reply | undefined): { calls: Call[]; respond: (call: Call) => Reply } {
  const server = { calls: [] as Call[], respond: (_call: Call): Reply => ({ status: 200, body: {} }) }
  beforeEach(() => {
    server.calls = []
    server.respond = () => ({ status: 200, body: {} })
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init: RequestInit = {}) => {
        const passed = passOver?.(url)
        if (passed) return jsonResponse(passed)
        const call = { url, method: init.method ?? 'GET', body: init.body ? JSON.parse(init.body as string) : undefined }
        server.calls.push(call)
        return jsonResponse(server.respond(call))
      }),
    )
  })
  afterEach(() => {
    vi.unstubAllGlobals()
  })
  return server
}
