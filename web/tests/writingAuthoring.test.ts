// The Writing page's authoring extras against a fake server: a new entity, a plot
// thread's chapters, a meta document, adding a chapter, searching, deleting the book.
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { defineComponent, h, ref } from 'vue'
import { createMemoryHistory, createRouter, RouterView } from 'vue-router'
import type { BookTree, ResourceView } from '../src/api/writing'
import { makeI18n } from '../src/i18n'
import { type Connection, CONNECTION_KEY } from '../src/lib/connection'
import { routes } from '../src/router'
import { type Call, type Reply, useFakeFetch } from './fakeFetch'

const q = (id: string) => `[data-testid="${id}"]`

const TREE: BookTree = {
  manuscript: [
    {
      path: '/manuscript/arc-01',
      title: 'Arc 1',
      words: 10,
      chapters: [{ path: '/manuscript/arc-01/chapter-001', ordinal: 1, title: 'Ch 1', words: 10, scenes: [] }],
    },
  ],
  meta: [],
  entities: [{ path: '/entities/characters/lin', uri: 'viking://resources/b1/entities/characters/lin', kind: 'character', title: 'Lin' }],
  summaries: [],
  profiles: [],
}

const BOOK = { id: 'b1', title: 'Rain', language: 'en', stateVersion: 3, chapters: 1, words: 10 }

function view(path: string, kind: string, title: string, text = ''): ResourceView {
  return {
    path,
    uri: `viking://resources/b1${path}`,
    kind,
    title,
    aliases: [],
    attrs: {},
    levels: text ? { L1: { text, version: 1, asOfChapter: 0, tokens: 3, source: 'author' } } : {},
    history: [],
    relations: [],
    facts: [],
    stateVersion: 0,
  }
}

const server = useFakeFetch((url) => {
  if (url === '/api/writing/books/b1/tree') return { status: 200, body: TREE }
  if (/^\/api\/writing\/books\/b1\/(warnings|threads|outputs)/.test(url)) return { status: 200, body: [] }
  if (url === '/api/writing/books') return { status: 200, body: [BOOK] }
  return undefined
})

function respond(call: Call): Reply {
  if (call.method === 'PUT' && call.url === '/api/writing/books/b1/resource') {
    const body = call.body as { path: string; kind: string; title: string }
    return { status: 200, body: view(body.path, body.kind, body.title, 'saved') }
  }
  if (call.method === 'GET' && call.url.startsWith('/api/writing/books/b1/resource?')) {
    const path = new URLSearchParams(call.url.split('?')[1]).get('path')!
    if (path.startsWith('/meta/')) return { status: 404, body: { detail: 'not found' } }
    return { status: 200, body: view(path, 'character', 'Lin', 'A fisherman.') }
  }
  if (call.method === 'POST' && call.url === '/api/writing/books/b1/chapters') {
    return { status: 201, body: { path: '/manuscript/arc-01/chapter-002', ordinal: 2, title: 'Storm', words: 0, scenes: [] } }
  }
  if (call.method === 'POST' && call.url === '/api/writing/books/b1/search') {
    return { status: 200, body: [{ path: '/entities/characters/lin', uri: 'u', level: 'L1', score: 1, title: 'Lin' }] }
  }
  return { status: 200, body: {} }
}

const connection: Connection = {
  state: ref('connected'),
  message: ref(''),
  retryInSeconds: ref(0),
  start() {},
  stop() {},
  on: () => () => {},
  send() {},
}

async function mountPage() {
  server.respond = respond
  const router = createRouter({ history: createMemoryHistory(), routes })
  await router.push('/writing/b1')
  await router.isReady()
  const App = defineComponent({ render: () => h(RouterView) })
  const wrapper = mount(App, { global: { plugins: [router, makeI18n('en')], provide: { [CONNECTION_KEY as symbol]: connection } } })
  await flushPromises()
  await flushPromises()
  return { wrapper, router }
}

afterEach(() => vi.restoreAllMocks())

