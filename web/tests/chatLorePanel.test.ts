import { flushPromises, mount, type VueWrapper } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ChatLore, ScopedKnowledgeBase } from '../src/api/lore'
import ChatLorePanel from '../src/components/chat/ChatLorePanel.vue'
import { makeI18n } from '../src/i18n'

function scoped(over: Partial<ScopedKnowledgeBase> & { kb_id: string; scope: ScopedKnowledgeBase['scope'] }): ScopedKnowledgeBase {
  return { name: over.kb_id, reason: '', via: '', legacy: false, enabled: true, entry_count: 1, ...over }
}

const CARD = scoped({ kb_id: 'kb_card', name: "Seraphina's Forest", scope: 'character', via: 'Seraphina' })
const QIN = scoped({ kb_id: 'kb_qin', name: 'Qin History', scope: 'chat' })

function lore(chat: string[]): ChatLore {
  return {
    conversation_id: 'c1',
    version: 3,
    chat_knowledge_bases: chat,
    active: chat.includes('kb_qin') ? [QIN, CARD] : [CARD],
    disabled: [],
    available: [
      { kb_id: 'kb_card', name: "Seraphina's Forest", enabled: true, global_lore: false },
      { kb_id: 'kb_qin', name: 'Qin History', enabled: true, global_lore: false },
    ],
    insertion_strategy: 'evenly',
    problems: [],
  }
}

type Call = { url: string; method: string; body: unknown }
let calls: Call[]
let bound: string[]

beforeEach(() => {
  calls = []
  bound = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const body = init.body ? JSON.parse(String(init.body)) : null
      calls.push({ url, method: init.method ?? 'GET', body })
      if (init.method === 'PUT') bound = (body as { knowledge_bases: string[] }).knowledge_bases
      return new Response(JSON.stringify(lore(bound)), { status: 200, headers: { 'Content-Type': 'application/json' } })
    }),
  )
})

afterEach(() => vi.unstubAllGlobals())

async function mountPanel(): Promise<VueWrapper> {
  const wrapper = mount(ChatLorePanel, {
    props: { conversationId: 'c1', version: 3 },
    global: { plugins: [makeI18n('en')], stubs: { RouterLink: { template: '<a><slot /></a>' } } },
  })
  await flushPromises()
  return wrapper
}

const q = (id: string) => `[data-testid="${id}"]`

describe('ChatLorePanel', () => {
  it('lists the active books with their scope and why, in the chosen language', async () => {
    const wrapper = await mountPanel()
    const items = wrapper.findAll(q('chat-lore-kb'))
    expect(items.map((i) => i.attributes('data-scope'))).toEqual(['character'])
    expect(items[0]!.text()).toContain("Seraphina's Forest")
    expect(items[0]!.text()).toContain('Bound to the character Seraphina.')
    // A character's book is not removed from the chat: only the chat's own books are.
    expect(items[0]!.find(q('chat-lore-remove')).exists()).toBe(false)
  })

  it('binds a book to the chat and removes it again', async () => {
    const wrapper = await mountPanel()
    await wrapper.find(q('chat-lore-add-select')).setValue('kb_qin')
    await wrapper.find('form').trigger('submit')
    await flushPromises()
    expect(calls.filter((c) => c.method === 'PUT')).toEqual([
      { url: '/api/chats/c1/lore', method: 'PUT', body: { knowledge_bases: ['kb_qin'] } },
    ])
    const chat = wrapper.find(`${q('chat-lore-kb')}[data-scope="chat"]`)
    expect(chat.text()).toContain('Qin History')
    await chat.find(q('chat-lore-remove')).trigger('click')
    await flushPromises()
    expect(calls.filter((c) => c.method === 'PUT').at(-1)?.body).toEqual({ knowledge_bases: [] })
    expect(wrapper.findAll(q('chat-lore-kb'))).toHaveLength(1)
  })

  it('says why when the chat\'s lore cannot be read, and shows no books', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify({ detail: "conversation 'c1' not found" }), { status: 404, headers: { 'Content-Type': 'application/json' } })),
    )
    const wrapper = await mountPanel()
    expect(wrapper.find(q('chat-lore-error')).text()).toContain("conversation 'c1' not found")
    expect(wrapper.findAll(q('chat-lore-kb'))).toHaveLength(0)
    expect(wrapper.text()).not.toContain('Loading')
  })

  it('speaks Chinese', async () => {
    const wrapper = mount(ChatLorePanel, {
      props: { conversationId: 'c1', version: 3 },
      global: { plugins: [makeI18n('zh')], stubs: { RouterLink: { template: '<a><slot /></a>' } } },
    })
    await flushPromises()
    // The title is the side panel's heading ("本聊天中的设定"); the panel explains itself.
    expect(wrapper.text()).toContain('下一次回复会扫描的知识库')
    expect(wrapper.find(q('chat-lore-kb')).text()).toContain('绑定到角色 Seraphina。')
  })
})
