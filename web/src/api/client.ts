// A small fetch wrapper for the storyloom API.
//
// Every failed request is turned into an ApiError carrying the server's error envelope
// `{"error": {"message": str, "problems": [{"field", "reason"}]}}`. Requests are same-origin
// with cookies (the server's token cookie, when it asks for one); the app holds no token.
// Nothing here logs request bodies: an update may carry an API key on its way to the server.
import type { Problem } from './types'

export class ApiError extends Error {
  /** HTTP status; 0 when the server could not be reached at all. */
  readonly status: number
  readonly problems: Problem[]

  constructor(status: number, message: string, problems: Problem[] = []) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.problems = problems
  }

  get isNetworkError(): boolean {
    return this.status === 0
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function asProblems(value: unknown): Problem[] {
  if (!Array.isArray(value)) return []
  const out: Problem[] = []
  for (const item of value) {
    if (isRecord(item) && typeof item.reason === 'string') {
      out.push({ field: typeof item.field === 'string' ? item.field : '', reason: item.reason })
    }
  }
  return out
}

/**
 * Read the error envelope from a parsed body. Tolerates FastAPI's default `{"detail": ...}`
 * and anything else by falling back to the HTTP status line.
 */
export function errorFromBody(status: number, statusText: string, body: unknown): ApiError {
  if (isRecord(body) && isRecord(body.error) && typeof body.error.message === 'string') {
    return new ApiError(status, body.error.message, asProblems(body.error.problems))
  }
  if (isRecord(body) && typeof body.detail === 'string') {
    return new ApiError(status, body.detail)
  }
  if (isRecord(body) && Array.isArray(body.detail)) {
    const problems: Problem[] = []
    for (const d of body.detail) {
      if (isRecord(d) && typeof d.msg === 'string') {
        const loc = Array.isArray(d.loc) ? d.loc.filter((p) => p !== 'body').join('.') : ''
        problems.push({ field: loc, reason: d.msg })
      }
    }
    return new ApiError(status, problems.map((p) => `${p.field}: ${p.reason}`).join('; '), problems)
  }
  if (typeof body === 'string' && body.trim()) {
    return new ApiError(status, `HTTP ${status}: ${body.trim().slice(0, 300)}`)
  }
  return new ApiError(status, `HTTP ${status}${statusText ? ` ${statusText}` : ''}`)
}

/** A response's body: parsed JSON, the text when it is not JSON, null when empty. */
async function readBody(res: Response): Promise<unknown> {
  const text = await res.text().catch(() => '')
  try {
    return text ? JSON.parse(text) : null
  } catch {
    return text // not JSON: keep the text for the error message
  }
}

export type Fetch = typeof fetch

export type Method = 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE'

/** One request, same-origin with cookies: the response and its body (readBody). A network
 * failure is an ApiError with status 0; HTTP errors are the caller's to read. */
async function send(path: string, init: RequestInit, fetchImpl: Fetch): Promise<{ res: Response; data: unknown }> {
  let res: Response
  try {
    res = await fetchImpl(path, { ...init, credentials: 'same-origin' })
  } catch (exc) {
    throw new ApiError(0, exc instanceof Error ? exc.message : String(exc))
  }
  return { res, data: await readBody(res) }
}

/** One JSON call (send). */
export function fetchJson(
  method: Method,
  path: string,
  body?: unknown,
  fetchImpl: Fetch = globalThis.fetch.bind(globalThis),
): Promise<{ res: Response; data: unknown }> {
  const init: RequestInit = { method, headers: { Accept: 'application/json' } }
  if (body !== undefined) {
    init.headers = { ...init.headers, 'Content-Type': 'application/json' }
    init.body = JSON.stringify(body)
  }
  return send(path, init, fetchImpl)
}

/** One multipart upload (send): each field a string, a file, or several files under one
 * name (undefined: left out). */
export function fetchForm(
  path: string,
  fields: Record<string, string | Blob | Blob[] | undefined>,
  fetchImpl: Fetch = globalThis.fetch.bind(globalThis),
): Promise<{ res: Response; data: unknown }> {
  const form = new FormData()
  for (const [name, value] of Object.entries(fields)) {
    for (const one of value === undefined ? [] : Array.isArray(value) ? value : [value]) form.append(name, one)
  }
  return send(path, { method: 'POST', headers: { Accept: 'application/json' }, body: form }, fetchImpl)
}

export async function requestJson<T>(
  method: Method,
  path: string,
  body?: unknown,
  fetchImpl?: Fetch,
): Promise<T> {
  const { res, data } = await fetchJson(method, path, body, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
  return data as T
}

/** A multipart upload (a file and form fields) answered with JSON; an HTTP error is an
 * ApiError with the server's message and problems. */
export async function postForm<T>(
  path: string,
  fields: Record<string, string | Blob | undefined>,
  fetchImpl?: Fetch,
): Promise<T> {
  const { res, data } = await fetchForm(path, fields, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
  return data as T
}
