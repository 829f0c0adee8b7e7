import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import { computed, ref } from 'vue'
import type { FrameConfig } from '../src/lib/frameBridge'
import { FRAME_HOST, type FrameHost } from '../src/lib/useFrameHost'
import ChatComposer from '../src/components/chat/ChatComposer.vue'
import ChatMessageItem from '../src/components/chat/ChatMessageItem.vue'
import { makeI18n } from '../src/i18n'
import type { ChatMessage } from '../src/api/chat'
import { message } from './chatFixtures'

const q = (id: string) => `[data-testid="${id}"]`

/** The chat page's frame host, answering nothing. */
function quietHost(): FrameHost {
  return {
    access: ref(null),
    characterId: computed(() => null),
    config: async (messageId, frame, nonce): Promise<FrameConfig> => ({
      frame,
      nonce,
      messageId: messageId ? 0 : null,
      lastMessageId: 0,
      messages: [],
      data: {},
      chat: {},
      global: {},
      character: {},
      card: {},
      charName: '',
      userName: '',
    }),
    attach: () => () => {},
    libraries: async () => '',
  }
}

function mountMessage(m: ChatMessage, over: Record<string, unknown> = {}, host: FrameHost | null = null) {
  return mount(ChatMessageItem, {
    props: { message: m, last: true, editing: false, running: false, scripts: false, ...over },
    global: { plugins: [makeI18n('en')], provide: host ? { [FRAME_HOST as symbol]: host } : {} },
  })
}

