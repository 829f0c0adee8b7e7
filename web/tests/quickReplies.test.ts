import { describe, expect, it } from 'vitest'
import type { QuickReplySetView } from '../src/api/quickReplies'
import { conversation } from './chatFixtures'
import { formFromConversation, settingsFromForm } from '../src/lib/chatSettings'
import { chatBackgroundStyle, quickReplyBar, quickReplyClick, shownExpression } from '../src/lib/quickReplies'

function set(name: string, options: Partial<QuickReplySetView['set']> = {}, visible = true): QuickReplySetView {
  return {
    name,
    visible,
    send: !options.disableSend,
    buttons: [
      { id: 1, label: 'Look', title: '', message: 'I look around.', runnable: true, not_runnable: null },
      { id: 2, label: 'Roll', title: '', message: '/roll 1d20', runnable: false, not_runnable: 'a slash command' },
    ],
    set: {
      version: 2,
      name,
      disableSend: false,
      placeBeforeInput: false,
      injectInput: false,
      color: 'transparent',
      onlyBorderColor: false,
      qrList: [],
      ...options,
    },
  }
}

describe('quick reply bar', () => {
  it('shows the visible sets that have buttons, in order', () => {
    const empty = { ...set('Empty'), buttons: [] }
    expect(quickReplyBar([set('A'), set('Hidden', {}, false), empty, set('B')]).map((s) => s.name)).toEqual(['A', 'B'])
  })

  it('sends the reply as typed, replacing the draft, unless the set only fills the box', () => {
    const look = set('A').buttons[0]!
    expect(quickReplyClick(set('A'), look, 'draft')).toEqual({ text: 'I look around.', send: true })
    expect(quickReplyClick(set('A', { disableSend: true }), look, '')).toEqual({ text: 'I look around.', send: false })
  })

  it('joins the draft when the set injects, before it with placeBeforeInput', () => {
    const look = set('A').buttons[0]!
    expect(quickReplyClick(set('A', { injectInput: true }), look, 'Then')).toEqual({ text: 'Then I look around.', send: true })
    expect(quickReplyClick(set('A', { injectInput: true, placeBeforeInput: true }), look, 'slowly')).toEqual({
      text: 'I look around. slowly',
      send: true,
    })
    expect(quickReplyClick(set('A', { injectInput: true }), look, '')).toEqual({ text: 'I look around.', send: true })
  })

  it('never runs a slash command', () => {
    expect(quickReplyClick(set('A'), set('A').buttons[1]!, '')).toBeNull()
  })
})

describe('chat background and sprite', () => {
  it('names the image behind the chat, its name encoded', () => {
    expect(chatBackgroundStyle('tavern night.png').backgroundImage).toBe('url("/api/backgrounds/tavern%20night.png")')
    expect(chatBackgroundStyle('a"b).png').backgroundImage).toBe('url("/api/backgrounds/a%22b).png")')
    expect(chatBackgroundStyle(null)).toEqual({})
  })

  it('shows the picked sprite when the character has it, else its default', () => {
    expect(shownExpression('joy', ['joy', 'neutral'], 'neutral')).toBe('joy')
    expect(shownExpression('anger', ['joy', 'neutral'], 'neutral')).toBe('neutral')
    expect(shownExpression(null, ['joy'], null)).toBeNull()
  })
})

describe('the settings drawer form', () => {
  it('sets, keeps and clears the chat background', () => {
    const none = conversation({ settings: { ...conversation().settings } })
    const form = formFromConversation(none)
    expect(form.background).toBe('')
    expect('background' in settingsFromForm(form, none.settings)).toBe(false)
    const set = settingsFromForm({ ...form, background: 'tavern.png' }, none.settings)
    expect(set.background).toBe('tavern.png')
    const withOne = conversation({ settings: set })
    expect(formFromConversation(withOne).background).toBe('tavern.png')
    expect(settingsFromForm({ ...formFromConversation(withOne), background: '' }, set).background).toBeNull()
  })
})
