import { describe, expect, it } from 'vitest'
import { answerCall, bridgeScripts, type FrameConfig, type FrameHandlers, messageVariables } from '../src/lib/frameBridge'

function handlers(writes: boolean): FrameHandlers & { saved: unknown[]; sent: string[] } {
  const saved: unknown[] = []
  const sent: string[] = []
  return {
    saved,
    sent,
    writes: () => writes,
    replaceVariables: async (index, variables) => {
      saved.push([index, variables])
      return variables
    },
    sendMessage: async (text) => {
      sent.push(text)
    },
  }
}

describe('frame requests', () => {
  it('refuses writes and sending unless the character allows writes', async () => {
    const closed = handlers(false)
    await expect(answerCall({ fn: 'replaceVariables', args: { type: 'message', message_id: 2, variables: {} } }, closed)).rejects.toThrow(/may not change variables/)
    await expect(answerCall({ fn: 'sendMessage', args: { text: 'hi' } }, closed)).rejects.toThrow(/may not send/)
    expect(closed.saved).toEqual([])
    expect(closed.sent).toEqual([])
  })

  it('writes and sends where allowed, and offers nothing else', async () => {
    const open = handlers(true)
    await answerCall({ fn: 'replaceVariables', args: { type: 'message', message_id: 2, variables: { a: 1 } } }, open)
    await answerCall({ fn: 'sendMessage', args: { text: 'hi' } }, open)
    expect(open.saved).toEqual([[2, { a: 1 }]])
    expect(open.sent).toEqual(['hi'])
    await expect(answerCall({ fn: 'replaceVariables', args: { type: 'global', message_id: 2, variables: {} } }, open)).rejects.toThrow(/global/)
    await expect(answerCall({ fn: 'fetch', args: { url: '/api/chats' } }, open)).rejects.toThrow(/not offered/)
  })
})

describe("MVU's views of a message's variables", () => {
  it('shows changed leaves old->new in display_data and only those in delta_data', () => {
    const before = { stat_data: { 好感度: [10, '好感'], 地点: '村口' } }
    const after = { stat_data: { 好感度: [15, '好感'], 地点: '村口', 新: 1 } }
    const delta = [
      { op: 'replace', path: '/variables/stat_data/好感度/0', value: 15 },
      { op: 'add', path: '/variables/stat_data/新', value: 1 },
    ]
    const out = messageVariables(after, before, delta)
    expect(out.stat_data).toEqual(after.stat_data)
    expect(out.display_data).toEqual({ 好感度: '10->15', 地点: '村口', 新: '1' })
    expect(out.delta_data).toEqual({ 好感度: '10->15', 新: '1' })
  })

  it('shows a value pair the server replaced whole as one variable, old->new', () => {
    // The corpus card 青空 理: `_.set('理.好感度', 0, 5)` reaches the state as one
    // replace of the pair; its status bar reads display_data.理.好感度 and delta_data's.
    const description = '[-30,100]之间,理对 user 的好感度'
    const before = { stat_data: { 理: { 好感度: [0, description], 重要物品: ['圣女头纱', '获得或失去重要物品时更新'] } } }
    const after = { stat_data: { 理: { 好感度: [5, description], 重要物品: ['圣女头纱', '获得或失去重要物品时更新'] } } }
    const delta = [{ op: 'replace', path: '/variables/stat_data/理/好感度', value: [5, description] }]
    const out = messageVariables(after, before, delta)
    expect(out.stat_data).toEqual(after.stat_data)
    expect(out.display_data).toEqual({ 理: { 好感度: '0->5', 重要物品: ['圣女头纱', '获得或失去重要物品时更新'] } })
    expect(out.delta_data).toEqual({ 理: { 好感度: '0->5' } })
  })

  it('still shows a new branch as it is', () => {
    const out = messageVariables({ stat_data: { 新: { 值: [1, '说明'] } } }, { stat_data: {} }, [
      { op: 'add', path: '/variables/stat_data/新', value: { 值: [1, '说明'] } },
    ])
    expect(out.display_data).toEqual({ 新: { 值: [1, '说明'] } })
    expect(out.delta_data).toEqual({})
  })

  it('never shows MVU\'s $meta or array marker to a frame', () => {
    const stored = { stat_data: { 理: { $meta: { extensible: false }, 物品: ['$__META_EXTENSIBLE__$', '火把'] } }, $mvu_schema: { type: 'object' } }
    const out = messageVariables(stored, stored, [])
    expect(out.stat_data).toEqual({ 理: { 物品: ['火把'] } })
    expect(out).not.toHaveProperty('$mvu_schema')
    expect(JSON.stringify(out)).not.toContain('$meta')
    expect(JSON.stringify(out)).not.toContain('$__META_EXTENSIBLE__$')
  })

  it('leaves variables without stat_data as they are', () => {
    expect(messageVariables({ x: 1 }, {}, [])).toEqual({ x: 1 })
  })
})

describe('the bridge prelude', () => {
  it('carries the config so that no markup in it can close the script', () => {
    const config: FrameConfig = {
      frame: 'f',
      nonce: 'n',
      messageId: 0,
      lastMessageId: 0,
      messages: [{ message_id: 0, name: 'x', role: 'assistant', is_hidden: false, message: '</script><script>alert(1)</script>', extra: {} }],
      data: {},
      chat: {},
      global: {},
      character: {},
      card: {},
      charName: 'x',
      userName: 'u',
    }
    const scripts = bridgeScripts(config, '')
    expect(scripts.match(/<\/script>/g)).toHaveLength(1)
    expect(scripts).toContain('getChatMessages')
  })
})

describe('the libraries a frame gets', () => {
  it('inlines jQuery and lodash only where the code names them', async () => {
    const { librariesFor } = await import('../src/lib/frameLibraries')
    expect(librariesFor('<script>document.title = "x"</script>')).toBe('')
    const jq = librariesFor('<script>$("#bar").text(1)</script>')
    expect(jq).toContain('jQuery')
    expect(jq.length).toBeLessThan(120_000)
    expect(librariesFor('<script>const v = _.get(data, "a")</script>')).toContain('lodash')
    expect(librariesFor('<script src="https://cdn.example/x.js"></script>').length).toBeGreaterThan(120_000)
  })
})