describe('authoring the book', () => {
  it('creates a character with its aliases and L1 description at a path made from its name', async () => {
    const { wrapper } = await mountPage()
    await wrapper.get(q('writing-tab-entities')).trigger('click')
    await wrapper.get(q('entity-new')).trigger('click')
    await wrapper.get(q('entity-title')).setValue('Wu Yan')
    await wrapper.get(q('entity-aliases')).setValue('Yan, the smith')
    await wrapper.get(q('entity-text')).setValue('A smith by the harbor.')
    await wrapper.get(q('entity-create')).trigger('submit')
    await flushPromises()
    const put = server.calls.find((c) => c.method === 'PUT')
    expect(put?.body).toEqual({
      path: '/entities/characters/wu-yan',
      kind: 'character',
      title: 'Wu Yan',
      aliases: ['Yan', 'the smith'],
      level: 'L1',
      text: 'A smith by the harbor.',
    })
    expect(wrapper.get(q('resource-viewer')).attributes('data-path')).toBe('/entities/characters/wu-yan')
  })

  it('creates a plot thread with the chapter it is planted in and the one it is due by', async () => {
    const { wrapper } = await mountPage()
    await wrapper.get(q('writing-tab-entities')).trigger('click')
    await wrapper.get(q('entity-new')).trigger('click')
    await wrapper.get(q('entity-kind')).setValue('plot-thread')
    await wrapper.get(q('entity-title')).setValue('The Ring')
    await wrapper.get(q('entity-planted')).setValue('1')
    await wrapper.get(q('entity-due')).setValue('12')
    await wrapper.get(q('entity-create')).trigger('submit')
    await flushPromises()
    const put = server.calls.find((c) => c.method === 'PUT')
    expect(put?.body).toMatchObject({ path: '/entities/plot-threads/the-ring', kind: 'plot-thread', attrs: { planted: 1, due: 12, paidOff: null } })
  })

  it('writes a meta document not written yet as a new resource', async () => {
    const { wrapper } = await mountPage()
    await wrapper.get(q('writing-tab-meta')).trigger('click')
    const items = wrapper.findAll(q('meta-item'))
    expect(items.map((i) => i.attributes('data-path'))).toEqual(['/meta/outline', '/meta/style-guide', '/meta/world-rules'])
    await items[0]!.trigger('click')
    await flushPromises()
    await wrapper.get(q('resource-edit')).trigger('click')
    await wrapper.get(q('resource-text')).setValue('Part one: the storm.')
    await wrapper.get(q('resource-save')).trigger('submit')
    await flushPromises()
    const put = server.calls.find((c) => c.method === 'PUT')
    expect(put?.body).toEqual({ path: '/meta/outline', kind: 'meta', title: 'Outline', level: 'L2', text: 'Part one: the storm.' })
  })

  it('adds a chapter with the title given', async () => {
    const { wrapper } = await mountPage()
    await wrapper.get(q('chapter-add-title')).setValue('Storm')
    await wrapper.get(q('chapter-add')).trigger('submit')
    await flushPromises()
    expect(server.calls.find((c) => c.method === 'POST' && c.url.endsWith('/chapters'))?.body).toEqual({ title: 'Storm' })
  })

  it('opens a search hit in its tab at the level it was found in', async () => {
    const { wrapper } = await mountPage()
    await wrapper.get(q('writing-search')).setValue('fisherman')
    await wrapper.get(q('writing-search-go')).trigger('submit')
    await flushPromises()
    expect(server.calls.find((c) => c.url.endsWith('/search'))?.body).toEqual({ query: 'fisherman', topK: 20 })
    const hit = wrapper.get(q('search-hit'))
    expect(hit.attributes('data-level')).toBe('L1')
    await hit.trigger('click')
    await flushPromises()
    expect(wrapper.get(q('resource-viewer')).attributes('data-path')).toBe('/entities/characters/lin')
    expect(wrapper.get(q('profile-text')).text()).toBe('A fisherman.')
  })

  it('deletes the book only when the author confirms', async () => {
    const { wrapper, router } = await mountPage()
    const confirm = vi.spyOn(window, 'confirm').mockReturnValueOnce(false).mockReturnValueOnce(true)
    await wrapper.get(q('writing-delete-book')).trigger('click')
    await flushPromises()
    expect(server.calls.some((c) => c.method === 'DELETE')).toBe(false)
    await wrapper.get(q('writing-delete-book')).trigger('click')
    await flushPromises()
    expect(confirm).toHaveBeenCalledTimes(2)
    expect(server.calls.filter((c) => c.method === 'DELETE').map((c) => c.url)).toEqual(['/api/writing/books/b1'])
    expect(router.currentRoute.value.params.bookId ?? '').toBe('')
  })
})
