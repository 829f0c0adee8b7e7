// Settings → Import from SillyTavern: the preview's rows, one bar per kind while the job
// runs (asked every 500 ms until done or failed, and no more once the section is gone),
// the report, and a failed job that keeps the folder typed.
import { mount, type VueWrapper } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { effectScope } from 'vue'
import { ApiError } from '../src/api/client'
import type { StFolderPreview, StImportProgress, StImportReport, StKind } from '../src/api/sillytavern'
import StImportSection from '../src/components/settings/StImportSection.vue'
import { makeI18n } from '../src/i18n'
import { en, zh } from '../src/locales'
import {
  folderRequest,
  percentOf,
  previewBringsAnything,
  previewRows,
  progressBars,
  reportChangedAnything,
  reportRows,
  sameRequest,
  sortedProblems,
} from '../src/lib/stImport'
import { NETWORK_RETRIES, POLL_INTERVAL_MS, pollStImport, useStImport } from '../src/lib/stImportPoll'
import { type Call, type Reply, useFakeFetch } from './fakeFetch'

// Every kind, checked against the generated type: a kind added on the server fails the
// typecheck here until it has a label.
const KINDS: Record<StKind, true> = {
  characters: true,
  worlds: true,
  personas: true,
  chats: true,
  groups: true,
  group_chats: true,
  presets: true,
  instruct: true,
  context: true,
  regex: true,
  variables: true,
  quick_replies: true,
  backgrounds: true,
  sprites: true,
  themes: true,
}

const LAYOUTS: Record<StFolderPreview['layout'], true> = { user: true, root: true, public: true }

const PREVIEW: StFolderPreview = {
  path: '/st/data/default-user',
  layout: 'root',
  kinds: [
    { kind: 'characters', found: 3, new: 2, changed: 1 },
    { kind: 'worlds', found: 3, new: 3, changed: 0 },
    { kind: 'chats', found: 8, new: 8, changed: 0 },
    { kind: 'themes', found: 0, new: 0, changed: 0 },
  ],
  problems: [
    { file: 'worlds/broken.json', field: '', reason: 'not JSON: Expecting value at line 1' },
    { file: 'characters/Ann.png', field: 'data.character_book.entries[2].keys', reason: 'not a list' },
  ],
}

const REPORT: StImportReport = {
  path: '/st/data/default-user',
  counts: [
    { kind: 'characters', added: 2, updated: 1, unchanged: 0 },
    { kind: 'worlds', added: 3, updated: 0, unchanged: 0 },
    { kind: 'chats', added: 8, updated: 0, unchanged: 0 },
    { kind: 'themes', added: 0, updated: 0, unchanged: 0 },
  ],
  inactive: [{ what: 'Tavern Helper script "status bar"', why: 'storyloom does not run Tavern Helper scripts' }],
  problems: PREVIEW.problems,
}

function running(done: Partial<Record<StKind, number>>): StImportProgress {
  return {
    job_id: 'j1',
    state: 'running',
    kinds: [
      { kind: 'characters', done: done.characters ?? 0, total: 3 },
      { kind: 'worlds', done: done.worlds ?? 0, total: 3 },
      { kind: 'chats', done: done.chats ?? 0, total: 8 },
      { kind: 'themes', done: 0, total: 0 },
    ],
  }
}

const DONE: StImportProgress = { ...running({ characters: 3, worlds: 3, chats: 8 }), state: 'done', report: REPORT }

