import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import ChatHeader from '../src/components/chat/ChatHeader.vue'
import ChatMessageItem from '../src/components/chat/ChatMessageItem.vue'
import { makeI18n } from '../src/i18n'
import type { ChatMessage } from '../src/api/chat'
import { message } from './chatFixtures'

const q = (id: string) => `[data-testid="${id}"]`

function reply(extra: Record<string, unknown> = {}): ChatMessage {
  return { ...message('r', 'u'), role: 'assistant', parent_id: 'u', extra }
}

function mountMessage(m: ChatMessage, locale: 'en' | 'zh', over: Record<string, unknown> = {}) {
  return mount(ChatMessageItem, {
    props: { message: m, last: true, editing: false, running: false, scripts: false, ...over },
    global: { plugins: [makeI18n(locale)] },
  })
}

describe("MVU on a chat's messages", () => {
  it("says each refused update in the reader's language, with the path and the rule", () => {
    const m = reply({
      mvu_warnings: [
        { kind: 'not_extensible', path: '理.秘密' },
        { kind: 'schema', path: '世界.天气', rule: 'enum', expected: ['晴', '雨'] },
        { kind: 'updater', path: '', detail: 'upstream down' },
      ],
    })
    const zh = mountMessage(m, 'zh')
    const lines = zh.findAll(q('chat-message-problem')).map((li) => li.text())
    expect(lines).toEqual([
      '理.秘密：未更改：结构已锁定（不能增删键或元素）',
      '世界.天气：未修改：违反角色卡的规则（enum：晴 / 雨）',
      '独立变量更新失败，变量保持回复后的样子（upstream down）',
    ])
    const en = mountMessage(m, 'en')
    expect(en.find(q('chat-message-problems')).attributes('data-count')).toBe('3')
    expect(en.findAll(q('chat-message-problem'))[0]!.text()).toBe('理.秘密: not changed: its structure is locked (no keys or elements are added or removed)')
  })

  it('offers re-parse and replay on a reply of an MVU chat only', async () => {
    const plain = mountMessage(reply(), 'en')
    expect(plain.find(q('chat-mvu-reparse')).exists()).toBe(false)
    const w = mountMessage(reply(), 'zh', { mvu: true })
    expect(w.get(q('chat-mvu-reparse')).text()).toBe('重新处理变量')
    await w.get(q('chat-mvu-reparse')).trigger('click')
    await w.get(q('chat-mvu-replay')).trigger('click')
    expect(w.emitted('mvu-reparse')).toHaveLength(1)
    expect(w.emitted('mvu-replay')).toHaveLength(1)
    const snapshot = mountMessage(reply({ mvu_snapshot: true }), 'zh', { mvu: true })
    expect(snapshot.get(q('chat-mvu-snapshot-mark')).text()).toBe('快照')
  })
})

describe("the chat header's MVU menu", () => {
  it('is there on an MVU chat only, and names each action', async () => {
    const none = mount(ChatHeader, {
      props: { title: 'x', characterName: 'x', side: null },
      global: { plugins: [makeI18n('zh')] },
    })
    expect(none.find(q('chat-mvu-menu')).exists()).toBe(false)
    const w = mount(ChatHeader, {
      props: { title: 'x', characterName: 'x', side: null, mvu: true },
      global: { plugins: [makeI18n('zh')] },
      attachTo: document.body,
    })
    await w.get(q('chat-mvu-menu')).trigger('click')
    expect(w.get(q('chat-mvu-reinitialise')).text()).toBe('重新读取初始变量')
    expect(w.get(q('chat-mvu-clear-old')).attributes('title')).toContain('10')
    await w.get(q('chat-mvu-snapshot')).trigger('click')
    expect(w.emitted('mvu')).toEqual([['snapshot']])
    w.unmount()
  })
})
