// The conversation's settings drawer: the form ↔ settings logic, and the chat pipeline
// picker with its SillyTavern preset import, mounted against a stubbed fetch.
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import SettingsDrawer from '../src/components/chat/SettingsDrawer.vue'
import ChatSection from '../src/components/ChatSection.vue'
import { makeI18n } from '../src/i18n'
import type { Conversation, ConversationSettings } from '../src/api/chat'
import { formFromConversation, formKey, settingsFromForm } from '../src/lib/chatSettings'
import { conversation } from './chatFixtures'
import { chatView, settingsView } from './fixtures'

type Call = { url: string; method: string; body: unknown }

let calls: Call[]
let respond: (call: Call) => { status: number; body: unknown }

const WORKFLOWS = {
  workflows: [
    { id: 'chat-default', name: 'Chat', description: '', nodeCount: 11, builtin: true },
    { id: 'my-story', name: 'My story', description: '', nodeCount: 12, builtin: false },
  ],
  broken: [],
}

beforeEach(() => {
  calls = []
  respond = (call) => (call.url === '/api/workflows' ? { status: 200, body: WORKFLOWS } : { status: 404, body: { detail: 'no' } })
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const body = init.body instanceof FormData ? Object.fromEntries(init.body.entries()) : init.body ? JSON.parse(init.body as string) : undefined
      const call = { url, method: init.method ?? 'GET', body }
      // The model field asks for the endpoint's list on its own: not one of the calls checked here.
      if (url === '/api/settings/models') return new Response(JSON.stringify({ models: [] }), { status: 200, headers: { 'Content-Type': 'application/json' } })
      calls.push(call)
      const answer = respond(call)
      return new Response(JSON.stringify(answer.body), { status: answer.status, headers: { 'Content-Type': 'application/json' } })
    }),
  )
})

afterEach(() => {
  vi.unstubAllGlobals()
  vi.restoreAllMocks()
})

const q = (id: string) => `[data-testid="${id}"]`

function settings(over: Partial<ConversationSettings> = {}): ConversationSettings {
  return { ...conversation().settings, ...over }
}

async function mountDrawer(c: Conversation = conversation()) {
  const w = mount(SettingsDrawer, {
    props: { conversation: c, busy: false },
    global: { plugins: [makeI18n('en')], stubs: { RouterLink: RouterLinkStub } },
  })
  await flushPromises()
  return w
}

function options(w: Awaited<ReturnType<typeof mountDrawer>>): string[][] {
  return w.findAll(`${q('chat-settings-pipeline')} option`).map((o) => [o.attributes('value') ?? '', o.text()])
}

describe('the settings form', () => {
  it('keeps what it does not show and saves what it edits', () => {
    const current = settings({ keyframe_every: 16, summaries: ['s1'], newer_key: 'kept', rag_scope: { mode: 'self_only', related_conversations: [], depth: 2 } })
    const form = formFromConversation(conversation({ settings: current }))
    expect(form.pipeline).toBe('chat-default')
    expect(form.rag_mode).toBe('self_only')
    form.pipeline = 'my-story'
    form.rag_fallback_threshold = 5
    form.rag_mode = 'related'
    form.related = ['c9', 'c2']
    const saved = settingsFromForm(form, current)
    expect(saved.pipeline).toBe('my-story')
    expect(saved.rag_fallback_threshold).toBe(5)
    expect(saved.rag_scope).toEqual({ mode: 'related', related_conversations: ['c9', 'c2'], depth: 2 })
    expect(saved.keyframe_every).toBe(16)
    expect(saved.summaries).toEqual(['s1'])
    expect(saved.newer_key).toBe('kept')
    expect('rag_mode' in saved || 'related' in saved || 'title' in saved).toBe(false)
  })

  it('falls back to a valid number when a number field is emptied or too small', () => {
    const current = settings({ rag_fallback_threshold: 4 })
    const form = formFromConversation(conversation({ settings: current }))
    for (const bad of ['', 0, -2] as unknown[]) {
      const saved = settingsFromForm({ ...form, rag_fallback_threshold: bad as number, authors_note_depth: bad as number }, current)
      expect(saved.rag_fallback_threshold).toBe(4)
      expect(saved.authors_note_depth).toBe(bad === 0 ? 0 : 4)
    }
    expect(settingsFromForm({ ...form, rag_fallback_threshold: 2.7 }, current).rag_fallback_threshold).toBe(2)
  })

  it('compares forms without caring about the order of ticked conversations', () => {
    const form = formFromConversation(conversation())
    expect(formKey({ ...form, related: ['b', 'a'] })).toBe(formKey({ ...form, related: ['a', 'b'] }))
  })
})

