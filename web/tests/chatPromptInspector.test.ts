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

describe('the prompt inspector and chat scripts', () => {
  const inspection: PromptInspection = {
    blocks: [
      { id: 'main', kind: 'system', role: 'system', content: 'Be kind.', tokens: 3, source: { kind: 'preset', label: 'Main prompt' }, edited_by: ['mood.lua'] },
      { id: 'script:mood.lua:1', kind: 'custom', role: 'system', content: 'Mira is calm.', tokens: 4, source: { kind: 'script', id: 'mood.lua', label: 'Script: mood.lua' } },
      { id: 'msg:a', kind: 'history', role: 'user', content: 'Hi', tokens: 2, source: { kind: 'message', label: 'Message 1 (Ann)' } },
    ],
    lore: [],
    cut: [{ id: 'card:scenario', kind: 'scenario', tokens: 9, reason: 'removed by script mood.lua' }],
    budget: 100,
    messages: [],
    scripts: [
      {
        name: 'mood.lua',
        language: 'lua',
        duration_ms: 2.4,
        added: ['script:mood.lua:1'],
        removed: ['card:scenario'],
        edited: ['main'],
        variables: { mood: 'calm', visits: 3 },
        output: 'mood is calm\n',
      },
      { name: 'n3 (inline)', language: 'javascript', duration_ms: 0.8, added: [], removed: [], edited: [], variables: {}, output: '' },
    ],
  }

  async function mountIn(locale: 'en' | 'zh', body: PromptInspection = inspection) {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
    const w = mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, global: { plugins: [makeI18n(locale)] } })
    await flushPromises()
    return w
  }

  it('names a block a script added as from that script, and marks a block a script changed', async () => {
    const w = await mountIn('en')
    const blocks = w.findAll(q('chat-prompt-block'))
    expect(blocks.map((b) => b.get(q('chat-prompt-source')).text())).toEqual(['Main prompt', 'Script: mood.lua', 'Message 1 (Ann)'])
    const edited = blocks[0]!.get(q('chat-prompt-edited'))
    expect(edited.text()).toBe('edited')
    expect(edited.attributes('title')).toBe('Changed by mood.lua')
    expect(blocks[1]!.find(q('chat-prompt-edited')).exists()).toBe(false)
    // A block a script removed is in the cut list with the script's reason.
    expect(w.get(q('chat-cut')).text()).toContain('removed by script mood.lua')
  })

  it('says what each script did in a Scripts section', async () => {
    const w = await mountIn('en')
    expect(w.text()).toContain('Scripts (2)')
    const [mood, inline] = w.findAll(q('chat-prompt-script'))
    expect(mood!.attributes('data-name')).toBe('mood.lua')
    expect(mood!.get(q('chat-prompt-script-summary')).text()).toBe('added 1, removed 1, changed 1, set 2 variables')
    expect(mood!.get(q('chat-prompt-script-added')).text()).toBe('script:mood.lua:1')
    expect(mood!.get(q('chat-prompt-script-removed')).text()).toBe('card:scenario')
    expect(mood!.get(q('chat-prompt-script-edited')).text()).toBe('main')
    expect(mood!.findAll(`${q('chat-prompt-script-variables')} code`).map((c) => c.text())).toEqual(['mood = "calm"', 'visits = 3'])
    expect(mood!.get(q('chat-prompt-script-output')).text()).toBe('mood is calm')
    expect(mood!.text()).toContain('2 ms')
    expect(inline!.get(q('chat-prompt-script-summary')).text()).toBe('added 0, removed 0, changed 0, set 0 variables')
    expect(inline!.find(q('chat-prompt-script-output')).exists()).toBe(false)
  })

  it('has no Scripts section when no script ran, and speaks Chinese', async () => {
    const none = await mountIn('en', { ...inspection, scripts: undefined })
    expect(none.find(q('chat-prompt-scripts')).exists()).toBe(false)
    const zh = await mountIn('zh')
    expect(zh.text()).toContain('脚本（2）')
    expect(zh.findAll(q('chat-prompt-source'))[1]!.text()).toBe('脚本：mood.lua')
  })
})

