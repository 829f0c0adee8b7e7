import { describe, expect, it } from 'vitest'
import {
  applyChatMessage,
  applyDone,
  applyStream,
  canRetry,
  chatEvent,
  composerKeyAction,
  hasSwipes,
  isNewer,
  lastAssistant,
  lastReply,
  messageMark,
  messageProblems,
  swipeAction,
  threadFromView,
  windowStart,
} from '../src/lib/chatThread'
import { chain, CONV, message, view } from './chatFixtures'

describe('server events on the open thread', () => {
  it('appends a reply to the pointer and streams into it', () => {
    let state = threadFromView(view(chain(3)))
    const reply = message('r', 'm2', { status: 'streaming', content: '' })
    const change = applyChatMessage(state, reply, 5)
    expect(change.reload).toBe(false)
    state = change.state
    expect(state.messages.map((m) => m.id)).toEqual(['m0', 'm1', 'm2', 'r'])
    expect(state.conversation).toMatchObject({ pointer: 'r', version: 5 })
    expect(state.running).toBe(true)
    const before = state.messages
    state = applyStream(state, 'r', 'Hel')
    state = applyStream(state, 'r', 'lo', 'hmm')
    expect(state.messages[3]).toMatchObject({ content: 'Hello', thought: 'hmm', status: 'streaming' })
    expect(before[3]!.content).toBe('')
    // Earlier messages keep their identity: only the streaming row re-renders.
    expect(state.messages[0]).toBe(before[0])
    const done = applyDone(state, { messageId: 'r', status: 'partial', error: 'stopped', version: 6 })
    expect(done.state.running).toBe(false)
    expect(done.state.messages[3]).toMatchObject({ status: 'partial', error: 'stopped', content: 'Hello' })
    expect(done.state.conversation.version).toBe(6)
  })

  it('replaces a finalised message in place', () => {
    const state = threadFromView(view(chain(3)))
    const final = message('m2', 'm1', { content: 'final', depth: 2 })
    const { state: next, reload } = applyChatMessage(state, final, 3)
    expect(reload).toBe(false)
    expect(next.messages.map((m) => m.content)).toEqual(['text of m0', 'text of m1', 'final'])
  })

  it('cuts the path at the parent for a sibling generated on an older message', () => {
    const state = threadFromView(view(chain(5), { continuation: [message('x', 'm4')] }))
    const sibling = message('s', 'm1', { sibling_index: 1, sibling_count: 1, status: 'streaming', content: '' })
    const { state: next, reload } = applyChatMessage(state, sibling, 9)
    expect(reload).toBe(false)
    expect(next.messages.map((m) => m.id)).toEqual(['m0', 'm1', 's'])
    expect(next.messages[2]!.sibling_count).toBe(2)
    expect(next.continuation).toEqual([])
    expect(next.conversation.pointer).toBe('s')
  })

  it('keeps a finished reply when the answer that started it arrives after its events', () => {
    let state = threadFromView(view(chain(3)))
    // The events: the reply is made (version 4), streams, and is finished (version 5).
    state = applyChatMessage(state, message('r', 'm2', { status: 'streaming', content: '' }), 4).state
    state = applyStream(state, 'r', 'Done.')
    state = applyChatMessage(state, message('r', 'm2', { content: 'Done.' }), 5).state
    state = applyDone(state, { messageId: 'r', status: 'complete', version: 5 }).state
    // Then the answer of the request, read at version 4: the reply as it was made.
    const late = applyChatMessage(state, message('r', 'm2', { status: 'streaming', content: '' }), 4)
    expect(late.state).toBe(state)
    expect(late.reload).toBe(false)
    expect(late.state.running).toBe(false)
    expect(late.state.messages[3]).toMatchObject({ content: 'Done.', status: 'complete' })
    // A stale message the thread does not show is left to a reload.
    expect(applyChatMessage(state, message('x', 'm0'), 4)).toEqual({ state, reload: true })
    // The same version (a continued reply streaming again) still applies.
    const again = applyChatMessage(state, message('r', 'm2', { status: 'streaming', content: 'Done.' }), 5)
    expect(again.state.messages[3]!.status).toBe('streaming')
    expect(again.state.running).toBe(true)
  })

  it('asks for a reload when a message does not fit the shown path', () => {
    const state = threadFromView(view(chain(3)))
    expect(applyChatMessage(state, message('z', 'elsewhere'), 4).reload).toBe(true)
    expect(applyDone(state, { messageId: 'nope', status: 'complete' }).reload).toBe(true)
    expect(applyChatMessage(state, { ...message('z', 'm2'), conversation_id: 'other' }).state).toBe(state)
  })

  it('ignores stream text for messages it does not show', () => {
    const state = threadFromView(view(chain(2)))
    expect(applyStream(state, 'ghost', 'text')).toBe(state)
  })

  it('reloads only for changes newer than it holds', () => {
    const state = threadFromView(view(chain(2)))
    expect(isNewer(state, 1)).toBe(false)
    expect(isNewer(state, 2)).toBe(true)
  })

  it('knows the messages of the path it did not fetch', () => {
    const tail = chain(4).slice(2)
    const state = threadFromView(view(tail, { earlier: 2 }))
    expect(state.earlier).toBe(2)
    // A reply to the last message fits; a new root cannot be placed without the rest.
    expect(applyChatMessage(state, message('r', 'm3')).state.earlier).toBe(2)
    expect(applyChatMessage(state, message('g', null)).reload).toBe(true)
    expect(threadFromView(view(chain(2))).earlier).toBe(0)
  })

  it('counts a message left streaming as running', () => {
    const messages = chain(2)
    messages[1] = { ...messages[1]!, status: 'streaming' }
    expect(threadFromView(view(messages)).running).toBe(true)
  })
})

