import { flushPromises, mount, type VueWrapper } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { KnowledgeBaseSummary } from '../src/api/types'
import KnowledgeBasePicker from '../src/components/workflow/KnowledgeBasePicker.vue'
import NodeConfigForm from '../src/components/workflow/NodeConfigForm.vue'
import { makeI18n } from '../src/i18n'
import { findBases, readValues } from '../src/lib/knowledgeBasePicker'

function kb(over: Partial<KnowledgeBaseSummary> & { kb_id: string }): KnowledgeBaseSummary {
  return {
    displayName: over.kb_id,
    description: '',
    scope: 'local',
    referenced: false,
    reference_ids: [],
    aliases: [],
    folder: `/kb/${over.kb_id}`,
    entry_count: 0,
    total_tokens: 0,
    embedding_model_id: null,
    problems: [],
    enabled: true,
    global_lore: false,
    ...over,
  }
}

// In the server's order: referenced KBs first (project.json order), then the other globals.
const LOCAL = kb({ kb_id: 'kb_1', displayName: 'Local Lore', referenced: true, reference_ids: ['lore'], aliases: ['Lore'], entry_count: 3 })
const SHARED = kb({ kb_id: 'kb_2', displayName: 'Shared', scope: 'global', referenced: true, reference_ids: ['kb_Shared'], entry_count: 1 })
const ATLAS = kb({ kb_id: 'kb_3', displayName: 'Atlas', scope: 'global', entry_count: 7 })
const MYTHS = kb({ kb_id: 'kb_4', displayName: 'Myths', scope: 'global' })
const ATLAS_REFERENCED = { ...ATLAS, referenced: true, reference_ids: ['kb_Atlas'] }

type Call = { url: string; method: string }
let calls: Call[]
let respond: (call: Call) => { status: number; body: unknown }

function listBody(bases: KnowledgeBaseSummary[]) {
  return { project: { root: '/p', name: 'p' }, bases, problems: [] }
}

beforeEach(() => {
  calls = []
  respond = (call) =>
    call.url.endsWith('/reference')
      ? { status: 200, body: ATLAS_REFERENCED }
      : { status: 200, body: listBody([LOCAL, SHARED, ATLAS, MYTHS]) }
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const call = { url, method: init.method ?? 'GET' }
      calls.push(call)
      const { status, body } = respond(call)
      return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
    }),
  )
})

afterEach(() => {
  vi.unstubAllGlobals()
})

/** The picker with its value bound like v-model, so each change shows in the next render. */
async function mountPicker(modelValue: unknown): Promise<VueWrapper> {
  const wrapper: VueWrapper = mount(KnowledgeBasePicker, {
    props: {
      modelValue,
      inputId: 'cfg-kb',
      testid: 'wf-config-knowledge_bases',
      'onUpdate:modelValue': (value: string[]) => wrapper.setProps({ modelValue: value }),
    },
    global: { plugins: [makeI18n('en')] },
  })
  await flushPromises()
  return wrapper
}

const q = (id: string) => `[data-testid="${id}"]`

function optionIds(w: VueWrapper, list: string): string[] {
  return w.findAll(`${q(list)} input[type="checkbox"]`).map((i) => i.attributes('data-testid')!.replace('kb-picker-option-', ''))
}

function checked(w: VueWrapper, kbId: string): boolean {
  return (w.get(q(`kb-picker-option-${kbId}`)).element as HTMLInputElement).checked
}

function emitted(w: VueWrapper): unknown[] {
  return (w.emitted('update:modelValue') ?? []).map((args) => args[0])
}

