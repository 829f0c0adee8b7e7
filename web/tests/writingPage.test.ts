// The Writing page against a fake server (fetch) and a fake WebSocket: writing the next
// chapter with the chapter workflow, keeping it, and following its curation.
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import { defineComponent, h } from 'vue'
import { createMemoryHistory, createRouter, RouterView } from 'vue-router'
import type { BookTree } from '../src/api/writing'
import { makeI18n } from '../src/i18n'
import { CONNECTION_KEY } from '../src/lib/connection'
import { routes } from '../src/router'
import { type Call, type Reply, useFakeFetch } from './fakeFetch'
import { fakeConnection } from './fakeConnection'

const q = (id: string) => `[data-testid="${id}"]`

const TREE: BookTree = {
  manuscript: [
    {
      path: '/manuscript/arc-01',
      title: 'Arc 1',
      words: 30,
      chapters: [1, 2, 3].map((n) => ({ path: `/manuscript/arc-01/chapter-00${n}`, ordinal: n, title: `Ch ${n}`, words: 10, scenes: [] })),
    },
  ],
  meta: [],
  entities: [{ path: '/entities/characters/lin', uri: 'viking://resources/b1/entities/characters/lin', kind: 'character', title: 'Lin' }],
  summaries: [],
  profiles: [],
}

const PREVIEW = {
  format: 'markdown',
  title: 'Rain',
  chapters: [
    { title: 'One', text: 'Lin waits.', words: 2 },
    { title: 'Notes', text: 'not a chapter', words: 3 },
    { title: 'Two', text: 'Wu arrives.', words: 2 },
  ],
}

// The lookups every test makes (the book list is read with GET only, answered by `base`).
const server = useFakeFetch((url) => {
  if (/^\/api\/writing\/books\/b\d\/tree$/.test(url)) return { status: 200, body: TREE }
  if (/^\/api\/writing\/books\/b\d\/(warnings|threads)/.test(url)) return { status: 200, body: [] }
  if (url === '/api/writing/import/preview') return { status: 200, body: PREVIEW }
  return undefined
})

const BOOK = { id: 'b1', title: 'Rain', language: 'en', stateVersion: 3, chapters: 3, words: 30 }

function base(call: Call): Reply {
  if (call.url === '/api/writing/books' && call.method === 'GET') return { status: 200, body: [BOOK] }
  if (call.url === '/api/writing/books' && call.method === 'POST') return { status: 200, body: { ...BOOK, id: 'b2', title: (call.body as { title: string }).title } }
  if (call.url === '/api/writing/books/b1/chapter-workflow') return { status: 200, body: { workflowId: 'writing-chapter' } }
  if (call.url.endsWith('/outputs')) return { status: 200, body: [] }
  if (call.url.endsWith('/import')) return { status: 200, body: { tree: TREE, curation: [] } }
  return { status: 200, body: {} }
}

async function mountPage(path = '/writing/b1', respond: (call: Call) => Reply = base) {
  server.respond = respond
  const router = createRouter({ history: createMemoryHistory(), routes })
  await router.push(path)
  await router.isReady()
  const connection = fakeConnection()
  // Under a RouterView, as in the app (the page guards leaving with unsaved edits).
  const App = defineComponent({ render: () => h(RouterView) })
  const wrapper = mount(App, { global: { plugins: [router, makeI18n('en')], provide: { [CONNECTION_KEY as symbol]: connection } } })
  await flushPromises()
  await flushPromises()
  return { wrapper, connection, router }
}

