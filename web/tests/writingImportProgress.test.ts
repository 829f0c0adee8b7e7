// An import's curation as a whole, folded from `curation:progress`: counted per chapter,
// failures named, held while the import (or the outputs list) is being answered.
import { describe, expect, it } from 'vitest'
import { defineComponent, h } from 'vue'
import { mount } from '@vue/test-utils'
import type { OutputStatus } from '../src/api/writing'
import { CURATION_STEPS } from '../src/lib/writingCuration'
import {
  followProgress,
  importProgress,
  markRetried,
  resumedProgress,
  summarizeImport,
  useImportProgress,
} from '../src/lib/writingImportProgress'
import { fakeConnection } from './fakeConnection'

const started = (n: number) => Array.from({ length: n }, (_, i) => ({ outputId: `o${i + 1}`, chapter: i + 1 }))

function progress(outputId: string, step: string, state: string, extra: Record<string, unknown> = {}) {
  return { type: 'curation:progress', bookId: 'b1', outputId, step, state, ...extra }
}

/** Every step of an output finished; summarize skipped (no agent model). */
function finishAll(outputId: string) {
  return CURATION_STEPS.map((step) =>
    step === 'summarize' ? progress(outputId, step, 'skipped', { reason: 'no agent model' }) : progress(outputId, step, 'done'),
  )
}

function status(outputId: string, chapter: number, steps: Record<string, OutputStatus['steps'][string]>, error: string | null = null): OutputStatus {
  return { outputId, chapter, runId: null, nodeId: null, persistedAt: '', steps, error, reasons: {} }
}

describe('the progress of an import', () => {
  it('counts the chapters whose every step finished, of all the import started', () => {
    const p = importProgress('b1', started(80))
    for (let n = 1; n <= 37; n++) for (const m of finishAll(`o${n}`)) followProgress(p, m)
    followProgress(p, progress('o38', 'summarize', 'running'))
    expect(summarizeImport(p)).toEqual({ total: 80, finished: 37, failures: [], limited: 37, done: false })
    for (let n = 38; n <= 80; n++) for (const m of finishAll(`o${n}`)) followProgress(p, m)
    expect(summarizeImport(p)).toMatchObject({ total: 80, finished: 80, done: true })
  })

  it("ignores another book's outputs and outputs the import did not start", () => {
    const p = importProgress('b1', started(2))
    expect(followProgress(p, { ...progress('o1', 'extract', 'done'), bookId: 'b2' })).toBe(false)
    expect(followProgress(p, progress('o9', 'extract', 'done'))).toBe(false)
    expect(p.outputs.every((o) => o.steps.every((s) => s.state === 'pending'))).toBe(true)
  })

  it('names each failed step with its chapter and error until it is retried', () => {
    const p = importProgress('b1', started(3))
    followProgress(p, progress('o2', 'extract', 'failed', { error: 'extract: bad JSON' }))
    for (const m of finishAll('o1')) followProgress(p, m)
    expect(summarizeImport(p)).toEqual({
      total: 3,
      finished: 1,
      failures: [{ outputId: 'o2', chapter: 2, step: 'extract', error: 'extract: bad JSON' }],
      limited: 1,
      done: false,
    })
    markRetried(p, 'o2')
    expect(summarizeImport(p).failures).toEqual([])
    expect(p.outputs[1]!.steps.find((s) => s.step === 'extract')!.state).toBe('pending')
  })

  it('after a reload shows the unfinished outputs only, in chapter order, and a finished step stays finished', () => {
    const all = Object.fromEntries(CURATION_STEPS.map((s) => [s, 'done'] as const))
    const p = resumedProgress('b1', [
      status('o3', 3, { ...all, extract: 'running', profiles: 'pending', index: 'pending', check: 'pending' }),
      status('o1', 1, all),
      status('o2', 2, { ...all, check: 'failed' }, 'check: the store is locked'),
    ])!
    expect(p.outputs.map((o) => o.chapter)).toEqual([2, 3])
    // A message older than the list does not take a step back.
    followProgress(p, progress('o3', 'summarize', 'running'))
    expect(p.outputs[1]!.steps[0]!.state).toBe('done')
    expect(summarizeImport(p)).toMatchObject({ total: 2, finished: 0, done: false })
    expect(summarizeImport(p).failures).toEqual([{ outputId: 'o2', chapter: 2, step: 'check', error: 'check: the store is locked' }])
    expect(resumedProgress('b1', [status('o1', 1, all)])).toBeNull()
  })
})

function withImports() {
  const connection = fakeConnection()
  let imports!: ReturnType<typeof useImportProgress>
  const Host = defineComponent({
    setup() {
      imports = useImportProgress(connection)
      return () => h('div')
    },
  })
  const wrapper = mount(Host)
  return { connection, imports, wrapper }
}

describe('following an import over the WebSocket', () => {
  it('keeps the progress that comes before the import is answered', () => {
    const { connection, imports } = withImports()
    imports.expectImport('b1')
    for (const m of finishAll('o1')) connection.emit(m)
    connection.emit(progress('o2', 'summarize', 'running'))
    imports.followImport('b1', started(2))
    expect(imports.summary.value).toMatchObject({ total: 2, finished: 1, done: false })
    for (const m of finishAll('o2')) connection.emit(m)
    expect(imports.summary.value).toMatchObject({ total: 2, finished: 2, done: true })
  })

  it('opening the imported book keeps its import; opening another shows that one’s unfinished outputs', async () => {
    const { connection, imports } = withImports()
    imports.expectImport('b1')
    imports.followImport('b1', started(2))
    let listed = 0
    await imports.openBook('b1', async () => {
      listed++
      return []
    })
    expect(listed).toBe(0)
    expect(imports.summary.value?.total).toBe(2)
    await imports.openBook('b2', async () => {
      // Progress that comes while the list is read is applied to it.
      connection.emit({ ...progress('o7', 'extract', 'done'), bookId: 'b2' })
      return [status('o7', 7, { summarize: 'skipped', extract: 'running', profiles: 'pending', index: 'pending', check: 'pending' })]
    })
    expect(imports.progress.value?.bookId).toBe('b2')
    expect(imports.progress.value?.outputs[0]!.steps[1]!.state).toBe('done')
    await imports.openBook(null, async () => [])
    expect(imports.progress.value).toBeNull()
  })

  it('stops listening when its page goes', () => {
    const { connection, imports, wrapper } = withImports()
    imports.followImport('b1', started(1))
    wrapper.unmount()
    for (const m of finishAll('o1')) connection.emit(m)
    expect(imports.summary.value?.finished).toBe(0)
  })
})