describe('reading WebSocket messages', () => {
  it('accepts the four chat events and rejects malformed ones', () => {
    expect(chatEvent({ type: 'chat:stream', conversationId: CONV, messageId: 'r', text: 'a' })).toEqual({
      type: 'chat:stream',
      conversationId: CONV,
      messageId: 'r',
      text: 'a',
      thought: undefined,
    })
    expect(chatEvent({ type: 'chat:done', conversationId: CONV, messageId: 'r', status: 'partial', error: 'stopped', version: 3 })).toMatchObject({
      status: 'partial',
      error: 'stopped',
      version: 3,
    })
    expect(chatEvent({ type: 'chat:changed', conversationId: CONV, version: 7 })).toMatchObject({ version: 7, deleted: false, listed: false })
    expect(chatEvent({ type: 'chat:changed', conversationId: CONV, version: 0, deleted: true, listed: true })).toMatchObject({ deleted: true, listed: true })
    const m = message('r', 'm1')
    expect(chatEvent({ type: 'chat:message', conversationId: CONV, message: m, version: 2 })).toMatchObject({ message: m, version: 2 })
    expect(chatEvent({ type: 'chat:changed', conversationId: CONV })).toBeNull()
    expect(chatEvent({ type: 'chat:message', conversationId: CONV, message: { id: 1 } })).toBeNull()
    // The server's models make `version` required on these (src/api/schema.d.ts).
    expect(chatEvent({ type: 'chat:message', conversationId: CONV, message: m })).toBeNull()
    expect(chatEvent({ type: 'chat:done', conversationId: CONV, messageId: 'r', status: 'complete' })).toBeNull()
    expect(chatEvent({ type: 'chat:stream', text: 'a', messageId: 'r' })).toBeNull()
    expect(chatEvent({ type: 'workflow:started', conversationId: CONV })).toBeNull()
  })

  it('reads snake_case field names as well', () => {
    expect(chatEvent({ type: 'chat:stream', conversation_id: CONV, message_id: 'r', text: 'a' })).toMatchObject({ messageId: 'r' })
  })
})

