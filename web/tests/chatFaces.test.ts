// Faces and marks where a chat or a message appears: the conversation list (each chat's
// character avatar, the initial where it has none, group chats marked) and the tree
// (speakers' faces, messages hidden from the prompt marked).
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ConversationSummary, TreeNode } from '../src/api/chat'
import ConversationList from '../src/components/chat/ConversationList.vue'
import TreePanel from '../src/components/chat/TreePanel.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

function summary(over: Partial<ConversationSummary> & { id: string }): ConversationSummary {
  return { project_id: 'default', title: over.id, character_name: '', updated_at: 1, message_count: 2, last_message: '', ...over }
}

function node(over: Partial<TreeNode> & { id: string; parent_id: string | null }): TreeNode {
  return { role: 'assistant', name: '', preview: over.id, status: 'complete', sibling_index: 0, depth: 0, on_path: true, ...over }
}

describe('the conversation list', () => {
  function mountList(conversations: ConversationSummary[], lang: 'en' | 'zh' = 'en') {
    return mount(ConversationList, { props: { conversations, current: null }, global: { plugins: [makeI18n(lang)] } })
  }

  it("shows each chat's character avatar, and the initial for a chat with no character", () => {
    const w = mountList([
      summary({ id: 'a', title: 'With Sera', character_name: 'Seraphina', character_id: 'sera', updated_at: 3 }),
      summary({ id: 'b', title: 'Imported', character_name: 'Mira', character_id: null, updated_at: 2 }),
    ])
    const faces = w.findAll(q('chat-conversation-avatar'))
    expect(faces).toHaveLength(2)
    expect(faces[0]!.element.tagName).toBe('IMG')
    expect(faces[0]!.attributes('src')).toBe('/api/characters/sera/avatar')
    expect(faces[1]!.element.tagName).toBe('SPAN')
    expect(faces[1]!.text()).toBe('M')
  })

  it('falls back to the initial when the character has no avatar after all, and asks once', async () => {
    const chats = [summary({ id: 'a', character_name: 'Kai', character_id: 'kai' })]
    const w = mountList(chats)
    await w.get(q('chat-conversation-avatar')).trigger('error')
    const face = w.get(q('chat-conversation-avatar'))
    expect(face.element.tagName).toBe('SPAN')
    expect(face.text()).toBe('K')
    // Another face with the same address shows the initial at once.
    expect(mountList(chats).get(q('chat-conversation-avatar')).element.tagName).toBe('SPAN')
  })

  it('marks group chats with their size, in both languages', () => {
    const chats = [summary({ id: 'g', title: 'Band', group_size: 3, updated_at: 2 }), summary({ id: 'one', title: 'Solo', group_size: 0 })]
    const en = mountList(chats)
    const rows = en.findAll(q('chat-conversation'))
    expect(rows.map((r) => r.attributes('data-group'))).toEqual(['true', undefined])
    expect(en.findAll(q('chat-conversation-group')).map((b) => b.text())).toEqual(['group · 3'])
    expect(en.get(q('chat-conversation-group')).attributes('title')).toBe('A group chat with 3 characters')
    expect(mountList(chats, 'zh').get(q('chat-conversation-group')).text()).toBe('群聊 · 3')
  })
})

describe('the tree', () => {
  const NODES: TreeNode[] = [
    node({ id: 'g', parent_id: null, preview: 'Welcome' }),
    node({ id: 'u', parent_id: 'g', role: 'user', depth: 1, preview: 'A secret aside', hidden: true }),
    node({ id: 'r', parent_id: 'u', depth: 2, preview: 'Reply' }),
  ]

  beforeEach(() => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify({ nodes: NODES }), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
  })
  afterEach(() => vi.unstubAllGlobals())

  it('marks the messages hidden from the prompt and names speakers with their faces', async () => {
    const w = mount(TreePanel, {
      props: {
        conversationId: 'c1',
        version: 1,
        disabled: false,
        speakers: { names: { assistant: 'Seraphina', user: 'Wren' }, avatars: { assistant: '/api/characters/sera/avatar', user: null } },
      },
      global: { plugins: [makeI18n('en')] },
    })
    await flushPromises()
    const rows = w.findAll(q('chat-tree-node'))
    expect(rows.map((r) => r.attributes('data-hidden'))).toEqual([undefined, 'true', undefined])
    expect(rows[1]!.get(q('chat-tree-hidden')).text()).toBe('hidden')
    expect(rows[1]!.classes()).toContain('hidden-msg')
    expect(rows.map((r) => r.get(q('chat-tree-speaker')).text())).toEqual(['Seraphina', 'Wren', 'Seraphina'])
    expect(rows[0]!.get('img').attributes('src')).toBe('/api/characters/sera/avatar')
    expect(rows[1]!.find('img').exists()).toBe(false)
  })
})
