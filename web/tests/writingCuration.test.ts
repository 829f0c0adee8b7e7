import { describe, expect, it } from 'vitest'
import type { WarningView } from '../src/api/writing'
import { makeI18n } from '../src/i18n'
import { applyProgress, curationFailed, curationFinished, curationFromStatus, curationSkipped, newCuration, stepReasonText } from '../src/lib/writingCuration'
import { intentionalCount, visibleWarnings, warningText } from '../src/lib/writingWarnings'

describe('curation progress', () => {
  it('starts with every step pending in pipeline order', () => {
    expect(newCuration('o1', 4).steps.map((s) => [s.step, s.state])).toEqual([
      ['summarize', 'pending'],
      ['extract', 'pending'],
      ['profiles', 'pending'],
      ['index', 'pending'],
      ['check', 'pending'],
    ])
  })

  it('follows progress messages of its own output only', () => {
    const view = newCuration('o1', 4)
    expect(applyProgress(view, { outputId: 'o2', step: 'summarize', state: 'done' })).toBe(false)
    for (const step of ['summarize', 'extract', 'profiles', 'index', 'check']) applyProgress(view, { outputId: 'o1', step, state: 'done' })
    expect(curationFinished(view)).toBe(true)
  })

  it('shows the error of a failed step until it runs again', () => {
    const view = newCuration('o1', 4)
    applyProgress(view, { outputId: 'o1', step: 'extract', state: 'failed', error: 'extract: malformed JSON', reason: null })
    expect(curationFailed(view)).toBe(true)
    expect(view.steps[1]).toEqual({ step: 'extract', state: 'failed', error: 'extract: malformed JSON', reason: null })
    applyProgress(view, { outputId: 'o1', step: 'extract', state: 'running' })
    expect(view.steps[1]!.error).toBe('')
    expect(curationFailed(view)).toBe(false)
  })

  it('rebuilds the view from the outputs list after a reload', () => {
    const view = curationFromStatus({
      outputId: 'o1',
      chapter: 4,
      runId: 'r',
      nodeId: 'revise',
      persistedAt: '',
      steps: { summarize: 'done', extract: 'failed', profiles: 'pending', index: 'pending', check: 'pending' },
      error: 'extract: malformed JSON',
    })
    expect(view.steps.find((s) => s.step === 'extract')).toEqual({ step: 'extract', state: 'failed', error: 'extract: malformed JSON', reason: null })
    expect(view.steps.find((s) => s.step === 'summarize')!.error).toBe('')
  })

  it('says why a step was skipped, live and after a reload, and never reads as fully done', () => {
    const why = 'no agent model is set up. Set one under Settings → Agent LLM: without one ...'
    const live = newCuration('o1', 4)
    for (const step of ['summarize', 'extract']) applyProgress(live, { outputId: 'o1', step, state: 'skipped', reason: why })
    for (const step of ['profiles', 'index', 'check']) applyProgress(live, { outputId: 'o1', step, state: 'done' })
    expect(live.steps[1]).toEqual({ step: 'extract', state: 'skipped', error: why, reason: null })
    expect(curationFinished(live)).toBe(true)
    expect(curationSkipped(live)).toBe(true)
    expect(curationFailed(live)).toBe(false)

    const reloaded = curationFromStatus({
      outputId: 'o1',
      chapter: 4,
      runId: null,
      nodeId: null,
      persistedAt: '',
      steps: { summarize: 'skipped', extract: 'skipped', profiles: 'done', index: 'done', check: 'done' },
      reasons: { summarize: why, extract: why },
    })
    expect(reloaded.steps.map((s) => s.error)).toEqual([why, why, '', '', ''])
    expect(curationSkipped(reloaded)).toBe(true)
  })

  it('shows what the extract step read offline when it is done without the agent model', () => {
    const note = 'no agent model is set up. ... Facts were read by the offline prose reader: ...'
    const live = newCuration('o2', 5)
    applyProgress(live, { outputId: 'o2', step: 'summarize', state: 'skipped', reason: 'no agent model' })
    applyProgress(live, { outputId: 'o2', step: 'extract', state: 'done', reason: note })
    expect(live.steps[1]).toEqual({ step: 'extract', state: 'done', error: note, reason: null })

    const reloaded = curationFromStatus({
      outputId: 'o2',
      chapter: 5,
      runId: null,
      nodeId: null,
      persistedAt: '',
      steps: { summarize: 'skipped', extract: 'done', profiles: 'done', index: 'done', check: 'done' },
      reasons: { summarize: 'no agent model', extract: note },
    })
    expect(reloaded.steps.map((s) => s.error)).toEqual(['no agent model', note, '', '', ''])
    expect(curationSkipped(reloaded)).toBe(true)
  })

  it('says a structured reason in the page language, live and after a reload', () => {
    const { global } = makeI18n('zh')
    const t = (key: string, values?: Record<string, unknown>) => global.t(key, values ?? {})
    const live = newCuration('o3', 2)
    applyProgress(live, { outputId: 'o3', step: 'summarize', state: 'skipped', reason: 'the agent model does not run (x)…', reasonTerm: { term: 'summary_agent_down', problem: 'no GPU' } })
    expect(live.steps[0]!.reason).toEqual({ term: 'summary_agent_down', problem: 'no GPU' })
    expect(stepReasonText(live.steps[0]!, t)).toBe(global.t('writing.curation.reason.summary_agent_down', { problem: 'no GPU' }))
    expect(stepReasonText(live.steps[0]!, t)).toContain('no GPU')
    const reloaded = curationFromStatus({
      outputId: 'o3',
      chapter: 2,
      runId: null,
      nodeId: null,
      persistedAt: '',
      steps: { summarize: 'skipped', extract: 'skipped', profiles: 'done', index: 'done', check: 'done' },
      reasons: { summarize: 'old words', extract: 'old words' },
      reasonTerms: { extract: { term: 'facts_no_model', problem: null } },
    })
    // A step kept before reasons had terms shows its sentence.
    expect(reloaded.steps.map((s) => stepReasonText(s, t))).toEqual(['old words', global.t('writing.curation.reason.facts_no_model'), '', '', ''])
    expect(stepReasonText(reloaded.steps[1]!, t)).toMatch(/^还没有设置模型/)
  })

  it('has English and Chinese words for every reason term', () => {
    const terms = ['summary_no_model', 'summary_agent_down', 'facts_no_model', 'facts_agent_down'] as const
    for (const locale of ['en', 'zh'] as const) {
      const { global } = makeI18n(locale)
      for (const term of terms) expect(global.te(`writing.curation.reason.${term}`), `${locale} ${term}`).toBe(true)
    }
  })
})

