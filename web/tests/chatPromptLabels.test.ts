// The prompt inspector in 中文: the server's structured labels (a block's source, a lore
// reason, a cut) said in the page's language, numbers in its locale, and SillyTavern's
// built-in prompt names translated only while the user has not renamed them.
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, describe, expect, it, vi } from 'vitest'
import PromptInspector from '../src/components/chat/PromptInspector.vue'
import type { PromptInspection } from '../src/api/chat'
import { makeI18n } from '../src/i18n'
import { cutText, formatDuration, promptName, reasonText, scriptName, sourceText, type LabelVocabulary } from '../src/lib/promptLabels'

const q = (id: string) => `[data-testid="${id}"]`

function vocabulary(locale: 'en' | 'zh'): LabelVocabulary {
  const { global } = makeI18n(locale)
  return { t: (key, values) => global.t(key, values ?? {}), te: (key) => global.te(key), tag: locale === 'zh' ? 'zh-CN' : 'en' }
}

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('prompt labels', () => {
  const zh = vocabulary('zh')
  const en = vocabulary('en')

  it('says a block source in the page language, the same words as the server in English', () => {
    const message = { kind: 'message', label: 'Message 1 (Aria)', what: 'message', values: { number: 1, role: 'assistant', speaker: 'Aria' } }
    expect(sourceText(message, zh)).toBe('第 1 条消息（Aria）')
    expect(sourceText(message, en)).toBe('Message 1 (Aria)')
    const unnamed = { kind: 'message', what: 'message', values: { number: 2, role: 'user', speaker: '' } }
    expect(sourceText(unnamed, zh)).toBe('第 2 条消息（用户）')
    const lore = { kind: 'lore', what: 'lore', values: { book: '灯塔镇', title: '守灯人', placement: 'before_character' } }
    expect(sourceText(lore, zh)).toBe('设定：灯塔镇 / 守灯人（角色之前）')
    // A label the catalogue does not know is shown as the server's words.
    expect(sourceText({ kind: 'workflow', label: 'From my node', what: 'unknown_kind', values: {} }, zh)).toBe('From my node')
    expect(sourceText({ kind: 'workflow', label: 'Old record' }, zh)).toBe('Old record')
  })

  it('translates a built-in prompt name only while it is untouched', () => {
    expect(sourceText({ kind: 'preset', what: 'preset_prompt', values: { prompt: 'main', name: '' } }, zh)).toBe('预设：主提示词')
    expect(sourceText({ kind: 'preset', what: 'preset_prompt', values: { prompt: 'main', name: '我的开场' } }, zh)).toBe('预设：我的开场')
    expect(promptName({ identifier: 'charDescription', name: 'Char Description' }, zh)).toBe('角色描述')
    expect(promptName({ identifier: 'charDescription', name: 'Who she is' }, zh)).toBe('Who she is')
    expect(promptName({ identifier: 'myPrompt', name: '' }, zh)).toBe('myPrompt')
  })

  it('says lore reasons and cuts with their values, numbers in the locale', () => {
    expect(reasonText({ rule: 'constant', detail: 'always active (constant)', term: 'constant' }, zh)).toBe('常驻（始终激活）')
    const key = { rule: 'primary_key', detail: 'x', term: 'key', values: { key: '灯', place: 'message', number: 3, speaker: '艾莉亚', snippet: '…灯…' } }
    expect(reasonText(key, zh)).toBe('关键词“灯”匹配了第 3 条消息（艾莉亚）中的“…灯…”')
    const needs = { rule: 'budget', detail: 'needs 4161 tokens; …', term: 'budget_needs', values: { tokens: 4161, used: 12000, budget: 16000 } }
    expect(reasonText(needs, zh)).toBe('需要 4,161 词元；16,000 词元的预算已用 12,000')
    expect(reasonText({ rule: 'vector', detail: 'similar enough' }, zh)).toBe('similar enough')
    const secondary = { rule: 'secondary_and_all', detail: 'x', term: 'secondary_and_all', values: { keys: ['风', '雨', '雷'] } }
    expect(reasonText(secondary, zh)).toBe('且次要关键词 “风”、“雨”和“雷” 全部匹配（与全部）')
    expect(reasonText(secondary, en)).toBe('and all secondary keys "风", "雨", and "雷" matched (AND ALL)')
    expect(cutText({ reason: 'x', term: 'over_budget', values: { budget: 8192, priority: 10 } }, zh)).toBe('超出 8,192 词元的预算；剩余中优先级最低（10）')
    expect(cutText({ reason: 'as sent' }, zh)).toBe('as sent')
  })
})

describe('the prompt inspector in 中文', () => {
  it('shows no English the server sent as structure', async () => {
    const inspection: PromptInspection = {
      blocks: [
        { id: 'main', kind: 'system', role: 'system', content: 'Be kind.', tokens: 1234, source: { kind: 'preset', label: 'Preset: Main Prompt', what: 'preset_prompt', values: { prompt: 'main', name: '' } } },
        { id: 'msg:a', kind: 'history', role: 'assistant', content: 'Hi', tokens: 2, source: { kind: 'message', label: 'Message 1 (Aria)', what: 'message', values: { number: 1, role: 'assistant', speaker: 'Aria' } } },
      ],
      lore: [
        {
          kb_id: 'kb', entry_id: 'e', title: '灯塔', activated: true, tokens: 19, kb_name: '灯塔镇', placement: 'before_character',
          reasons: [{ rule: 'constant', detail: 'always active (constant)', outcome: 'activated', term: 'constant', values: {} }],
        },
      ],
      cut: [],
      budget: 16000,
      messages: [],
    }
    vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify(inspection), { status: 200, headers: { 'Content-Type': 'application/json' } })))
    const w = mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, global: { plugins: [makeI18n('zh')] } })
    await flushPromises()
    expect(w.findAll(q('chat-prompt-source')).map((s) => s.text())).toEqual(['预设：主提示词', '第 1 条消息（Aria）'])
    expect(w.findAll(q('chat-prompt-tokens')).map((s) => s.text())).toEqual(['1,234', '2'])
    const lore = w.find(q('chat-lore')).text()
    expect(lore).toContain('常驻（始终激活）')
    expect(lore).not.toMatch(/constant|always active/)
    expect(w.find(q('chat-prompt-total')).text()).toContain('16,000')
  })
})

describe('script runs', () => {
  const zh = vocabulary('zh')
  const en = vocabulary('en')

  it('says a node’s inline code, the blocks it added and the ones it removed in the page language', () => {
    const inline = { name: 's (inline)', node: 's' }
    expect(scriptName(inline, zh)).toBe('s（内联代码）')
    expect(scriptName(inline, en)).toBe('s (inline)')
    expect(scriptName({ name: 'mood.lua', node: null }, zh)).toBe('mood.lua')
    expect(sourceText({ kind: 'script', label: 'Script: s (inline)', what: 'script', values: inline }, zh)).toBe('脚本：s（内联代码）')
    expect(cutText({ reason: 'removed by script s (inline)', term: 'removed_by_script', values: inline }, zh)).toBe(zh.t('chat.prompt.cutReason.removed_by_script', { name: 's（内联代码）' }))
  })

  it('says a run’s duration in the locale', () => {
    expect(formatDuration(12.4, 'zh-CN')).toBe('12毫秒')
    expect(formatDuration(1500, 'zh-CN')).toBe('1.5秒')
    expect(formatDuration(12.4, 'en')).toBe('12 ms')
  })
})
