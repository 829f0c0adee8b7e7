import { describe, expect, it } from 'vitest'
import type { ChatMessage } from '../src/api/chat'
import { speakerFace } from '../src/lib/groupFaces'

function message(role: ChatMessage['role'], extra?: Record<string, unknown>): ChatMessage {
  return {
    id: 'm',
    conversation_id: 'c',
    parent_id: null,
    role,
    name: 'Kai',
    content: 'hi',
    status: 'complete',
    sibling_index: 0,
    depth: 0,
    created_at: 0,
    sibling_count: 1,
    extra,
  }
}

describe('speakerFace', () => {
  it("shows a group reply's own speaker, not the chat's first character", () => {
    const reply = message('assistant', { speaker: { id: 'kai', name: 'Kai', preset: 'kai 1' } })
    expect(speakerFace(reply, '/first.png')).toBe('/api/characters/kai%201/avatar')
  })

  it('shows no face for a speaker without an avatar', () => {
    expect(speakerFace(message('assistant', { speaker: { id: 'bo', name: 'Bo' } }), '/first.png')).toBeNull()
  })

  it('keeps the fallback outside group replies', () => {
    expect(speakerFace(message('assistant'), '/first.png')).toBe('/first.png')
    expect(speakerFace(message('user', { speaker: { preset: 'x' } }), '/me.png')).toBe('/me.png')
  })
})
