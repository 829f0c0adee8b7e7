// Role C's verdict in 中文: its reason and each check's findings said from their terms and
// values (the manuscript's words quoted), a model's own words as they came.
import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import RunEvaluation from '../src/components/writing/RunEvaluation.vue'
import { makeI18n } from '../src/i18n'
import { parseEvaluation } from '../src/lib/writingRun'

const q = (id: string) => `[data-testid="${id}"]`

const finding = { term: 'dead', values: { name: 'Tomas Reyes', attribute: 'status', expected: '死亡', found: 'speaks', since: 3, earlierValue: null, earlierUntil: null } }

function shown(raw: Record<string, unknown>, locale: 'en' | 'zh' = 'zh') {
  const evaluation = parseEvaluation(raw)
  if (!evaluation) throw new Error('not an evaluation')
  return mount(RunEvaluation, { props: { evaluation, nodeName: '草稿' }, global: { plugins: [makeI18n(locale)] } })
}

describe('role C evaluation', () => {
  it('says the reason and the findings in the page language', () => {
    const wrapper = shown({
      decision: 'retry',
      confidence: 0.9,
      reason: '1 contradiction(s) in timeline: Tomas Reyes · status: “死亡” (since ch. 3), yet acts or speaks',
      reason_note: { term: 'contradictions', values: { count: 1, dimensions: ['timeline'] } },
      checks: [
        { dimension: 'timeline', passed: false, detail: 'Tomas Reyes · status: …', findings: [finding] },
        { dimension: 'character-state', passed: true, detail: '', findings: [] },
      ],
    })
    expect(wrapper.get(q('run-evaluation-reason')).text()).toBe('时间线中有 1 处矛盾：Tomas Reyes · status：“死亡”（自第 3 章起），却仍在行动或说话')
    const checks = wrapper.findAll(q('run-evaluation-check'))
    expect(checks[0]!.text()).toContain('时间线：有矛盾')
    expect(checks[0]!.text()).toContain('却仍在行动或说话')
    expect(checks[1]!.text()).toContain('人物状态：一致')
  })

  it('says an approval with the intentional ones counted, and a model’s words as they came', () => {
    const approved = shown({ decision: 'approve', reason: 'x', reason_note: { term: 'consistent', values: { quiet: 2 } }, checks: [] })
    expect(approved.get(q('run-evaluation-reason')).text()).toBe('与作品已有的事实没有矛盾（2 处已标记为有意）')
    const english = shown({ decision: 'approve', reason: 'x', reason_note: { term: 'consistent', values: { quiet: 0 } }, checks: [] }, 'en')
    expect(english.get(q('run-evaluation-reason')).text()).toBe("no contradiction with the book's facts")
    const model = shown({ decision: 'flag-human', reason: 'The tone drifts.', checks: [{ dimension: 'style', passed: false, detail: 'too modern' }] })
    expect(model.get(q('run-evaluation-reason')).text()).toBe('The tone drifts.')
    expect(model.get(q('run-evaluation-check')).text()).toContain('too modern')
  })
})