describe('writing the next chapter', () => {
  it('shows the manuscript tree with each chapter and its word count', async () => {
    const { wrapper } = await mountPage()
    const chapters = wrapper.findAll(q('manuscript-chapter'))
    expect(chapters.map((c) => c.attributes('data-ordinal'))).toEqual(['1', '2', '3'])
    expect(chapters[0]!.get(q('chapter-words')).text()).toBe('10 words')
    expect(wrapper.get(q('export-epub')).attributes('href')).toBe('/api/writing/books/b1/export?format=epub')
  })

  it('runs the chapter workflow for the next chapter, keeps the revised text and follows its curation', async () => {
    const { wrapper, connection } = await mountPage()
    await wrapper.get(q('write-brief')).setValue('Lin returns to the harbor.')
    await wrapper.get(q('write-chapter')).trigger('click')
    await flushPromises()
    expect(connection.sent).toEqual([
      { type: 'workflow:run', workflowId: 'writing-chapter', inputs: { book: 'b1', chapter: 4, brief: 'Lin returns to the harbor.' } },
    ])

    connection.emit({ type: 'workflow:run-accepted', runId: 'r1', workflowId: 'writing-chapter' })
    const events = [
      { type: 'workflow:started', workflowId: 'writing-chapter', nodeIds: ['draft', 'revise'] },
      { type: 'node:started', nodeId: 'draft', nodeName: 'Draft' },
      { type: 'node:streaming', nodeId: 'draft', chunk: 'Rain.' },
      {
        type: 'node:completed',
        nodeId: 'draft',
        output: 'Rain.',
        contextSources: [{ uri: 'viking://resources/b1/meta/outline', level: 'L1', version: 1, reason: 'always' }],
        evaluation: { decision: 'flag-human', confidence: 0.5, reason: 'hair colour', checks: [{ dimension: 'character-state', passed: false, detail: 'black → red' }] },
      },
      { type: 'node:needs-human', nodeId: 'revise', reason: 'check this', outputPreview: 'More rain.', options: ['approve', 'retry', 'edit'] },
    ]
    events.forEach((e, i) => connection.emit({ runId: 'r1', seq: i + 1, ...e }))
    await flushPromises()
    expect(wrapper.get(q('writing-stream')).text()).toContain('Draft')
    expect(wrapper.get(q('run-evaluation')).attributes('data-decision')).toBe('flag-human')
    await wrapper.get(q('human-approve')).trigger('click')
    expect(connection.sent.at(-1)).toEqual({ type: 'human:decision', runId: 'r1', nodeId: 'revise', decision: 'approve' })

    connection.emit({ runId: 'r1', seq: 6, type: 'node:completed', nodeId: 'revise', output: 'More rain.', outputs: { text: 'More rain.' } })
    connection.emit({ runId: 'r1', seq: 7, type: 'workflow:completed', interfaceOutputs: {} })
    await flushPromises()
    await wrapper.get(q('keep-output')).trigger('click')
    expect(connection.sent.at(-1)).toEqual({ type: 'output:persist', runId: 'r1', nodeId: 'revise', bookId: 'b1', chapter: 4 })

    connection.emit({ type: 'output:persisted', outputId: 'o1', runId: 'r1', nodeId: 'revise', bookId: 'b1', chapter: 4, created: true })
    connection.emit({ type: 'curation:progress', outputId: 'o1', bookId: 'b1', step: 'extract', state: 'failed', error: 'extract: bad JSON' })
    connection.emit({ type: 'profile:updated', bookId: 'b1', profiles: [{ type: 'characters', name: 'Lin', uri: 'viking://x' }] })
    await flushPromises()
    expect(wrapper.get(q('curation-status')).text()).toContain('extract: bad JSON')
    expect(wrapper.find(q('curation-retry')).exists()).toBe(true)
    expect(wrapper.get(q('profiles-updated')).text()).toContain('Lin')

    await wrapper.get(q('writing-tab-provenance')).trigger('click')
    expect(wrapper.findAll(q('provenance-piece')).map((p) => p.attributes('data-uri'))).toEqual(['viking://resources/b1/meta/outline'])
  })
})