describe('swipes', () => {
  it('goes to the previous and next sibling', () => {
    const m = message('a', 'u', { sibling_index: 1, sibling_count: 3 })
    expect(swipeAction(m, 'left')).toEqual({ kind: 'swipe', toIndex: 0 })
    expect(swipeAction(m, 'right')).toEqual({ kind: 'swipe', toIndex: 2 })
  })

  it('generates a new reply right of the last sibling, and nothing left of the first', () => {
    const m = message('a', 'u', { sibling_index: 2, sibling_count: 3 })
    expect(swipeAction(m, 'right')).toEqual({ kind: 'generate', messageId: 'a' })
    expect(swipeAction(message('a', 'u'), 'left')).toBeNull()
  })

  it('never generates a greeting or a user message', () => {
    expect(swipeAction(message('g', null), 'right')).toBeNull()
    expect(swipeAction(message('g', null, { sibling_count: 2 }), 'right')).toEqual({ kind: 'swipe', toIndex: 1 })
    expect(swipeAction(message('u', 'a', { role: 'user' }), 'right')).toBeNull()
  })

  it("swipes between the versions of an edited user message, never past the last", () => {
    const edited = message('u', 'a', { role: 'user', sibling_index: 1, sibling_count: 2 })
    expect(swipeAction(edited, 'left')).toEqual({ kind: 'swipe', toIndex: 0 })
    expect(swipeAction(edited, 'right')).toBeNull()
    expect(swipeAction({ ...edited, sibling_index: 0 }, 'right')).toEqual({ kind: 'swipe', toIndex: 1 })
  })

  it('shows arrows on every reply and on any message with other versions', () => {
    expect(hasSwipes(message('a', 'u'))).toBe(true)
    expect(hasSwipes(message('u', 'a', { role: 'user' }))).toBe(false)
    expect(hasSwipes(message('u', 'a', { role: 'user', sibling_count: 2 }))).toBe(true)
    expect(hasSwipes(message('s', null, { role: 'system', sibling_index: 1, sibling_count: 1 }))).toBe(true)
  })

  it('finds the last reply the arrows swipe, and the last one with a prompt', () => {
    const messages = chain(3)
    expect(lastAssistant(messages)?.id).toBe('m2')
    expect(lastReply(messages)?.id).toBe('m2')
    expect(lastReply(chain(2))).toBeNull()
    expect(lastAssistant(messages.slice(0, 2))).toBeNull()
    expect(lastAssistant([])).toBeNull()
  })
})

describe('keys in the message box', () => {
  it('sends on Enter, not on Shift+Enter or while composing', () => {
    expect(composerKeyAction({ key: 'Enter' }, false)).toBe('send')
    expect(composerKeyAction({ key: 'Enter', shiftKey: true }, false)).toBeNull()
    expect(composerKeyAction({ key: 'Enter', isComposing: true }, false)).toBeNull()
  })

  it('swipes with the arrows only when the box is empty', () => {
    expect(composerKeyAction({ key: 'ArrowLeft' }, true)).toBe('swipe-left')
    expect(composerKeyAction({ key: 'ArrowRight' }, true)).toBe('swipe-right')
    expect(composerKeyAction({ key: 'ArrowRight' }, false)).toBeNull()
    expect(composerKeyAction({ key: 'ArrowRight', ctrlKey: true }, true)).toBeNull()
  })
})

describe('marks and windows', () => {
  it('marks stopped, interrupted and failed replies', () => {
    expect(messageMark({ status: 'partial', error: 'stopped by the user' })).toBe('stopped')
    expect(messageMark({ status: 'partial', error: 'interrupted' })).toBe('interrupted')
    expect(messageMark({ status: 'partial', error: 'connection reset' })).toBe('partial')
    expect(messageMark({ status: 'error', error: 'HTTP 500' })).toBe('failed')
    expect(messageMark({ status: 'complete' })).toBeNull()
    expect(messageMark({ status: 'streaming' })).toBe('streaming')
  })

  it('marks a reply stopped before any text came as stopped, not failed', () => {
    expect(messageMark({ status: 'error', error: 'stopped' })).toBe('stopped')
    expect(messageMark({ status: 'error', error: 'Stopped: the user pressed Stop' })).toBe('stopped')
    expect(messageMark({ status: 'error', error: 'the endpoint stopped answering' })).toBe('failed')
    expect(messageMark({ status: 'error', error: null })).toBe('failed')
    expect(canRetry(message('a', 'u', { status: 'error', error: 'stopped' }))).toBe(true)
  })

  it("reads the problems a turn reported, ignoring what is not a message", () => {
    expect(messageProblems(message('a', 'u'))).toEqual([])
    expect(messageProblems(message('a', 'u', { extra: { problems: [] } }))).toEqual([])
    expect(messageProblems(message('a', 'u', { extra: { problems: 'oops' } }))).toEqual([])
    const extra = { problems: ['<add key="gold">: no value', 42, '  ', '<state_update>: ignored text'] }
    expect(messageProblems(message('a', 'u', { extra }))).toEqual(['<add key="gold">: no value', '<state_update>: ignored text'])
  })

  it('offers retry on replies that ended early', () => {
    expect(canRetry(message('a', 'u', { status: 'partial' }))).toBe(true)
    expect(canRetry(message('a', 'u'))).toBe(false)
    expect(canRetry(message('a', null, { status: 'error' }))).toBe(false)
  })

  it('renders the last messages of a long chat', () => {
    expect(windowStart(10_000, 60)).toBe(9_940)
    expect(windowStart(30, 60)).toBe(0)
  })
})
