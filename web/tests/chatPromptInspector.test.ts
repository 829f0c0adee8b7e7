// The prompt inspector shows a block a custom pipeline made without a source as such.
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, describe, expect, it, vi } from 'vitest'
import PromptInspector from '../src/components/chat/PromptInspector.vue'
import { makeI18n } from '../src/i18n'
import type { PromptInspection } from '../src/api/chat'

const q = (id: string) => `[data-testid="${id}"]`

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('the prompt inspector', () => {
  it('names where each block came from, and says so when a block does not', async () => {
    const inspection: PromptInspection = {
      blocks: [
        { id: 'main', kind: 'system', role: 'system', content: 'Be kind.', tokens: 3, source: { kind: 'preset', label: 'Main prompt' } },
        { id: 'card', kind: 'character', role: 'system', content: 'Mira.', tokens: 2, source: { kind: 'card', field: 'description', id: 'mira' } },
        { id: 'custom', kind: 'custom', content: 'From a pipeline.', tokens: 4, source: null },
        { id: 'bare', kind: 'custom', content: 'No source at all.' },
      ],
      lore: [],
      cut: [],
      budget: 100,
      messages: [],
    }
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify(inspection), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
    const w = mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    expect(w.find(q('chat-prompt-error')).exists()).toBe(false)
    const sources = w.findAll(q('chat-prompt-source'))
    expect(sources.map((s) => s.text())).toEqual(['Main prompt', 'card · description · mira', '(source not given)', '(source not given)'])
    expect(sources[2]!.classes()).toContain('chat-prompt-source-none')
    expect(sources[0]!.classes()).not.toContain('chat-prompt-source-none')
    expect(w.find(q('chat-prompt-total')).text()).toBe('9 tokens of a 100-token budget')
  })
})

describe('the prompt inspector lore', () => {
  const inspection: PromptInspection = {
    blocks: [{ id: 'msg:a', kind: 'history', role: 'user', content: 'Hi', tokens: 2, source: { kind: 'message', label: 'Message 1 (Ann)' } }],
    lore: [
      { kb_id: 'kb-2', entry_id: 'tower', title: 'Tower', activated: true, tokens: 12, kb_name: 'Eldoria', scope: 'character', placement: 'before_character' },
      { kb_id: 'kb-2', entry_id: 'moat', title: 'Moat', activated: false, tokens: 40, kb_name: 'Eldoria', reasons: [{ rule: 'probability', detail: 'rolled 80', outcome: 'dropped' }] },
      { kb_id: 'kb-9', entry_id: 'gate', title: 'Gate', activated: true, tokens: 30, reasons: [{ rule: 'token_budget', detail: 'cut', outcome: 'dropped' }] },
    ],
    cut: [{ id: 'lore:kb-9/gate', kind: 'lore', tokens: 30, reason: 'budget' }],
    budget: 100,
    messages: [{ role: 'user', content: 'Hi' }],
  }

  function mountIn(locale: 'en' | 'zh') {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify(inspection), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
    return mount(PromptInspector, {
      props: { conversationId: 'c1', messageId: 'm1', speakers: { names: { user: 'Ann', assistant: 'Mira' }, avatars: {} } },
      global: { plugins: [makeI18n(locale)] },
    })
  }

  it('puts what went in first by KB name, and says what the left-out entries needed', async () => {
    const w = mountIn('en')
    await flushPromises()
    const groups = w.findAll(q('chat-lore-group'))
    expect(groups.map((g) => g.find(q('chat-lore-kb')).text())).toEqual(['Eldoria · character', 'Eldoria', 'kb-9'])
    expect(groups[0]!.findAll(q('chat-lore')).map((l) => l.attributes('data-activated'))).toEqual(['true'])
    const dropped = w.find(q('chat-lore-dropped'))
    expect(dropped.find('summary').text()).toBe('Lore left out (2)')
    expect(dropped.text()).toContain('needed 40 tokens')
    expect(dropped.find('[data-cut="true"]').text()).toContain('cut by the budget')
    expect(w.find(q('chat-prompt-message-speaker')).text()).toBe('Ann')
  })

  it('is in Chinese with one word for token', async () => {
    const w = mountIn('zh')
    await flushPromises()
    expect(w.find(q('chat-prompt-total')).text()).toBe('2 词元，预算 100 词元')
    expect(w.find(q('chat-lore-dropped')).text()).toContain('需要 40 词元')
    // Labels only: rule codes and ids (<code>) are the server's data.
    const labels = w.findAll('h3, summary, .chat-hint, .chat-mark').map((e) => e.text())
    expect(labels.join(' ')).not.toMatch(/token/i)
  })
})
