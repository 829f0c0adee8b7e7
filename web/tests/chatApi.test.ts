import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/api/client'
import {
  conversationIdFrom,
  deleteMessage,
  generate,
  getChat,
  importChat,
  isConflict,
  listChats,
  listFrom,
  patchChat,
  sendMessage,
} from '../src/api/chat'
import { conversation } from './chatFixtures'

interface Call {
  url: string
  init: RequestInit
}

function stub(status: number, body: unknown): { fetch: typeof fetch; calls: Call[] } {
  const calls: Call[] = []
  const impl = (async (url: string, init: RequestInit) => {
    calls.push({ url, init })
    return new Response(body === null ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
  }) as unknown as typeof fetch
  return { fetch: impl, calls }
}

describe('the chat API client', () => {
  it('sends the version the page saw with every write', async () => {
    const s = stub(202, { user_message: {}, version: 4 })
    await sendMessage('c 1', 'hello', 3, s.fetch)
    expect(s.calls[0]!.url).toBe('/api/chats/c%201/messages')
    expect(JSON.parse(String(s.calls[0]!.init.body))).toEqual({ text: 'hello', expected_version: 3 })

    const g = stub(202, { message: {}, version: 5 })
    await generate('c1', { kind: 'swipe', message_id: 'm', expected_version: 4 }, g.fetch)
    expect(JSON.parse(String(g.calls[0]!.init.body))).toEqual({ kind: 'swipe', message_id: 'm', expected_version: 4 })

    const d = stub(200, conversation())
    await deleteMessage('c1', 'm', 5, d.fetch)
    expect(d.calls[0]!.url).toBe('/api/chats/c1/messages/m?expected_version=5')
    expect(d.calls[0]!.init.method).toBe('DELETE')
  })

  it('patches settings with PATCH and reads a 409 as a conflict', async () => {
    const ok = stub(200, conversation())
    await patchChat('c1', { expected_version: 2, title: 'New' }, ok.fetch)
    expect(ok.calls[0]!.init.method).toBe('PATCH')
    expect(JSON.parse(String(ok.calls[0]!.init.body))).toEqual({ expected_version: 2, title: 'New' })

    const conflict = stub(409, { error: { message: 'version 2 expected, 3 found', problems: [] }, version: 3 })
    const error = await patchChat('c1', { expected_version: 2 }, conflict.fetch).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(isConflict(error)).toBe(true)
    expect(isConflict(new ApiError(400, 'busy'))).toBe(false)
  })

  it('asks for a tail of the path only when told', async () => {
    const s = stub(200, { conversation: conversation(), messages: [], continuation: [], running: false })
    await getChat('c1', 200, s.fetch)
    await getChat('c1', undefined, s.fetch)
    expect(s.calls.map((c) => c.url)).toEqual(['/api/chats/c1?tail=200', '/api/chats/c1'])
  })

  it('reads lists bare or wrapped', async () => {
    expect(listFrom([1, 2], 'x')).toEqual([1, 2])
    expect(listFrom({ x: [3] }, 'x')).toEqual([3])
    expect(listFrom({ y: [3] }, 'x')).toEqual([])
    const s = stub(200, { conversations: [{ id: 'a' }] })
    expect(await listChats(s.fetch)).toEqual([{ id: 'a' }])
  })

  it('finds the conversation an answer names', () => {
    expect(conversationIdFrom({ conversation: { id: 'a' }, kind: 'chat' })).toBe('a')
    expect(conversationIdFrom({ id: 'b', title: 't' })).toBe('b')
    expect(conversationIdFrom({ conversation_id: 'c' })).toBe('c')
    expect(conversationIdFrom(null)).toBeNull()
  })

  it('uploads an import as multipart under "file"', async () => {
    const s = stub(201, { conversation: conversation(), kind: 'chat' })
    const file = new File(['{}'], 'chat.jsonl')
    const result = await importChat(file, 'ask', s.fetch)
    expect('imported' in result && result.imported.kind).toBe('chat')
    const body = s.calls[0]!.init.body as FormData
    expect((body.get('file') as File).name).toBe('chat.jsonl')
    const failed = stub(422, { error: { message: 'chat.jsonl: line 2: not JSON', problems: [] } })
    await expect(importChat(file, 'ask', failed.fetch)).rejects.toThrow('line 2')
  })
})
