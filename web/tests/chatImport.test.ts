// Where a chat comes in from a file: the new-chat form (chats and cards, CHARX included)
// and the Knowledge page's import panel, which links to the conversation a chat became.
// A card that is a character here already asks first in both, with the same dialog.
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { routerKey } from 'vue-router'
import NewChatForm from '../src/components/chat/NewChatForm.vue'
import NewGroupForm from '../src/components/chat/NewGroupForm.vue'
import ImportPanel from '../src/components/knowledge/ImportPanel.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

let answer: unknown
let status = 200
// What each request sent: its URL and form (or JSON body).
let sent: { url: string; body: unknown }[] = []
const conflict = { sameness: 'changed', character_id: 'sera', name: 'Seraphina' }

beforeEach(() => {
  answer = []
  status = 200
  sent = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      sent.push({ url, body: init?.body })
      const now = status
      status = 200 // only the first answer is the conflict
      return new Response(JSON.stringify(answer), { status: now, headers: { 'Content-Type': 'application/json' } })
    }),
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

  it('asks about a card that is here already and chats with the one updated', async () => {
    const w = mount(NewChatForm, { global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    answer = { error: { message: 'already', problems: [] }, conflict }
    status = 409
    await choose(w, 'chat-import-file', new File(['{}'], 'Seraphina.png'))
    expect(w.find(q('card-conflict')).exists()).toBe(true)
    expect(w.emitted('created')).toBeUndefined()
    answer = { conversation: { id: 'c8' }, kind: 'character', character_id: 'sera' }
    await w.find(q('card-conflict-update')).trigger('click')
    await flushPromises()
    const last = sent[sent.length - 1]!
    expect((last.body as FormData).get('on_conflict')).toBe('update')
    expect(w.emitted('created')).toEqual([['c8']])
    expect(w.find(q('card-conflict')).exists()).toBe(false)
  })
})

describe('the new-group form', () => {
  it('asks about a member card here already; the very same card can be the one here', async () => {
    const w = mount(NewGroupForm, { global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    answer = { error: { message: 'already', problems: [] }, conflict: { ...conflict, sameness: 'identical' } }
    status = 409
    const files = [new File(['{"members":["Seraphina.png"]}'], '1.json'), new File([''], '1.jsonl'), new File(['PNG'], 'Seraphina.png')]
    const input = w.find(q('group-import-files'))
    Object.defineProperty(input.element, 'files', { value: files, configurable: true })
    await input.trigger('change')
    await flushPromises()
    const dialog = w.find(q('card-conflict'))
    expect(dialog.text()).toContain('Seraphina.png is the very card Seraphina was imported from')
    expect(w.find(q('card-conflict-open')).text()).toBe('Use the one here')
    answer = { conversation: { id: 'g1' }, messages: 1, siblings: 0, members: {}, warnings: [] }
    await w.find(q('card-conflict-open')).trigger('click')
    await flushPromises()
    const imports = sent.filter((r) => r.url === '/api/groups/import').map((r) => (r.body as FormData).get('on_conflict'))
    expect(imports).toEqual(['ask', 'update'])
    expect(w.emitted('created')).toEqual([['g1']])
  })
})

describe('the knowledge import panel', () => {
  function mountPanel() {
    return mount(ImportPanel, {
      global: { plugins: [makeI18n('en')], stubs: { RouterLink: RouterLinkStub }, provide: { [routerKey as symbol]: router } },
    })
  }
  const router = { push: vi.fn() }

  it('asks about a card that is here already; cancel imports nothing, open goes to it', async () => {
    const w = mountPanel()
    answer = { error: { message: 'already', problems: [] }, conflict: { ...conflict, sameness: 'identical' } }
    status = 409
    await choose(w, 'import-file', new File(['{}'], 'Seraphina.json'))
    expect(w.find(q('card-conflict')).attributes('data-sameness')).toBe('identical')
    expect(w.find(q('import-report')).exists()).toBe(false)
    expect(w.find(q('import-error')).exists()).toBe(false)
    await w.find(q('card-conflict-cancel')).trigger('click')
    expect(w.find(q('card-conflict')).exists()).toBe(false)
    expect(sent).toHaveLength(1)
    status = 409
    await choose(w, 'import-file', new File(['{}'], 'Seraphina.json'))
    await w.find(q('card-conflict-open')).trigger('click')
    expect(router.push).toHaveBeenCalledWith({ name: 'characters', params: { characterId: 'sera' } })
  })

  it('updates a changed card when asked to and says so', async () => {
    const w = mountPanel()
    answer = { error: { message: 'already', problems: [] }, conflict }
    status = 409
    await choose(w, 'import-file', new File(['{}'], 'Seraphina.json'))
    answer = { kind: 'character_card', filename: 'Seraphina.json', created: [], character: 'Seraphina', character_updated: true, warnings: [] }
    await w.find(q('card-conflict-update')).trigger('click')
    await flushPromises()
    expect((sent[1]!.body as FormData).get('on_conflict')).toBe('update')
    expect(w.find(q('import-character')).text()).toContain('Character updated from the card: Seraphina')
  })

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
