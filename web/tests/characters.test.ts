// The character library's browser (search, tag filter, favourites, grid and list), the
// chat's persona picker and the new-chat form's faces, mounted with the real i18n messages.
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { CharacterItem } from '../src/api/characters'
import CharacterBrowser from '../src/components/characters/CharacterBrowser.vue'
import NewChatForm from '../src/components/chat/NewChatForm.vue'
import NewGroupForm from '../src/components/chat/NewGroupForm.vue'
import PersonaPicker from '../src/components/personas/PersonaPicker.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

function item(id: string, name: string, extra: Partial<CharacterItem> = {}): CharacterItem {
  return { id, name, description: '', avatar: null, tags: [], fav: false, creator: '', modified: 0, error: null, avatar_url: null, ...extra }
}

const LIBRARY = [
  item('sera', 'Seraphina', { tags: ['forest', 'guardian'], fav: true, avatar: 'sera.png', avatar_url: '/api/characters/sera/avatar?v=1' }),
  item('maren', 'Maren', { tags: ['sea'], creator: 'lighthouse folk' }),
  item('tom', 'Old Tom', { tags: ['sea', 'tavern'] }),
]

function mountBrowser() {
  return mount(CharacterBrowser, { props: { characters: LIBRARY, selected: null }, global: { plugins: [makeI18n('en')] } })
}

const names = (w: ReturnType<typeof mountBrowser>) => w.findAll(q('character-name')).map((n) => n.text())

describe('the character browser', () => {
  it('searches names, tags and creators', async () => {
    const w = mountBrowser()
    expect(names(w)).toEqual(['Seraphina', 'Maren', 'Old Tom'])
    await w.find(q('character-search')).setValue('lighthouse')
    expect(names(w)).toEqual(['Maren'])
    await w.find(q('character-search')).setValue('SEA tavern')
    expect(names(w)).toEqual(['Old Tom'])
  })

  it('filters by a tag and by favourites', async () => {
    const w = mountBrowser()
    const options = w.find(q('character-tag-filter')).findAll('option').map((o) => o.element.value)
    expect(options).toEqual(['', 'forest', 'guardian', 'sea', 'tavern'])
    await w.find(q('character-tag-filter')).setValue('sea')
    expect(names(w)).toEqual(['Maren', 'Old Tom'])
    await w.find(q('character-tag-filter')).setValue('')
    await w.find(q('character-fav-filter')).setValue(true)
    expect(names(w)).toEqual(['Seraphina'])
  })

  it('shows the avatar where there is one and the initial elsewhere', () => {
    const w = mountBrowser()
    const first = w.findAll(q('character-item'))[0]!
    expect(first.find('img').attributes('src')).toBe('/api/characters/sera/avatar?v=1')
    expect(w.findAll(q('character-item'))[1]!.find(q('avatar-initial')).text()).toBe('M')
  })

  it('switches between grid and list, opens and stars', async () => {
    const w = mountBrowser()
    expect(w.find(q('character-list')).attributes('data-view')).toBe('grid')
    await w.find(q('character-view-list')).trigger('click')
    expect(w.find(q('character-list')).attributes('data-view')).toBe('list')
    await w.findAll(q('character-item'))[1]!.trigger('click')
    expect(w.emitted('open')).toEqual([['maren']])
    await w.findAll(q('character-fav'))[0]!.trigger('click')
    expect(w.emitted('favourite')).toEqual([['sera', false]])
  })
})

describe('the persona picker', () => {
  beforeEach(() => {
    const list = {
      personas: [
        { id: 'ann', name: 'Ann', description: '', avatar_url: null, knowledge_base: null, version: 'a', is_default: true },
        { id: 'bob', name: 'Bob', description: '', avatar_url: null, knowledge_base: null, version: 'b', is_default: false },
      ],
      default_id: 'ann',
      problems: [],
    }
    vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify(list), { status: 200, headers: { 'Content-Type': 'application/json' } })))
  })

  afterEach(() => {
    vi.unstubAllGlobals()
  })

  it('offers the default persona by name and emits the chosen one', async () => {
    const w = mount(PersonaPicker, { props: { personaId: null }, global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    const select = w.find(q('persona-picker-select'))
    expect(select.findAll('option').map((o) => o.text())).toEqual(['The default persona (Ann)', 'Ann', 'Bob'])
    await select.setValue('bob')
    expect(w.emitted('change')).toEqual([['bob']])
    await select.setValue('')
    expect(w.emitted('change')?.[1]).toEqual([null])
  })
})

describe('the new-chat form', () => {
  const calls: { url: string; body: unknown }[] = []

  beforeEach(() => {
    calls.length = 0
    const answers: Record<string, unknown> = {
      '/api/characters': { characters: LIBRARY },
      '/api/presets/backgrounds': { backgrounds: [], problems: [] },
      '/api/personas': {
        personas: [
          { id: 'ann', name: 'Ann', description: '', avatar_url: null, knowledge_base: null, version: 'a', is_default: true },
          { id: 'bob', name: 'Bob', description: '', avatar_url: null, knowledge_base: null, version: 'b', is_default: false },
        ],
        default_id: 'ann',
        problems: [],
      },
      '/api/chats': { id: 'c1' },
    }
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        calls.push({ url, body: init?.body ? JSON.parse(String(init.body)) : undefined })
        return new Response(JSON.stringify(answers[url] ?? {}), { status: 200, headers: { 'Content-Type': 'application/json' } })
      }),
    )
  })

  afterEach(() => {
    vi.unstubAllGlobals()
  })

  it('shows faces and names, not descriptions, and starts the chat as the chosen persona', async () => {
    const w = mount(NewChatForm, { global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    const first = w.findAll(q('chat-character'))[0]!
    expect(first.text()).toContain('Seraphina')
    expect(first.find('img').attributes('src')).toBe('/api/characters/sera/avatar?v=1')
    await first.trigger('click')
    const persona = w.find(q('chat-new-persona'))
    expect(persona.findAll('option').map((o) => o.text())).toEqual(['The default persona (Ann)', 'Ann', 'Bob'])
    await persona.setValue('bob')
    await w.find('form').trigger('submit')
    await flushPromises()
    expect(calls.find((c) => c.url === '/api/chats')?.body).toEqual({ character_id: 'sera', persona_id: 'bob' })
    expect(w.emitted('created')).toEqual([['c1']])
  })

  it('the new-group form picks with the same faces, keeps the order picked and filters by tag', async () => {
    const w = mount(NewGroupForm, { global: { plugins: [makeI18n('en')] } })
    await flushPromises()
    const box = (id: string) => w.get(`${q('group-new-character')}[data-character-id="${id}"]`)
    expect(w.findAll(q('group-new-character'))).toHaveLength(3)
    expect(w.get('.chat-new img').attributes('src')).toBe('/api/characters/sera/avatar?v=1')
    await box('tom').setValue(true)
    await box('sera').setValue(true)
    expect(w.findAll('.char-picker-order').map((o) => o.text())).toEqual(['2', '', '1'])
    await w.get(q('group-new-character-filter')).setValue('sea')
    expect(w.findAll(q('group-new-character')).map((b) => b.attributes('data-character-id'))).toEqual(['maren', 'tom'])
    await w.get('form').trigger('submit')
    await flushPromises()
    expect(calls.find((c) => c.url === '/api/groups')?.body).toEqual({ members: ['tom', 'sera'], group: { activation_strategy: 'natural' } })
  })
})
