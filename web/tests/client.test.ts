import { describe, expect, it, vi } from 'vitest'
import { ApiError, errorFromBody, requestJson } from '../src/api/client'
import { putSettings, testConnection } from '../src/api/settings'

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' },
  })
}

describe('errorFromBody', () => {
  it('reads the error envelope with problems', () => {
    const err = errorFromBody(422, 'Unprocessable Entity', {
      error: {
        message: 'invalid settings: user_llm.base_url: must be an http:// URL',
        problems: [{ field: 'user_llm.base_url', reason: 'must be an http:// URL' }],
      },
    })
    expect(err).toBeInstanceOf(ApiError)
    expect(err.status).toBe(422)
    expect(err.message).toBe('invalid settings: user_llm.base_url: must be an http:// URL')
    expect(err.problems).toEqual([{ field: 'user_llm.base_url', reason: 'must be an http:// URL' }])
  })

  it('accepts an envelope without problems', () => {
    const err = errorFromBody(404, 'Not Found', { error: { message: 'no such API path: /api/x' } })
    expect(err.message).toBe('no such API path: /api/x')
    expect(err.problems).toEqual([])
  })

  it('skips malformed problems', () => {
    const err = errorFromBody(422, '', {
      error: { message: 'bad', problems: [{ field: 'a', reason: 'r' }, 'junk', { field: 'b' }, { reason: 'top' }] },
    })
    expect(err.problems).toEqual([
      { field: 'a', reason: 'r' },
      { field: '', reason: 'top' },
    ])
  })

  it("falls back to FastAPI's detail", () => {
    expect(errorFromBody(401, 'Unauthorized', { detail: 'token required' }).message).toBe('token required')
    const err = errorFromBody(422, '', { detail: [{ loc: ['body', 'role'], msg: 'bad role' }] })
    expect(err.problems).toEqual([{ field: 'role', reason: 'bad role' }])
  })

  it('falls back to the status for anything else', () => {
    expect(errorFromBody(502, 'Bad Gateway', null).message).toBe('HTTP 502 Bad Gateway')
    expect(errorFromBody(500, '', 'Internal Server Error').message).toBe('HTTP 500: Internal Server Error')
  })
})

describe('requestJson', () => {
  it('sends same-origin JSON and returns the parsed body', async () => {
    const fetchImpl = vi.fn(async () => jsonResponse(200, { ok: true }))
    const out = await requestJson<{ ok: boolean }>('POST', '/api/x', { a: 1 }, fetchImpl)
    expect(out).toEqual({ ok: true })
    const [url, init] = fetchImpl.mock.calls[0] as unknown as [string, RequestInit]
    expect(url).toBe('/api/x')
    expect(init.method).toBe('POST')
    expect(init.credentials).toBe('same-origin')
    expect((init.headers as Record<string, string>)['Content-Type']).toBe('application/json')
    expect(init.body).toBe('{"a":1}')
  })

  it('sends no body on GET', async () => {
    const fetchImpl = vi.fn(async () => jsonResponse(200, {}))
    await requestJson('GET', '/api/health', undefined, fetchImpl)
    const init = (fetchImpl.mock.calls[0] as unknown as [string, RequestInit])[1]
    expect(init.body).toBeUndefined()
  })

  it('throws ApiError with the envelope on 4xx', async () => {
    const fetchImpl = vi.fn(async () =>
      jsonResponse(422, { error: { message: 'invalid', problems: [{ field: 'x', reason: 'y' }] } }),
    )
    await expect(requestJson('PUT', '/api/settings', {}, fetchImpl)).rejects.toMatchObject({
      name: 'ApiError',
      status: 422,
      message: 'invalid',
      problems: [{ field: 'x', reason: 'y' }],
    })
  })

  it('throws ApiError on a non-JSON error body', async () => {
    const fetchImpl = vi.fn(async () => new Response('oops', { status: 500 }))
    await expect(requestJson('GET', '/api/x', undefined, fetchImpl)).rejects.toMatchObject({
      status: 500,
      message: 'HTTP 500: oops',
    })
  })

  it('turns a network failure into status 0', async () => {
    const fetchImpl = vi.fn(async () => {
      throw new TypeError('Failed to fetch')
    })
    const err = await requestJson('GET', '/api/x', undefined, fetchImpl).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ApiError)
    expect((err as ApiError).isNetworkError).toBe(true)
    expect((err as ApiError).message).toBe('Failed to fetch')
  })
})

describe('settings calls', () => {
  it('PUT /api/settings sends the update as is', async () => {
    const fetchImpl = vi.fn(async () => jsonResponse(200, {}))
    await putSettings({ server: { host: '127.0.0.1', port: 8420 } }, fetchImpl)
    const [url, init] = fetchImpl.mock.calls[0] as unknown as [string, RequestInit]
    expect(url).toBe('/api/settings')
    expect(init.method).toBe('PUT')
    expect(JSON.parse(init.body as string)).toEqual({ server: { host: '127.0.0.1', port: 8420 } })
  })

  it('POST /api/settings/test with and without an endpoint', async () => {
    const fetchImpl = vi.fn(async () => jsonResponse(200, { ok: true, message: 'fine' }))
    await testConnection('agent_llm', undefined, fetchImpl)
    const endpoint = {
      provider: 'openai' as const,
      base_url: 'http://127.0.0.1:1/v1',
      model: 'e',
      timeout_s: 60,
      max_retries: 2,
    }
    await testConnection('embedding', endpoint, fetchImpl)
    const bodies = fetchImpl.mock.calls.map((c) => JSON.parse((c as unknown as [string, RequestInit])[1].body as string))
    expect(bodies[0]).toEqual({ role: 'agent_llm' })
    expect(bodies[1]).toEqual({ role: 'embedding', endpoint })
  })
})