function warning(id: number, chapter: number, intentional = false): WarningView {
  return { id, outputId: 'o', chapter, dimension: 'character-state', category: 'characterization', subject: '/entities/characters/lin', attribute: 'hair', detail: 'hair was black', evidenceUri: '', intentional, bookId: 'bk', fingerprint: `f${id}`, createdAt: '', expected: 'black', found: 'silver', sinceChapter: 1, evidence: 'Her silver hair.', factEvidence: 'Her black hair.', subjectName: '' }
}

describe('warning list', () => {
  it('hides warnings marked intentional unless asked', () => {
    const all = [warning(1, 3), warning(2, 4, true)]
    expect(visibleWarnings(all, false).map((w) => w.id)).toEqual([1])
    expect(visibleWarnings(all, true).map((w) => w.id)).toEqual([2, 1])
    expect(intentionalCount(all)).toBe(1)
  })
})

describe('warning frames', () => {
  const say = (locale: 'en' | 'zh') => {
    const { global } = makeI18n(locale)
    return (w: WarningView) => warningText(w, (key, values) => global.t(key, values ?? {}), locale === 'zh' ? 'zh-CN' : 'en')
  }

  it('says each frame in the page language with the manuscript’s words quoted', () => {
    const base = { ...warning(1, 4), subjectName: '林枫', attribute: 'hair', expected: '黑', found: '银', sinceChapter: 1 }
    expect(say('zh')({ ...base, kind: 'contradiction' })).toBe('林枫 · hair：应为“黑”（自第 1 章起），却写作“银”')
    expect(say('en')({ ...base, kind: 'contradiction' })).toBe('林枫 · hair: expected “黑” (since ch. 1), found “银”')
    expect(say('zh')({ ...base, kind: 'dead', attribute: 'status', expected: '死亡' })).toBe('林枫 · status：“死亡”（自第 1 章起），却仍在行动或说话')
    expect(say('zh')({ ...base, kind: 'lost', attribute: 'lost_limb', expected: '左臂', found: '双手' })).toBe('林枫 · lost_limb：已失去“左臂”（自第 1 章起），却仍在使用“双手”')
    expect(say('zh')({ ...base, kind: 'contradiction', expected: '银', found: '黑', sinceChapter: 1200, earlierValue: '黑', earlierUntil: 1200 })).toBe(
      '林枫 · hair：应为“银”（自第 1,200 章起），却写作“黑”——第 1,200 章之前是“黑”；现在是“银”',
    )
  })

  it('shows the kept English words of a warning from before warnings had a frame', () => {
    expect(say('zh')({ ...warning(2, 4), kind: null })).toBe('hair was black')
  })

  it('has English and Chinese words for every frame', () => {
    for (const locale of ['en', 'zh'] as const) {
      const { global } = makeI18n(locale)
      for (const kind of ['contradiction', 'lost', 'dead', 'earlier']) expect(global.te(`writing.warnings.frame.${kind}`), `${locale} ${kind}`).toBe(true)
    }
  })
})