describe('what the section shows', () => {
  it('builds the request from the form: trimmed, an empty user left out', () => {
    expect(folderRequest('  ', 'x')).toBeNull()
    expect(folderRequest(' /st ', '')).toEqual({ path: '/st' })
    expect(folderRequest('/st', ' alice ')).toEqual({ path: '/st', user: 'alice' })
    expect(sameRequest({ path: '/st' }, { path: '/st', user: null })).toBe(true)
    expect(sameRequest({ path: '/st' }, { path: '/st', user: 'alice' })).toBe(false)
    expect(sameRequest(null, { path: '/st' })).toBe(false)
  })

  it('lists the kinds found with what is new, changed and here already', () => {
    expect(previewRows(PREVIEW)).toEqual([
      { kind: 'characters', found: 3, new: 2, changed: 1, same: 0 },
      { kind: 'worlds', found: 3, new: 3, changed: 0, same: 0 },
      { kind: 'chats', found: 8, new: 8, changed: 0, same: 0 },
    ])
    expect(previewBringsAnything(PREVIEW)).toBe(true)
    const again = { ...PREVIEW, kinds: PREVIEW.kinds.map((k) => ({ ...k, new: 0, changed: 0 })) }
    expect(previewRows(again)[0]).toMatchObject({ kind: 'characters', same: 3 })
    expect(previewBringsAnything(again)).toBe(false)
  })

  it('gives a bar to each kind with something to do', () => {
    expect(progressBars(running({ characters: 1, chats: 8 }))).toEqual([
      { kind: 'characters', done: 1, total: 3, percent: 33 },
      { kind: 'worlds', done: 0, total: 3, percent: 0 },
      { kind: 'chats', done: 8, total: 8, percent: 100 },
    ])
    // Kinds the job has not reached answer 0 of 0: the preview's count stands in.
    const early = { ...running({ characters: 1 }), kinds: running({ characters: 1 }).kinds.map((k) => (k.kind === 'characters' ? k : { ...k, total: 0 })) }
    expect(progressBars(early, PREVIEW.kinds)).toEqual([
      { kind: 'characters', done: 1, total: 3, percent: 33 },
      { kind: 'worlds', done: 0, total: 3, percent: 0 },
      { kind: 'chats', done: 0, total: 8, percent: 0 },
    ])
    expect(progressBars(early)).toHaveLength(1)
    expect(percentOf(9, 8)).toBe(100)
    expect(percentOf(0, 0)).toBe(100)
  })

  it('reports the kinds that came, and whether anything changed', () => {
    expect(reportRows(REPORT).map((r) => r.kind)).toEqual(['characters', 'worlds', 'chats'])
    expect(reportChangedAnything(REPORT)).toBe(true)
    const second = { ...REPORT, counts: REPORT.counts.map((c) => ({ kind: c.kind, added: 0, updated: 0, unchanged: c.added + c.updated })) }
    expect(reportChangedAnything(second)).toBe(false)
  })

  it('orders problems by file, then field', () => {
    expect(sortedProblems(PREVIEW.problems).map((p) => p.file)).toEqual(['characters/Ann.png', 'worlds/broken.json'])
    expect(sortedProblems(undefined)).toEqual([])
  })

  it('has a label for every kind and layout in both languages', () => {
    const labels = (messages: Record<string, unknown>, group: string) =>
      (messages.settings as Record<string, Record<string, Record<string, string>>>).stImport![group] ?? {}
    for (const [group, names] of [['kinds', Object.keys(KINDS)], ['layouts', Object.keys(LAYOUTS)]] as const) {
      for (const name of names) {
        expect(labels(en, group)[name], `en ${group}.${name}`).toBeTruthy()
        expect(labels(zh, group)[name], `zh ${group}.${name}`).toBeTruthy()
      }
    }
  })
})