describe('a chat message', () => {
  it('folds its thought and shows the reply as text', () => {
    const w = mountMessage(message('a', 'u', { content: '<b>bold?</b> *waves*', thought: 'plan the scene' }))
    const thought = w.find(q('chat-thought'))
    expect(thought.element.tagName).toBe('DETAILS')
    expect((thought.element as HTMLDetailsElement).open).toBe(false)
    expect(thought.text()).toContain('plan the scene')
    // <b> is HTML, so the whole message goes to the sandboxed frame; no markup reaches this page.
    const frame = w.find(q('chat-html-frame'))
    expect(frame.attributes('sandbox')).toBe('allow-same-origin')
    expect(w.find('b').exists()).toBe(false)
  })

  it('never renders model text as markup outside the frame', () => {
    const w = mountMessage(message('a', 'u', { content: 'a < b and <script>alert(1)</script>' }))
    // <script> counts as HTML: it goes to the frame, where scripts are off.
    expect(w.find('script').exists()).toBe(false)
    const plain = mountMessage(message('a', 'u', { content: 'x <y> "quote"' }))
    expect(plain.find(q('chat-message-text')).text()).toBe('x <y> "quote"')
    expect(plain.find('.chat-quote').text()).toBe('"quote"')
  })

  it('runs scripts in the frame only when allowed, without same-origin', async () => {
    const w = mountMessage(message('a', 'u', { content: '<div>bar</div>' }), { scripts: true }, quietHost())
    await flushPromises()
    const frame = w.find(q('chat-html-frame'))
    expect(frame.attributes('sandbox')).toBe('allow-scripts')
    expect(frame.attributes('srcdoc')).toContain('getChatMessages')
    // Without the chat's host to answer the bridge, scripts stay off.
    const alone = mountMessage(message('a', 'u', { content: '<div>bar</div>' }), { scripts: true })
    await flushPromises()
    expect(alone.find(q('chat-html-frame')).attributes('sandbox')).toBe('allow-same-origin')
  })

  it('makes a frame of a page in a code block and keeps the story as text', async () => {
    const content = 'She waves.\n```\n<html><body><b id="hp">10</b></body></html>\n```'
    const w = mountMessage(message('a', 'u', { content }), { scripts: false })
    await flushPromises()
    expect(w.find(q('chat-message-text')).text()).toBe('She waves.')
    const frame = w.find(q('chat-html-frame'))
    expect(frame.attributes('data-page')).toBe('page')
    expect(frame.attributes('sandbox')).toBe('allow-same-origin')
    expect(frame.attributes('srcdoc')).toContain("script-src 'none'")
    // A page mid-stream waits for the reply to finish.
    const streaming = mountMessage(message('a', 'u', { content, status: 'streaming' }))
    await flushPromises()
    expect(streaming.find(q('chat-html-frame')).exists()).toBe(false)
  })

  it('shows n/m and swipes both ways', async () => {
    const w = mountMessage(message('a', 'u', { sibling_index: 1, sibling_count: 3 }))
    expect(w.find(q('chat-swipe-count')).text()).toBe('2/3')
    await w.find(q('chat-swipe-left')).trigger('click')
    await w.find(q('chat-swipe-right')).trigger('click')
    expect(w.emitted('swipe')).toEqual([['left'], ['right']])
  })

  it('marks a stopped reply and offers retry', () => {
    const w = mountMessage(message('a', 'u', { status: 'partial', error: 'stopped' }))
    expect(w.find(q('chat-mark')).text()).toBe('stopped')
    expect(w.attributes('data-mark')).toBe('stopped')
    expect(w.find(q('chat-retry')).exists()).toBe(true)
  })

  it('marks a reply stopped before any text as stopped, and offers retry', () => {
    const w = mountMessage(message('a', 'u', { status: 'error', error: 'stopped', content: '' }))
    expect(w.attributes('data-mark')).toBe('stopped')
    expect(w.find(q('chat-mark')).text()).toBe('stopped')
    // The mark says it all: the same word is not repeated beside it.
    expect(w.find(q('chat-message-error')).exists()).toBe(false)
    expect(w.find(q('chat-retry')).exists()).toBe(true)
    const failed = mountMessage(message('a', 'u', { status: 'error', error: 'HTTP 500' }))
    expect(failed.find(q('chat-mark')).text()).toBe('failed')
    expect(failed.find(q('chat-message-error')).text()).toBe('HTTP 500')
  })

  it('shows swipe arrows on an edited user message, with no new version past the last', async () => {
    const w = mountMessage(message('u', 'a', { role: 'user', sibling_index: 1, sibling_count: 2 }))
    expect(w.find(q('chat-swipe-count')).text()).toBe('2/2')
    expect(w.find(q('chat-swipe-right')).attributes('disabled')).toBeDefined()
    expect(w.find(q('chat-swipe-right')).attributes('aria-label')).toBe('Next version')
    await w.find(q('chat-swipe-left')).trigger('click')
    expect(w.emitted('swipe')).toEqual([['left']])
    // A user message with one version has no arrows; a reply always has them.
    expect(mountMessage(message('u', 'a', { role: 'user' })).find(q('chat-swipe-count')).exists()).toBe(false)
    const reply = mountMessage(message('a', 'u'))
    expect(reply.find(q('chat-swipe-count')).text()).toBe('1/1')
    expect(reply.find(q('chat-swipe-right')).attributes('disabled')).toBeUndefined()
    expect(reply.find(q('chat-swipe-right')).attributes('aria-label')).toBe('Generate another version')
  })

  it('folds what the turn reported behind a small marker that opens to the list', async () => {
    const extra = { problems: ['<add key="gold">: no value', '<state_update>: ignored text outside op tags: oops'] }
    const w = mountMessage(message('a', 'u', { content: 'The door creaks.', extra }))
    const box = w.find(q('chat-message-problems'))
    expect(box.element.tagName).toBe('DETAILS')
    expect((box.element as HTMLDetailsElement).open).toBe(false)
    expect(box.find('summary').text()).toContain('Reported in this turn (2)')
    expect(box.findAll(q('chat-message-problem')).map((li) => li.text())).toEqual(extra.problems)
    // The reply itself is whole.
    expect(w.find(q('chat-message-text')).text()).toBe('The door creaks.')
    expect(mountMessage(message('a', 'u', { extra: { problems: [] } })).find(q('chat-message-problems')).exists()).toBe(false)
  })

  it('edits: Escape cancels, Save rewrites in place, the other button saves a new branch', async () => {
    const w = mountMessage(message('a', 'u', { content: 'old' }), { editing: true })
    const box = w.find(q('chat-edit-text'))
    expect((box.element as HTMLTextAreaElement).value).toBe('old')
    await box.setValue('new text')
    await w.find(q('chat-edit-save')).trigger('click')
    await w.find(q('chat-edit-branch')).trigger('click')
    await box.trigger('keydown', { key: 'Enter', ctrlKey: true })
    await box.trigger('keydown', { key: 'Escape' })
    expect(w.emitted('edit-save')).toEqual([
      ['new text', 'in_place'],
      ['new text', 'branch'],
      ['new text', 'in_place'],
    ])
    expect(w.emitted('edit-cancel')).toHaveLength(1)
  })

  it('shows its number, dims a hidden message and toggles it with the eye', async () => {
    const w = mountMessage(message('a', 'u', { depth: 7, extra: { hidden: true } }))
    expect(w.find(q('chat-message-index')).text()).toBe('#7')
    expect(w.find(q('chat-message')).attributes('data-hidden')).toBe('true')
    expect(w.find(q('chat-hide')).attributes('aria-pressed')).toBe('true')
    await w.find(q('chat-hide')).trigger('click')
    expect(w.emitted('hide')).toEqual([[false]])
  })

  it('lists earlier versions and restores one', async () => {
    const w = mountMessage(message('a', 'u', { extra: { versions: [{ content: 'first', replaced_at: 1 }, { content: 'second', replaced_at: 2 }] } }))
    expect(w.findAll(q('chat-version')).map((v) => v.find('.chat-version-text').text())).toEqual(['first', 'second'])
    await w.findAll(q('chat-version-restore'))[1]!.trigger('click')
    expect(w.emitted('restore')).toEqual([[1]])
  })

  it('jumps when a greyed later message is clicked', async () => {
    const w = mountMessage(message('a', 'u'), { future: true, last: false })
    expect(w.attributes('data-future')).toBe('true')
    expect(w.find(q('chat-swipe-left')).exists()).toBe(false)
    await w.trigger('click')
    expect(w.emitted('jump')).toHaveLength(1)
  })
})

describe('the message box', () => {
  function mountComposer(draft: string, running = false) {
    return mount(ChatComposer, {
      props: { modelValue: draft, running, disabled: false, canReply: false },
      global: { plugins: [makeI18n('en')] },
    })
  }

  it('sends on Enter and keeps Shift+Enter for a new line', async () => {
    const w = mountComposer('hello')
    const box = w.find(q('chat-input'))
    await box.trigger('keydown', { key: 'Enter', shiftKey: true })
    expect(w.emitted('send')).toBeUndefined()
    await box.trigger('keydown', { key: 'Enter' })
    expect(w.emitted('send')).toHaveLength(1)
  })

  it('swipes with the arrows when empty, and shows Stop while a reply is written', async () => {
    const w = mountComposer('')
    await w.find(q('chat-input')).trigger('keydown', { key: 'ArrowRight' })
    expect(w.emitted('swipe')).toEqual([['right']])
    const busy = mountComposer('', true)
    expect(busy.find(q('chat-stop')).exists()).toBe(true)
    expect(busy.find(q('chat-send')).exists()).toBe(false)
  })
})