describe('knowledge base picker', () => {
  it("lists the project's KBs first and the other globals behind a disclosure", async () => {
    const w = await mountPicker([])
    expect(calls).toEqual([{ url: '/api/knowledge/bases', method: 'GET' }])
    expect(optionIds(w, 'kb-picker-project')).toEqual(['kb_1', 'kb_2'])
    expect(w.get(q('kb-picker-project')).text()).toContain('Local Lore')
    expect(w.get(q('kb-picker-project')).text()).toContain('3 entries')
    expect(w.get(q('kb-picker-project')).text()).toContain('1 entry')
    expect(w.find(q('kb-picker-global')).exists()).toBe(false)

    const browse = w.get(q('kb-picker-browse'))
    expect(browse.attributes('aria-expanded')).toBe('false')
    expect(browse.text()).toContain('(2)')
    await browse.trigger('click')
    expect(browse.attributes('aria-expanded')).toBe('true')
    expect(w.find(`#${browse.attributes('aria-controls')}`).exists()).toBe(true)
    expect(optionIds(w, 'kb-picker-global')).toEqual(['kb_3', 'kb_4'])
    expect(w.text()).toContain('every knowledge base of the project')
  })

  it('is a labelled group described by the "empty means all" hint', async () => {
    const w = await mountPicker([])
    const group = w.get(q('wf-config-knowledge_bases'))
    expect(group.attributes('role')).toBe('group')
    expect(group.attributes('aria-label')).toBe('Knowledge bases')
    expect(w.get(`#${group.attributes('aria-describedby')}`).text()).toContain('None ticked')
  })

  it('ticks the KBs the values name, by reference id, kb_id, alias or name', async () => {
    const w = await mountPicker(['lore', 'kb_2'])
    expect([checked(w, 'kb_1'), checked(w, 'kb_2')]).toEqual([true, true])
    const byName = await mountPicker(['Lore'])
    expect([checked(byName, 'kb_1'), checked(byName, 'kb_2')]).toEqual([true, false])
  })

  it('stores the reference id of a project KB and unticks every value naming it', async () => {
    const w = await mountPicker(['kb_1', 'hand_written'])
    await w.get(q('kb-picker-option-kb_2')).setValue(true)
    expect(emitted(w).at(-1)).toEqual(['kb_1', 'hand_written', 'kb_Shared'])
    await w.get(q('kb-picker-option-kb_1')).setValue(false)
    expect(emitted(w).at(-1)).toEqual(['hand_written', 'kb_Shared'])
  })

  it('keeps values that match no KB as chips marked "not found" until removed', async () => {
    const w = await mountPicker(['ghost', 'lore', ' '])
    const chips = w.findAll(q('kb-picker-chip'))
    expect(chips).toHaveLength(1)
    expect(chips[0]!.text()).toContain('ghost')
    expect(chips[0]!.text()).toContain('not found')
    const remove = chips[0]!.get('button')
    expect(remove.attributes('aria-label')).toBe('Remove ghost')
    await remove.trigger('click')
    expect(emitted(w).at(-1)).toEqual(['lore'])
    expect(w.findAll(q('kb-picker-chip'))).toHaveLength(0)
  })

  it('marks a value naming several KBs as ambiguous instead of ticking one', async () => {
    respond = () => ({
      status: 200,
      body: listBody([kb({ kb_id: 'a', displayName: 'Twin', referenced: true, reference_ids: ['r_a'] }), kb({ kb_id: 'b', displayName: 'Twin', scope: 'global' })]),
    })
    const w = await mountPicker(['Twin'])
    expect(checked(w, 'a')).toBe(false)
    expect(w.get(q('kb-picker-chip')).text()).toContain('names several knowledge bases')
  })

  it('references a global KB when it is ticked and stores the new reference id', async () => {
    const w = await mountPicker(['lore'])
    await w.get(q('kb-picker-browse')).trigger('click')
    await w.get(q('kb-picker-option-kb_3')).setValue(true)
    await flushPromises()
    expect(calls.at(-1)).toEqual({ url: '/api/knowledge/bases/kb_3/reference', method: 'POST' })
    expect(emitted(w)).toEqual([['lore', 'kb_Atlas']])
    // Now one of the project's KBs.
    expect(optionIds(w, 'kb-picker-project')).toEqual(['kb_1', 'kb_2', 'kb_3'])
    expect(optionIds(w, 'kb-picker-global')).toEqual(['kb_4'])
    expect(checked(w, 'kb_3')).toBe(true)
  })

  it('says why a global KB could not be added and leaves it unticked', async () => {
    respond = (call) =>
      call.url.endsWith('/reference')
        ? { status: 422, body: { error: { message: 'project.json is not valid', problems: [] } } }
        : { status: 200, body: listBody([LOCAL, ATLAS]) }
    const w = await mountPicker([])
    await w.get(q('kb-picker-browse')).trigger('click')
    await w.get(q('kb-picker-option-kb_3')).setValue(true)
    await flushPromises()
    expect(w.get('[role="alert"]').text()).toContain('Could not add Atlas to the project: project.json is not valid')
    expect(checked(w, 'kb_3')).toBe(false)
    expect(emitted(w)).toEqual([])
  })

  it('opens the disclosure when a value names a global KB the project does not reference', async () => {
    const w = await mountPicker(['kb_4'])
    expect(w.get(q('kb-picker-browse')).attributes('aria-expanded')).toBe('true')
    expect(checked(w, 'kb_4')).toBe(true)
    await w.get(q('kb-picker-option-kb_4')).setValue(false)
    expect(emitted(w).at(-1)).toEqual([])
    expect(calls.filter((c) => c.method === 'POST')).toEqual([])
  })

  it('shows the values unmarked and offers a retry when the list does not load', async () => {
    let fail = true
    respond = () => (fail ? { status: 500, body: { error: { message: 'boom', problems: [] } } } : { status: 200, body: listBody([LOCAL]) })
    const w = await mountPicker(['lore'])
    expect(w.get('[role="alert"]').text()).toContain('boom')
    expect(w.get(q('kb-picker-chip')).text()).not.toContain('not found')
    fail = false
    await w.get(q('kb-picker-retry')).trigger('click')
    await flushPromises()
    expect(checked(w, 'kb_1')).toBe(true)
    expect(w.find(q('kb-picker-chip')).exists()).toBe(false)
  })

  it('is the editor a node config field with the "kb" widget gets', async () => {
    const schema = {
      type: 'object',
      properties: { knowledge_bases: { type: 'array', items: { type: 'string' }, 'x-widget': 'kb' } },
    }
    const w = mount(NodeConfigForm, {
      props: { nodeId: 'n1', schema, config: {}, problems: [], workflows: [], workflowId: 'wf', connected: new Set<string>() },
      global: { plugins: [makeI18n('en')] },
    })
    await flushPromises()
    await w.get(q('kb-picker-option-kb_1')).setValue(true)
    expect(w.emitted('config')).toEqual([['knowledge_bases', ['lore']]])
  })
})

describe('values', () => {
  it('are read as the node reads them: trimmed strings, blanks left out', () => {
    expect(readValues([' lore ', '', 'x'])).toEqual(['lore', 'x'])
    expect(readValues('lore')).toEqual(['lore'])
    expect(readValues(null)).toEqual([])
  })

  it('find KBs tier by tier, stopping at the first tier that matches', () => {
    const named = kb({ kb_id: 'lore', displayName: 'Other' })
    expect(findBases([LOCAL, named], 'lore')).toEqual([LOCAL])
    expect(findBases([LOCAL, named], 'kb_1')).toEqual([LOCAL])
    expect(findBases([LOCAL, named], 'Other')).toEqual([named])
    expect(findBases([LOCAL, named], 'nothing')).toEqual([])
  })
})