describe('importing a manuscript', () => {
  it('creates a book named from the file when none is open and imports the chapters kept and renamed', async () => {
    const { wrapper, router } = await mountPage('/writing')
    const input = wrapper.get(q('writing-import-file'))
    Object.defineProperty(input.element, 'files', { value: [new File(['# One'], 'rain.md')], configurable: true })
    await input.trigger('change')
    await flushPromises()
    const rows = wrapper.findAll(q('writing-import-chapter'))
    expect(rows).toHaveLength(3)
    await rows[1]!.get(q('writing-import-remove')).trigger('click')
    await wrapper.findAll(q('writing-import-chapter-title'))[1]!.setValue('Two: the envoy')
    await wrapper.get(q('writing-import-confirm')).trigger('click')
    await flushPromises()
    const posts = server.calls.filter((c) => c.method === 'POST')
    expect(posts).toEqual([
      { url: '/api/writing/books', method: 'POST', body: { title: 'Rain' } },
      {
        url: '/api/writing/books/b2/import',
        method: 'POST',
        body: { chapters: [{ title: 'One', text: 'Lin waits.' }, { title: 'Two: the envoy', text: 'Wu arrives.' }] },
      },
    ])
    expect(router.currentRoute.value.params.bookId).toBe('b2')
    expect(wrapper.find(q('writing-import-preview')).exists()).toBe(false)
  })
})

describe("an import's curation", () => {
  const step = (outputId: string, name: string, state: string, extra: Record<string, unknown> = {}) => ({
    type: 'curation:progress',
    outputId,
    bookId: 'b1',
    step: name,
    state,
    ...extra,
  })
  const finish = (outputId: string) => ['summarize', 'extract', 'profiles', 'index', 'check'].map((name) => step(outputId, name, 'done'))

  it('is shown for the import as a whole, with the progress that came before the import was answered', async () => {
    const { wrapper, connection } = await mountPage()
    expect(wrapper.find(q('import-curation')).exists()).toBe(false)
    server.respond = (call) => {
      if (call.url === '/api/writing/books/b1/import') {
        // Curation starts before the answer: the first chapter is done already.
        for (const m of finish('o1')) connection.emit(m)
        const curation = [
          { outputId: 'o1', chapter: 4 },
          { outputId: 'o2', chapter: 5 },
        ]
        return { status: 200, body: { tree: TREE, curation } }
      }
      return base(call)
    }
    const input = wrapper.get(q('writing-import-file'))
    Object.defineProperty(input.element, 'files', { value: [new File(['# One'], 'rain.md')], configurable: true })
    await input.trigger('change')
    await flushPromises()
    await wrapper.get(q('writing-import-confirm')).trigger('click')
    await flushPromises()
    const shown = wrapper.get(q('import-curation'))
    expect(shown.get(q('import-curation-text')).text()).toBe('Curating: 1 of 2 chapters')
    expect(shown.attributes('data-done')).toBe('false')
    connection.emit(step('o2', 'extract', 'failed', { error: 'extract: bad JSON' }))
    await flushPromises()
    expect(wrapper.get(q('import-curation-failure')).text()).toContain('Chapter 5, Facts, entities and relations: extract: bad JSON')
    await wrapper.get(q('import-curation-retry')).trigger('click')
    await flushPromises()
    expect(server.calls.some((c) => c.method === 'POST' && c.url === '/api/writing/outputs/o2/retry')).toBe(true)
    expect(wrapper.find(q('import-curation-failure')).exists()).toBe(false)
    for (const m of finish('o2')) connection.emit(m)
    await flushPromises()
    expect(wrapper.get(q('import-curation')).attributes('data-done')).toBe('true')
    expect(wrapper.get(q('import-curation-text')).text()).toBe("All 2 chapters are curated: the book's memory is up to date.")
    await wrapper.get(q('import-curation-dismiss')).trigger('click')
    expect(wrapper.find(q('import-curation')).exists()).toBe(false)
  })

  it('after a reload shows the unfinished outputs as in progress', async () => {
    const all = { summarize: 'done', extract: 'done', profiles: 'done', index: 'done', check: 'done' }
    const outputs = [
      { outputId: 'o1', chapter: 1, runId: null, nodeId: null, persistedAt: '', steps: all, error: null, reasons: {} },
      { outputId: 'o2', chapter: 2, runId: null, nodeId: null, persistedAt: '', steps: { ...all, index: 'running', check: 'pending' }, error: null, reasons: {} },
      { outputId: 'o3', chapter: 3, runId: null, nodeId: null, persistedAt: '', steps: { ...all, extract: 'pending', profiles: 'pending', index: 'pending', check: 'pending' }, error: null, reasons: {} },
    ]
    const listing = (call: Call): Reply => (call.url === '/api/writing/books/b1/outputs' ? { status: 200, body: outputs } : base(call))
    const { wrapper, connection } = await mountPage('/writing/b1', listing)
    expect(wrapper.get(q('import-curation-text')).text()).toBe('Curating: 0 of 2 chapters')
    for (const m of finish('o2')) connection.emit(m)
    await flushPromises()
    expect(wrapper.get(q('import-curation-text')).text()).toBe('Curating: 1 of 2 chapters')
  })
})

