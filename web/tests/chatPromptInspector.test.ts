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