describe('the chat pipeline in the drawer', () => {
  it('lists the built-in pipeline and the project workflows, and links to the chosen one', async () => {
    const w = await mountDrawer()
    expect(options(w)).toEqual([
      // The built-in's name is the web app's catalogue's (builtinWorkflows.json), in the page's language.
      ['chat-default', 'Chat (default) (chat-default) (built-in)'],
      ['my-story', 'My story (my-story)'],
    ])
    expect((w.find(q('chat-settings-pipeline')).element as HTMLSelectElement).value).toBe('chat-default')
    const link = () => w.findComponent(RouterLinkStub)
    expect(link().props('to')).toEqual({ name: 'workflows', params: { workflowId: 'chat-default' } })
    await w.find(q('chat-settings-pipeline')).setValue('my-story')
    expect(link().props('to')).toEqual({ name: 'workflows', params: { workflowId: 'my-story' } })
  })

  it('saves the chosen pipeline with the rest of the form', async () => {
    const w = await mountDrawer()
    expect(w.find(q('chat-settings-save')).attributes('disabled')).toBeDefined()
    await w.find(q('chat-settings-pipeline')).setValue('my-story')
    await w.find(q('chat-settings-fallback')).setValue('6')
    await w.find(q('chat-settings-rag-mode')).setValue('related')
    await w.find('form').trigger('submit')
    const saved = w.emitted('save')?.[0]?.[0] as { title: string; settings: ConversationSettings }
    expect(saved.settings.pipeline).toBe('my-story')
    expect(saved.settings.rag_fallback_threshold).toBe(6)
    expect(saved.settings.rag_scope?.mode).toBe('related')
    expect(saved.title).toBe('Seraphina')
  })

  it('has no user name or persona text of its own: the persona picker says who the user is', async () => {
    const w = await mountDrawer(conversation({ settings: settings({ user_name: 'Old name', persona: 'Old text' }) }))
    expect(w.find(q('persona-picker')).exists()).toBe(true)
    expect(w.find(q('chat-settings-user')).exists()).toBe(false)
    expect(w.find(q('chat-settings-persona')).exists()).toBe(false)
    expect(w.text()).not.toContain('Your name')
    await w.find(q('chat-settings-note')).setValue('A new note')
    await w.find('form').trigger('submit')
    // A chat that had its own name and text (from before personas) keeps them as they were.
    const saved = w.emitted('save')?.[0]?.[0] as { settings: ConversationSettings }
    expect(saved.settings.authors_note).toBe('A new note')
    expect(saved.settings.user_name).toBe('Old name')
    expect(saved.settings.persona).toBe('Old text')
  })

  it('keeps a pipeline the project no longer has, marked', async () => {
    const w = await mountDrawer(conversation({ settings: settings({ pipeline: 'gone' }) }))
    expect(options(w).at(-1)).toEqual(['gone', 'gone (not found)'])
    expect((w.find(q('chat-settings-pipeline')).element as HTMLSelectElement).value).toBe('gone')
  })

  it('imports a SillyTavern preset and makes it the pipeline of this conversation at once', async () => {
    respond = (call) => {
      if (call.url === '/api/workflows/import-st-preset') return { status: 201, body: { id: 'st-default', name: 'Default', nodes: [], edges: [] } }
      if (call.url === '/api/workflows') {
        const imported = { id: 'st-default', name: 'Default', description: '', nodeCount: 11, builtin: false }
        return { status: 200, body: { ...WORKFLOWS, workflows: [...WORKFLOWS.workflows, imported] } }
      }
      return { status: 404, body: {} }
    }
    const w = await mountDrawer(conversation({ settings: settings({ authors_note: 'A tired knight' }) }))
    await w.find(q('chat-settings-note')).setValue('edited, not saved yet')
    const input = w.find(q('chat-settings-preset-file'))
    expect(input.attributes('accept')).toBe('.json,application/json')
    const file = new File(['{"prompts": []}'], 'Default.json', { type: 'application/json' })
    Object.defineProperty(input.element, 'files', { value: [file], configurable: true })
    await input.trigger('change')
    await flushPromises()

    const post = calls.find((c) => c.url === '/api/workflows/import-st-preset')!
    expect(post.method).toBe('POST')
    expect((post.body as Record<string, unknown>).file).toBeInstanceOf(File)
    expect(options(w).map(([id]) => id)).toContain('st-default')
    expect((w.find(q('chat-settings-pipeline')).element as HTMLSelectElement).value).toBe('st-default')
    // Only the pipeline is saved; the author's note edit waits for the Save button.
    const saved = w.emitted('save')?.[0]?.[0] as { settings: ConversationSettings }
    expect(saved.settings.pipeline).toBe('st-default')
    expect(saved.settings.authors_note).toBe('A tired knight')
    expect(w.find(q('chat-settings-preset-note')).text()).toContain('st-default')
  })

  it('asks before replacing a workflow the preset made before, and says why an import failed', async () => {
    let attempt = 0
    respond = (call) => {
      if (call.url === '/api/workflows') return { status: 200, body: WORKFLOWS }
      if (call.url !== '/api/workflows/import-st-preset') return { status: 404, body: { detail: 'no' } }
      attempt += 1
      if (attempt === 1) return { status: 409, body: { detail: "workflow 'st-default' already exists" } }
      if (attempt === 2) return { status: 201, body: { id: 'st-default', name: 'Default', nodes: [], edges: [] } }
      return { status: 422, body: { detail: 'Default.json: prompts: not a list', problems: [{ field: 'prompts', reason: 'not a list' }] } }
    }
    const confirm = vi.fn(() => true)
    vi.stubGlobal('confirm', confirm)
    const w = await mountDrawer()
    const input = w.find(q('chat-settings-preset-file'))
    const file = new File(['{}'], 'Default.json', { type: 'application/json' })
    Object.defineProperty(input.element, 'files', { value: [file], configurable: true })
    await input.trigger('change')
    await flushPromises()
    expect(confirm).toHaveBeenCalledTimes(1)
    const posts = calls.filter((c) => c.url === '/api/workflows/import-st-preset')
    expect(posts.map((c) => (c.body as Record<string, unknown>).overwrite)).toEqual([undefined, 'true'])
    expect(w.emitted('save')).toHaveLength(1)

    await input.trigger('change')
    await flushPromises()
    expect(w.find(q('chat-settings-pipeline-error')).text()).toContain('not a list')
    expect(w.emitted('save')).toHaveLength(1)
  })
})