describe('after a reload', () => {
  it("shows no chapter's curation when every step ran, even one skipped for want of an agent model", async () => {
    const ran = { summarize: 'skipped', extract: 'done', profiles: 'done', index: 'done', check: 'done' }
    const outputs = [{ outputId: 'o1', chapter: 1, runId: null, nodeId: null, persistedAt: '', steps: ran, error: null, reasons: { summarize: 'no agent model' } }]
    const listing = (call: Call): Reply => (call.url === '/api/writing/books/b1/outputs' ? { status: 200, body: outputs } : base(call))
    const { wrapper } = await mountPage('/writing/b1', listing)
    expect(wrapper.find(q('curation-status')).exists()).toBe(false)
  })

  it("shows a chapter's failed curation", async () => {
    const failed = { summarize: 'skipped', extract: 'failed', profiles: 'pending', index: 'pending', check: 'pending' }
    const outputs = [{ outputId: 'o1', chapter: 1, runId: null, nodeId: null, persistedAt: '', steps: failed, error: 'extract: bad JSON', reasons: {} }]
    const listing = (call: Call): Reply => (call.url === '/api/writing/books/b1/outputs' ? { status: 200, body: outputs } : base(call))
    const { wrapper } = await mountPage('/writing/b1', listing)
    expect(wrapper.get(q('curation-status')).text()).toContain('extract: bad JSON')
  })
})

describe('saving a chapter in the editor', () => {
  it("shows the chapter's curation with the progress that came before the save was answered", async () => {
    const { wrapper, connection } = await mountPage()
    server.respond = (call) => {
      if (call.url.startsWith('/api/writing/books/b1/resource')) {
        return { status: 200, body: { path: '/manuscript/arc-01/chapter-002', levels: { L2: { text: 'Lin waits.' } } } }
      }
      if (call.url === '/api/writing/books/b1/chapters/2' && call.method === 'PUT') {
        // The server curates at once: without an agent model it is done before it answers.
        for (const step of ['summarize', 'extract', 'profiles', 'index', 'check']) {
          const skipped = step === 'summarize'
          connection.emit({ type: 'curation:progress', outputId: 'o2', bookId: 'b1', step, state: skipped ? 'skipped' : 'done', reason: skipped ? 'no agent model' : '' })
        }
        return { status: 200, body: { chapter: TREE.manuscript[0]!.chapters[1], outputId: 'o2', created: true } }
      }
      return base(call)
    }
    await wrapper.findAll(q('manuscript-chapter'))[1]!.trigger('click')
    await flushPromises()
    await wrapper.get(q('chapter-editor')).setValue('Lin waits in the rain.')
    await wrapper.get(q('chapter-save')).trigger('click')
    await flushPromises()
    const curation = wrapper.get(q('curation-status'))
    expect(curation.attributes('data-done')).toBe('true')
    expect(curation.findAll(q('curation-step')).map((s) => s.attributes('data-state'))).toEqual(['skipped', 'done', 'done', 'done', 'done'])
    expect(curation.get(q('curation-reason')).text()).toBe('no agent model')
  })
})
