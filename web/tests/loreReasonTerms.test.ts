// Every lore reason the server explains (tests/knowledge/test_activation_reason_terms.py)
// said in the page's language: filters, trigger conditions, inclusion groups, recursion and
// delay until recursion, with their values; every term has English and Chinese words.
import { describe, expect, it } from 'vitest'
import { makeI18n } from '../src/i18n'
import { reasonText, type LabelVocabulary } from '../src/lib/promptLabels'
import { en, zh } from '../src/locales'

function vocabulary(locale: 'en' | 'zh'): LabelVocabulary {
  const { global } = makeI18n(locale)
  return { t: (key, values) => global.t(key, values ?? {}), te: (key) => global.te(key), tag: locale === 'zh' ? 'zh-CN' : 'en' }
}

type Catalogue = { chat: { prompt: { reason: Record<string, string>; rule: Record<string, string> } } }
const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort()

describe('lore reason terms', () => {
  const zhV = vocabulary('zh')
  const enV = vocabulary('en')

  it('has Chinese words with the same placeholders for every English reason and rule', () => {
    const english = (en as unknown as Catalogue).chat.prompt
    const chinese = (zh as unknown as Catalogue).chat.prompt
    for (const [term, text] of Object.entries(english.reason)) {
      expect(chinese.reason[term], term).toBeTruthy()
      expect(placeholders(chinese.reason[term] ?? ''), term).toEqual(placeholders(text))
    }
    for (const rule of ['disabled', 'generation_type', 'character_filter', 'delay', 'cooldown', 'once_per_session']) {
      expect(chinese.rule[rule], rule).toBeTruthy()
      expect(english.rule[rule], rule).toBeTruthy()
    }
  })

  it('says inclusion groups with the group quoted and numbers in the locale', () => {
    const won = { rule: 'inclusion_group', detail: "won group 'weather' by weight 50 of 1000 (draw 12.5)", term: 'group_won_weight', values: { group: '天气', weight: 50, total: 1000, draw: 12.5 } }
    expect(reasonText(won, zhV)).toBe('凭权重 50/1,000 赢得组“天气”（抽到 12.5）')
    expect(reasonText(won, enV)).toBe('won group "天气" by weight 50 of 1,000 (draw 12.5)')
    const lost = { rule: 'inclusion_group', detail: 'x', term: 'group_lost', values: { group: '天气', entry: '晴' } }
    expect(reasonText(lost, zhV)).toBe('组“天气”由 晴 胜出')
  })

  it('says a trigger condition with its operator in the page language', () => {
    const value = { rule: 'trigger_condition', detail: 'x', term: 'condition_value', values: { variable: 'mood', operator: 'equals', expected: '"calm"', value: '"angry"' } }
    expect(reasonText(value, zhV)).toBe('条件不成立：mood 等于 "calm"：mood 为 "angry"')
    expect(reasonText(value, enV)).toBe('condition failed: mood equals "calm": mood is "angry"')
    const unset = { rule: 'trigger_condition', detail: 'x', term: 'condition_not_set', values: { variable: 'hp', operator: 'exists' } }
    expect(reasonText(unset, zhV)).toBe('条件不成立：hp 存在：hp 未设置')
    expect(reasonText({ rule: 'trigger_condition', detail: 'x', term: 'conditions_held', values: { count: 2 } }, zhV)).toBe('触发条件成立（2 条）')
  })

  it('says generation types, recursion and delays in the page language', () => {
    const only = { rule: 'generation_type', detail: 'x', term: 'generation_type', values: { allowed: ['continue', 'impersonate'], type: 'normal' } }
    expect(reasonText(only, zhV)).toBe('只用于“继续”和“代写”生成；这次是普通')
    const late = { rule: 'delay_until_recursion', detail: 'x', term: 'delay_until_recursion', values: { level: 3, reached: 1, steps: 2 } }
    expect(reasonText(late, zhV)).toBe('等待第 3 层递归；扫描在第 1 层、共 2 步后结束')
    expect(reasonText({ rule: 'recursion', detail: 'x', term: 'recursion_step', values: { step: 2 } }, zhV)).toBe('在第 2 步扫描中，于此前激活的条目文本里找到')
    expect(reasonText({ rule: 'disabled', detail: 'the entry is disabled', term: 'disabled', values: {} }, zhV)).toBe('条目已停用')
  })
})
