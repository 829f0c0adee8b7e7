import { mount, type VueWrapper } from '@vue/test-utils'
import { afterEach, describe, expect, it } from 'vitest'
import ChatHeader from '../src/components/chat/ChatHeader.vue'
import { makeI18n } from '../src/i18n'
import { SIDE_TABS } from '../src/lib/chatSide'

const q = (id: string) => `[data-testid="${id}"]`
let wrapper: VueWrapper | null = null

function header(locale: 'en' | 'zh' = 'en'): VueWrapper {
  wrapper = mount(ChatHeader, {
    props: { title: 'Mira', characterName: 'Mira', side: null },
    global: { plugins: [makeI18n(locale)] },
    attachTo: document.body,
  })
  return wrapper
}

afterEach(() => {
  wrapper?.unmount()
  wrapper = null
})

describe('the chat header', () => {
  it('has a button for the chat\'s lore beside its other panels', () => {
    const w = header()
    expect(SIDE_TABS).toContain('lore')
    expect(w.get(q('chat-side-lore')).text()).toBe('Lore')
    expect(header('zh').get(q('chat-side-lore')).text()).toBe('设定')
  })

  it('folds every panel into one menu that says whether it is open', async () => {
    const w = header()
    const button = w.get(q('chat-panels-menu'))
    expect(button.attributes('aria-expanded')).toBe('false')
    expect(w.get(q('chat-panels-list')).isVisible()).toBe(false)
    await button.trigger('click')
    expect(button.attributes('aria-expanded')).toBe('true')
    expect(w.get(q('chat-panels-list')).isVisible()).toBe(true)
    const items = w.findAll(`${q('chat-panels-list')} button`)
    expect(items.map((i) => i.attributes('data-testid'))).toEqual(SIDE_TABS.map((tab) => `chat-panels-${tab}`))
  })

  it('opens the picked panel and closes the menu', async () => {
    const w = header()
    await w.get(q('chat-panels-menu')).trigger('click')
    await w.get(q('chat-panels-lore')).trigger('click')
    expect(w.emitted('toggle')).toEqual([['lore']])
    expect(w.get(q('chat-panels-menu')).attributes('aria-expanded')).toBe('false')
  })

  it('closes on Escape and gives the focus back to its button', async () => {
    const w = header()
    const button = w.get(q('chat-panels-menu'))
    await button.trigger('click')
    document.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' }))
    await w.vm.$nextTick()
    expect(button.attributes('aria-expanded')).toBe('false')
    expect(document.activeElement).toBe(button.element)
  })

  it('closes on a press outside it, not on one inside', async () => {
    const w = header()
    const button = w.get(q('chat-panels-menu'))
    await button.trigger('click')
    w.get(q('chat-panels-list')).element.dispatchEvent(new Event('pointerdown', { bubbles: true }))
    await w.vm.$nextTick()
    expect(button.attributes('aria-expanded')).toBe('true')
    document.body.dispatchEvent(new Event('pointerdown', { bubbles: true }))
    await w.vm.$nextTick()
    expect(button.attributes('aria-expanded')).toBe('false')
  })
})