describe('polling a job', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('asks at once, then every 500 ms after each answer, until the job is done', async () => {
    const answers = [running({}), running({ characters: 2 }), DONE]
    const get = vi.fn(async () => answers.shift()!)
    const seen: string[] = []
    pollStImport('j1', get, { progress: (p) => seen.push(p.state), lost: () => seen.push('lost') })
    await vi.advanceTimersByTimeAsync(0)
    expect(get).toHaveBeenCalledTimes(1)
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS - 1)
    expect(get).toHaveBeenCalledTimes(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(get).toHaveBeenCalledTimes(2)
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 10)
    expect(get).toHaveBeenCalledTimes(3)
    expect(seen).toEqual(['running', 'running', 'done'])
  })

  it('asks no more once stopped, and drops an answer that comes after', async () => {
    let answer: (p: StImportProgress) => void = () => {}
    const get = vi.fn(() => new Promise<StImportProgress>((resolve) => (answer = resolve)))
    const progress = vi.fn()
    const poll = pollStImport('j1', get, { progress, lost: vi.fn() })
    poll.stop()
    answer(running({}))
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 4)
    expect(progress).not.toHaveBeenCalled()
    expect(get).toHaveBeenCalledTimes(1)
  })

  it('rides out a few unanswered asks, and gives up on an error answer', async () => {
    let misses = NETWORK_RETRIES
    const get = vi.fn(async () => {
      if (misses-- > 0) throw new ApiError(0, 'Failed to fetch')
      return DONE
    })
    const progress = vi.fn()
    pollStImport('j1', get, { progress, lost: vi.fn() })
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * (NETWORK_RETRIES + 1))
    expect(progress).toHaveBeenCalledWith(DONE)

    const lost = vi.fn()
    const gone = vi.fn(async () => {
      throw new ApiError(404, 'No import job j9')
    })
    pollStImport('j9', gone, { progress: vi.fn(), lost })
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 4)
    expect(gone).toHaveBeenCalledTimes(1)
    expect(lost).toHaveBeenCalledWith({ message: 'No import job j9', problems: [] })
  })

  it('stops when the scope that started it goes away', async () => {
    const get = vi.fn(async () => running({}))
    const scope = effectScope()
    const st = scope.run(() =>
      useStImport({ preview: async () => PREVIEW, start: async () => ({ job_id: 'j1' }), get }),
    )!
    st.path.value = '/st'
    await st.runPreview()
    await st.runImport()
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 2)
    const asked = get.mock.calls.length
    expect(asked).toBeGreaterThanOrEqual(2)
    scope.stop()
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 10)
    expect(get).toHaveBeenCalledTimes(asked)
  })

  it('imports only the folder previewed: an edit asks for a new preview', async () => {
    const scope = effectScope()
    const st = scope.run(() =>
      useStImport({ preview: async () => PREVIEW, start: async () => ({ job_id: 'j1' }), get: async () => DONE }),
    )!
    expect(st.canPreview.value).toBe(false)
    st.path.value = '/st'
    expect(st.canImport.value).toBe(false)
    await st.runPreview()
    expect(st.canImport.value).toBe(true)
    st.user.value = 'alice'
    expect(st.previewCurrent.value).toBe(false)
    expect(st.canImport.value).toBe(false)
    st.user.value = ''
    expect(st.canImport.value).toBe(true)
    scope.stop()
  })
})