describe('the prompt inspector on a text-completion API', () => {
  const text = '<|im_start|>system\nMira.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
  const at = (part: string) => text.indexOf(part)
  const inspection: PromptInspection = {
    blocks: [{ id: 'msg:a', kind: 'history', role: 'user', content: 'Hi', tokens: 2, source: { kind: 'message', label: 'Message 1 (Ann)' } }],
    lore: [],
    cut: [],
    budget: 100,
    messages: [{ role: 'user', content: 'Hi' }],
    text_prompt: {
      text,
      stop: ['<|im_end|>'],
      instruct: 'ChatML',
      context: 'ChatML',
      pieces: [
        { start: 0, end: 19, kind: 'sequence', source: 'story string prefix', block: null },
        { start: 19, end: 24, kind: 'story_string', source: 'Card: description', block: 'charDescription' },
        // 24..52 is left to no piece: it still shows, as one plain span.
        { start: at('Hi'), end: at('Hi') + 2, kind: 'message', source: 'Message 1 (Ann)', block: 'msg:a' },
      ],
    },
  }

  it('shows the exact text sent, each block-made part labelled with its source', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify(inspection), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
    const w = mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    expect(w.find(q('chat-prompt-text-body')).text()).toBe(text.trim())
    const pieces = w.findAll(q('chat-prompt-text-piece'))
    expect(pieces.map((p) => p.element.textContent).join('')).toBe(text)
    const labelled = pieces.filter((p) => p.attributes('data-block'))
    expect(labelled.map((p) => [p.text(), p.attributes('title')])).toEqual([
      ['Mira.', 'Card: description'],
      ['Hi', 'Message 1 (Ann)'],
    ])
    expect(pieces[0]!.classes()).toContain('chat-text-template')
    expect(w.find(q('chat-prompt-text')).text()).toContain('instruct: ChatML')
    expect(w.find(q('chat-prompt-stop')).text()).toContain('"<|im_end|>"')
  })
})

describe('the prompt inspector and EJS templates', () => {
  const inspection: PromptInspection = {
    blocks: [],
    lore: [
      { kb_id: 'kb', entry_id: 'guide', title: '阶段指导', activated: true, tokens: 60, kb_name: 'Book', template: true, template_problem: null },
      { kb_id: 'kb', entry_id: 'bad', title: 'Broken', activated: true, tokens: 9, kb_name: 'Book', template: true,
        template_problem: { name: 'lore Broken', origin: 'lore', label: 'Broken', line: 2, message: "TypeError: cannot read property 'x' of null", limit: null } },
      { kb_id: 'kb', entry_id: 'loop', title: 'Loop', activated: true, tokens: 5, kb_name: 'Book', template: true,
        template_problem: { name: 'lore Loop', origin: 'lore', label: 'Loop', line: null, message: 'stopped by the time limit (500 ms)', limit: 'time' } },
      { kb_id: 'kb', entry_id: 'low', title: 'Low', activated: false, tokens: 4, kb_name: 'Book',
        reasons: [{ rule: 'template', detail: 'its @@if condition is false', outcome: 'dropped', term: 'template_if_false', values: {} }] },
    ],
    cut: [],
    budget: 100,
    messages: [],
    templates: [
      { name: 'lore Broken', origin: 'lore', label: 'Broken', line: 2, message: "TypeError: cannot read property 'x' of null", limit: null },
      { name: 'card description', origin: 'card', label: 'description', line: 1, message: 'SyntaxError: unexpected token', limit: null },
    ],
  }

  function mountIn(locale: 'en' | 'zh') {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(JSON.stringify(inspection), { status: 200, headers: { 'Content-Type': 'application/json' } })),
    )
    return mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, global: { plugins: [makeI18n(locale)] } })
  }

  it('lists the templates left as written, each with where it is', async () => {
    const w = mountIn('en')
    await flushPromises()
    const items = w.findAll(q('chat-prompt-template')).map((i) => i.text())
    expect(items).toEqual([
      "lore Broken · template left as written, line 2: TypeError: cannot read property 'x' of null",
      'card field description · template left as written, line 1: SyntaxError: unexpected token',
    ])
    const zh = mountIn('zh')
    await flushPromises()
    expect(zh.find(q('chat-prompt-template')).text()).toContain('世界书条目 Broken')
  })

  it('marks template entries and says which line left one as written', async () => {
    const w = mountIn('en')
    await flushPromises()
    expect(w.findAll(q('chat-lore-template'))).toHaveLength(3)
    const problems = w.findAll(q('chat-lore-template-problem')).map((p) => p.text())
    expect(problems).toEqual([
      "template left as written, line 2: TypeError: cannot read property 'x' of null",
      'template left as written: stopped by the time limit',
    ])
    expect(w.find(q('chat-lore-dropped')).text()).toContain('its if condition (the if decorator) is false')
  })

  it('says it in Chinese', async () => {
    const w = mountIn('zh')
    await flushPromises()
    expect(w.find(q('chat-lore-template')).text()).toBe('EJS 模板')
    expect(w.find(q('chat-lore-template-problem')).text()).toContain('第 2 行')
    expect(w.find(q('chat-lore-dropped')).text()).toContain('其 if 条件（if 装饰器）为假')
  })
})
