// Where a chat comes in from a file: the new-chat form (chats and cards, CHARX included)
// and the Knowledge page's import panel, which links to the conversation a chat became.
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import NewChatForm from '../src/components/chat/NewChatForm.vue'
import ImportPanel from '../src/components/knowledge/ImportPanel.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

let answer: unknown

beforeEach(() => {
  answer = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async () => new Response(JSON.stringify(answer), { status: 200, headers: { 'Content-Type': 'application/json' } })),
  )
})

afterEach(() => {
  vi.unstubAllGlobals()
})

function accepted(accept: string | undefined): string[] {
  return (accept ?? '').split(',').map((s) => s.trim())
}

async function choose(w: ReturnType<typeof mount>, testid: string, file: File): Promise<void> {
  const input = w.find(q(testid))
  Object.defineProperty(input.element, 'files', { value: [file], configurable: true })
  await input.trigger('change')
  await flushPromises()
}

describe('the new-chat form', () => {
  it('takes SillyTavern chats and cards, CHARX included', async () => {
    const w = mount(NewChatForm, { global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    expect(accepted(w.find(q('chat-import-file')).attributes('accept'))).toEqual(expect.arrayContaining(['.jsonl', '.json', '.png', '.charx']))
    answer = { conversation: { id: 'c7' }, kind: 'character', character_id: 'mira' }
    await choose(w, 'chat-import-file', new File(['PK'], 'Mira.charx'))
    expect(w.emitted('created')).toEqual([['c7']])
  })
})

describe('the knowledge import panel', () => {
  function mountPanel() {
    return mount(ImportPanel, { global: { plugins: [makeI18n('en')], stubs: { RouterLink: RouterLinkStub } } })
  }

  it('takes a SillyTavern chat and links to the conversation it became', async () => {
    const w = mountPanel()
    expect(accepted(w.find(q('import-file')).attributes('accept'))).toEqual(expect.arrayContaining(['.jsonl', '.json', '.png', '.charx', '.ctkbz']))
    answer = { kind: 'chat', filename: 'Seraphina.jsonl', created: [], character: null, character_file: null, conversation_id: 'c42', warnings: [] }
    await choose(w, 'import-file', new File(['{}\n'], 'Seraphina.jsonl'))
    expect(w.find(q('import-chat')).exists()).toBe(true)
    expect(w.findComponent(RouterLinkStub).props('to')).toEqual({ name: 'chat', params: { conversationId: 'c42' } })
  })

  it('shows no chat link for a file that made no conversation', async () => {
    const w = mountPanel()
    answer = { kind: 'world_info', filename: 'Eldoria.json', created: [{ kb_id: 'eldoria', displayName: 'Eldoria', entry_count: 3, scope: 'local' }], warnings: [] }
    await choose(w, 'import-file', new File(['{}'], 'Eldoria.json'))
    expect(w.find(q('import-report')).exists()).toBe(true)
    expect(w.find(q('import-chat')).exists()).toBe(false)
  })
})