describe('the section', () => {
  const server = useFakeFetch()
  let wrapper: VueWrapper | null = null

  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    wrapper?.unmount()
    wrapper = null
    vi.useRealTimers()
  })

  const q = (id: string) => `[data-testid="${id}"]`

  function mountSection(): VueWrapper {
    wrapper = mount(StImportSection, { global: { plugins: [makeI18n('en')] } })
    return wrapper
  }

  /** Answers: the preview, the job, then each poll in turn (the last one repeated). */
  function answering(polls: StImportProgress[], start: Reply = { status: 202, body: { job_id: 'j1' } }) {
    server.respond = (call: Call): Reply => {
      if (call.url === '/api/sillytavern/preview') return { status: 200, body: PREVIEW }
      if (call.url === '/api/sillytavern/import') return start
      return { status: 200, body: polls.length > 1 ? polls.shift() : polls[0] }
    }
  }

  async function previewFolder(w: VueWrapper, path = '/st'): Promise<void> {
    await w.get(q('st-import-path')).setValue(path)
    await w.get(q('st-import-preview')).trigger('submit')
    await vi.advanceTimersByTimeAsync(0)
  }

  it('says the folder is on the server, and asks for nothing until a path is typed', () => {
    const w = mountSection()
    expect(w.text()).toContain('on the machine the storyloom server runs on')
    expect(w.get(q('st-import-preview')).attributes('disabled')).toBeDefined()
    expect(w.get(q('st-import-start')).attributes('disabled')).toBeDefined()
    expect(server.calls).toEqual([])
  })

  it('previews, imports with a bar per kind, and reports', async () => {
    answering([running({ characters: 1 }), running({ characters: 3, worlds: 2 }), DONE])
    const w = mountSection()
    await previewFolder(w, ' /st ')
    expect(server.calls[0]).toEqual({ url: '/api/sillytavern/preview', method: 'POST', body: { path: '/st' } })
    const rows = w.findAll(q('st-import-preview-row'))
    expect(rows.map((r) => r.attributes('data-kind'))).toEqual(['characters', 'worlds', 'chats'])
    expect(rows[0]!.get('[data-col="changed"]').text()).toBe('1')
    expect(w.findAll(`${q('st-import-preview-problems')} ${q('st-import-problem')}`).map((r) => r.text())).toEqual([
      'characters/Ann.pngdata.character_book.entries[2].keysnot a list',
      'worlds/broken.json(whole file)not JSON: Expecting value at line 1',
    ])

    await w.get(q('st-import-start')).trigger('click')
    await vi.advanceTimersByTimeAsync(0)
    expect(server.calls[1]).toEqual({ url: '/api/sillytavern/import', method: 'POST', body: { path: '/st' } })
    expect(server.calls[2]).toMatchObject({ url: '/api/sillytavern/import/j1', method: 'GET' })
    const bars = w.findAll(q('st-import-bar'))
    expect(bars.map((b) => b.attributes('data-kind'))).toEqual(['characters', 'worlds', 'chats'])
    expect(bars[0]!.get('progress').attributes('value')).toBe('1')
    expect(bars[0]!.text()).toContain('1 of 3')
    expect((w.get(q('st-import-path')).element as HTMLInputElement).disabled).toBe(true)

    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS)
    expect(w.findAll(q('st-import-bar'))[1]!.text()).toContain('2 of 3')
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS)
    expect(w.find(q('st-import-progress')).exists()).toBe(false)
    const counts = w.findAll(q('st-import-count'))
    expect(counts.map((c) => c.attributes('data-kind'))).toEqual(['characters', 'worlds', 'chats'])
    expect(counts[0]!.get('[data-col="added"]').text()).toBe('2')
    expect(counts[0]!.get('[data-col="updated"]').text()).toBe('1')
    expect(w.get(q('st-import-inactive')).text()).toContain('storyloom does not run Tavern Helper scripts')
    expect(w.findAll(`${q('st-import-report-problems')} ${q('st-import-problem')}`)).toHaveLength(2)
    const asked = server.calls.length
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 10)
    expect(server.calls).toHaveLength(asked)
  })

  it('shows a failed job with its error and keeps the folder typed', async () => {
    answering([running({}), { job_id: 'j1', state: 'failed', kinds: running({}).kinds, error: 'chats/Ann/a.jsonl: disk full' }])
    const w = mountSection()
    await previewFolder(w, '/st/data/default-user')
    await w.get(q('st-import-start')).trigger('click')
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS)
    expect(w.get(q('st-import-error')).text()).toContain('chats/Ann/a.jsonl: disk full')
    expect(w.find(q('st-import-report')).exists()).toBe(false)
    const path = w.get(q('st-import-path')).element as HTMLInputElement
    expect(path.value).toBe('/st/data/default-user')
    expect(path.disabled).toBe(false)
    expect(w.get(q('st-import-preview')).attributes('disabled')).toBeUndefined()
  })

  it('shows why an import could not start (another one running), and asks nothing more', async () => {
    answering([DONE], { status: 409, body: { error: { message: 'an import from SillyTavern is running; wait for it to finish' } } })
    const w = mountSection()
    await previewFolder(w)
    await w.get(q('st-import-start')).trigger('click')
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 4)
    expect(w.get(q('st-import-error')).text()).toContain('an import from SillyTavern is running')
    expect(server.calls.map((c) => c.url)).toEqual(['/api/sillytavern/preview', '/api/sillytavern/import'])
    expect(w.get(q('st-import-start')).attributes('disabled')).toBeUndefined()
  })

  it("shows the server's error envelope when the folder cannot be read", async () => {
    server.respond = () => ({
      status: 422,
      body: { error: { message: 'Not a SillyTavern folder', problems: [{ field: 'path', reason: 'no characters/, chats/ or settings.json in /tmp' }] } },
    })
    const w = mountSection()
    await previewFolder(w, '/tmp')
    const error = w.get(q('st-import-preview-error')).text()
    expect(error).toContain('Not a SillyTavern folder')
    expect(error).toContain('path: no characters/, chats/ or settings.json in /tmp')
    expect(w.get(q('st-import-start')).attributes('disabled')).toBeDefined()
  })

  it('stops asking once the page is left', async () => {
    answering([running({})])
    const w = mountSection()
    await previewFolder(w)
    await w.get(q('st-import-start')).trigger('click')
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 2)
    const asked = server.calls.length
    w.unmount()
    wrapper = null
    await vi.advanceTimersByTimeAsync(POLL_INTERVAL_MS * 10)
    expect(server.calls).toHaveLength(asked)
  })
})