describe('the context window of the models the chat uses (Settings page)', () => {
  for (const role of ['user_llm', 'agent_llm'] as const) {
    it(`is a field of ${role}, saved with the section and explained`, async () => {
      respond = () => ({ status: 200, body: settingsView() })
      const w = mount(ChatSection, { props: { role, initial: chatView({ context_window: null }) }, global: { plugins: [makeI18n('en')] } })
      const field = w.get(q(`settings-${role}-context_window`))
      expect((field.element as HTMLInputElement).value).toBe('')
      expect(w.text()).toContain('Tokens the model reads; the chat sends as much history as fits')
      await field.setValue('16384')
      await w.get('form').trigger('submit')
      await flushPromises()
      const sent = (calls.at(-1)!.body as Record<string, { context_window: unknown }>)[role]!
      expect(sent.context_window).toBe(16384)
    })
  }

  it('refuses a context window of zero next to the field, sending nothing', async () => {
    const w = mount(ChatSection, { props: { role: 'user_llm', initial: chatView() }, global: { plugins: [makeI18n('en')] } })
    await w.get(q('settings-user_llm-context_window')).setValue('0')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect(calls).toHaveLength(0)
    expect(w.get(q('settings-user_llm-error-context_window')).text()).toBe('Must be more than 0')
  })
})
