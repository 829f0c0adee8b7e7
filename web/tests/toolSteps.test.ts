// Tool calls in the chat: the steps folded inside the one assistant message (stored and
// live), the approval card and its answers, the store fed by the WebSocket, the prompt
// inspector's Tools section, and the agent profile in the conversation's settings.
import { flushPromises, mount, RouterLinkStub } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import ApprovalCard from '../src/components/chat/ApprovalCard.vue'
import ChatApprovals from '../src/components/chat/ChatApprovals.vue'
import ChatMessageItem from '../src/components/chat/ChatMessageItem.vue'
import PromptInspector from '../src/components/chat/PromptInspector.vue'
import SettingsDrawer from '../src/components/chat/SettingsDrawer.vue'
import ToolSteps from '../src/components/chat/ToolSteps.vue'
import ToolApprovals from '../src/components/workflow/ToolApprovals.vue'
import { makeI18n } from '../src/i18n'
import {
  acceptToolStep,
  approvals,
  approvalsForConversation,
  mergeSteps,
  refreshApprovals,
  resetToolState,
  startToolEvents,
  storedSteps,
  toolStepFrom,
} from '../src/lib/chatTools'
import { formFromConversation, settingsFromForm } from '../src/lib/chatSettings'
import type { Connection, ServerMessage } from '../src/lib/connection'
import { conversation, message } from './chatFixtures'

const q = (id: string) => `[data-testid="${id}"]`
const i18n = () => ({ global: { plugins: [makeI18n('en')] } })

const ROLL = { step: 1, index: 0, tool: 'chat:RollDice', arguments: { dice: '1d20' }, decision: 'allowed', ok: true, result: { total: 17, rolls: [17] }, durationMs: 3.2 }
const LORE = { step: 1, index: 1, tool: 'kb:CreateEntry', arguments: { kb: 'lore', title: 'The roll' }, decision: 'approved', ok: true, result: { id: 'e1', name: 'The roll', content: 'long text' }, durationMs: 1200, stealth: true }
const DENIED = { step: 2, index: 0, tool: 'kb:UpdateEntry', arguments: {}, decision: 'denied', ok: false, error: 'denied by policy', durationMs: 0 }

interface Call {
  url: string
  method: string
  body: unknown
}
let calls: Call[]
let respond: (call: Call) => { status: number; body: unknown }

beforeEach(() => {
  resetToolState()
  calls = []
  respond = () => ({ status: 404, body: {} })
  vi.stubGlobal('fetch', async (url: string, init: RequestInit) => {
    const call = { url, method: init.method ?? 'GET', body: init.body ? JSON.parse(String(init.body)) : undefined }
    calls.push(call)
    const r = respond(call)
    return new Response(r.body === null ? null : JSON.stringify(r.body), { status: r.status })
  })
})
afterEach(() => {
  vi.unstubAllGlobals()
})

function fakeConnection() {
  const handlers = new Map<string, Set<(m: ServerMessage) => void>>()
  const sent: ServerMessage[] = []
  const conn = {
    on(type: string, h: (m: ServerMessage) => void) {
      if (!handlers.has(type)) handlers.set(type, new Set())
      handlers.get(type)!.add(h)
      return () => handlers.get(type)!.delete(h)
    },
    send: (m: ServerMessage) => sent.push(m),
  } as unknown as Connection
  const emit = (m: ServerMessage) => handlers.get(m.type)?.forEach((h) => h(m))
  return { conn, emit, sent }
}

describe('tool steps', () => {
  it('read the stored steps in call order, with either field spelling', () => {
    const steps = storedSteps({ extra: { tool_steps: [DENIED, LORE, { ...ROLL, durationMs: undefined, duration_ms: 5 }, 'junk'] } })
    expect(steps.map((s) => s.tool)).toEqual(['chat:RollDice', 'kb:CreateEntry', 'kb:UpdateEntry'])
    expect(steps[0]!.durationMs).toBe(5)
    expect(toolStepFrom({ nope: 1 })).toBeNull()
  })

  it('merge live steps after the stored ones, one per call', () => {
    const stored = storedSteps({ extra: { tool_steps: [ROLL] } })
    const live = [toolStepFrom({ ...ROLL, result: 'stale' })!, toolStepFrom(LORE)!]
    const merged = mergeSteps(stored, live)
    expect(merged.map((s) => s.tool)).toEqual(['chat:RollDice', 'kb:CreateEntry'])
    expect(merged[0]!.result).toEqual({ total: 17, rolls: [17] })
  })

  it('are folded inside the message: tool, decision, result, duration, stealth marked', () => {
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [ROLL, LORE, DENIED] } } }, ...i18n() })
    const box = w.find(q('tool-steps'))
    expect(box.element.tagName).toBe('DETAILS')
    expect((box.element as HTMLDetailsElement).open).toBe(false)
    expect(box.find('summary').text()).toContain('Tool calls (3)')
    expect(box.find('summary').text()).toContain('1 failed')
    const steps = w.findAll(q('tool-step'))
    expect(steps.map((s) => s.attributes('data-tool'))).toEqual(['chat:RollDice', 'kb:CreateEntry', 'kb:UpdateEntry'])
    expect(steps[0]!.find(q('tool-step-summary')).text()).toBe('17')
    expect(steps[0]!.find(q('tool-step-duration')).text()).toBe('3 ms')
    expect(steps[1]!.attributes('data-stealth')).toBe('true')
    expect(steps[1]!.find(q('tool-step-decision')).text()).toBe('approved')
    expect(steps[1]!.find(q('tool-step-summary')).text()).toBe('The roll')
    expect(steps[1]!.find(q('tool-step-duration')).text()).toBe('1.2 s')
    expect(steps[2]!.attributes('data-ok')).toBe('false')
    expect(steps[2]!.find(q('tool-step-summary')).text()).toBe('Failed: denied by policy')
    expect(steps[0]!.find(q('tool-step-arguments')).text()).toContain('"dice": "1d20"')
  })

  it('stream in over the WebSocket while the turn runs', async () => {
    const { conn, emit } = fakeConnection()
    const stop = startToolEvents(conn)
    const w = mount(ToolSteps, { props: { message: { id: 'm1' } }, ...i18n() })
    expect(w.find(q('tool-steps')).exists()).toBe(false)
    emit({ type: 'chat:tool-step', conversationId: 'c1', messageId: 'm1', step: ROLL })
    emit({ type: 'chat:tool-step', conversationId: 'c1', messageId: 'other', step: LORE })
    await flushPromises()
    expect(w.findAll(q('tool-step')).map((s) => s.attributes('data-tool'))).toEqual(['chat:RollDice'])
    stop()
  })

  it('sit inside the one assistant message, not in a message of their own', () => {
    const m = message('a', 'u', { content: 'You rolled well.', extra: { tool_steps: [ROLL] } })
    const w = mount(ChatMessageItem, { props: { message: m, last: true, editing: false, running: false, scripts: false }, ...i18n() })
    expect(w.findAll(q('tool-steps'))).toHaveLength(1)
    expect(w.find(q('chat-message-text')).text()).toBe('You rolled well.')
    const user = mount(ChatMessageItem, { props: { message: message('u', null, { role: 'user', extra: { tool_steps: [ROLL] } }), last: false, editing: false, running: false, scripts: false }, ...i18n() })
    expect(user.find(q('tool-steps')).exists()).toBe(false)
  })

  it('ignore a live step that names no message', () => {
    acceptToolStep({ type: 'chat:tool-step', step: ROLL })
    acceptToolStep({ type: 'chat:tool-step', messageId: 'm1', step: { bad: true } })
    const w = mount(ToolSteps, { props: { message: { id: 'm1' } }, ...i18n() })
    expect(w.find(q('tool-steps')).exists()).toBe(false)
  })
})

const PENDING = { id: 'ap1', tool: 'kb:CreateEntry', arguments: { title: 'The roll', content: 'Mira rolled 17' }, caller: { kind: 'agent', name: 'dice-keeper' }, conversationId: 'c1', runId: 'r1:agent' }

describe('a CodeInterpreter call', () => {
  const CODE = 'def primes(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\nprint(sum(primes(100)))\nlen(primes(100))\n'
  const RUN = {
    step: 1,
    index: 0,
    tool: 'CodeInterpreter:execute',
    arguments: { language: 'python', code: CODE },
    decision: 'allowed',
    ok: true,
    durationMs: 40,
    result: {
      language: 'python',
      stdout: '1060\n',
      stderr: '',
      value: '25',
      files: [
        { name: 'primes.txt', size: 2048, text: '2 3 5 7' },
        { name: 'plot.png', size: 3 * 1024 * 1024 },
      ],
      duration_ms: 38,
      limit: null,
      exit_code: 0,
      error: null,
    },
  }
  const STOPPED = {
    ...RUN,
    index: 1,
    arguments: { language: 'javascript', code: 'while (true) {}' },
    result: { language: 'javascript', stdout: '', stderr: '', value: null, files: [], duration_ms: 10000, limit: 'wall_time', exit_code: null, error: null },
  }
  const RAISED = {
    ...RUN,
    index: 2,
    arguments: { language: 'python', code: '1 / 0' },
    result: { ...RUN.result, stdout: '', value: null, files: [], error: 'ZeroDivisionError: division by zero (line 1)', exit_code: 1 },
  }

  async function highlighted(w: ReturnType<typeof mount>): Promise<void> {
    await vi.waitFor(
      () => {
        for (const block of w.findAll(q('code-run-source'))) expect(block.attributes('data-highlighted')).toBe('true')
      },
      { timeout: 5000 },
    )
  }

  it('folds the code, with its language and length on the fold, highlighted inside', async () => {
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [RUN] } }, open: true }, ...i18n() })
    const step = w.get(q('tool-step'))
    const fold = step.get(q('code-run-code'))
    expect(fold.element.tagName).toBe('DETAILS')
    expect((fold.element as HTMLDetailsElement).open).toBe(false)
    expect(fold.get(q('code-run-fold')).text()).toBe('Python · 4 lines')
    await highlighted(w)
    const source = fold.get(q('code-run-source'))
    expect(source.attributes('data-language')).toBe('python')
    expect(source.findAll('.code-line')).toHaveLength(4)
    expect(source.findAll('.tok-keyword').map((e) => e.text())).toEqual(expect.arrayContaining(['def', 'return', 'for', 'in', 'if']))
    expect(source.text()).toContain('print(sum(primes(100)))')
  })

  it('shows what the code printed, its value and the files it wrote', () => {
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [RUN] } }, open: true }, ...i18n() })
    const step = w.get(q('tool-step'))
    expect(step.get(q('tool-step-summary')).text()).toBe('25')
    expect(step.get(q('code-run-stdout')).text()).toBe('1060')
    expect(step.get(q('code-run-value')).text()).toBe('25')
    const files = step.findAll(q('code-run-file'))
    expect(files.map((f) => f.attributes('data-name'))).toEqual(['primes.txt', 'plot.png'])
    expect(files[0]!.text()).toContain('2.0 KB')
    // Small text files can be read in place, folded; others are only named.
    const text = files[0]!.get('details')
    expect((text.element as HTMLDetailsElement).open).toBe(false)
    expect(text.get(q('code-run-file-text')).text()).toBe('2 3 5 7')
    expect(files[1]!.text()).toContain('3.0 MB')
    expect(files[1]!.find('details').exists()).toBe(false)
    expect(step.find(q('code-run-error')).exists()).toBe(false)
    expect(step.find(q('code-run-limit')).exists()).toBe(false)
  })

  it('says which limit stopped the run, and shows the error the code raised', async () => {
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [RUN, STOPPED, RAISED] } }, open: true }, ...i18n() })
    const [, stopped, raised] = w.findAll(q('tool-step'))
    expect(stopped!.get(q('code-run')).attributes('data-limit')).toBe('wall_time')
    expect(stopped!.get(q('code-run-limit')).text()).toBe('Stopped by the time limit')
    expect(stopped!.get(q('code-run-fold')).text()).toBe('JavaScript · 1 line')
    expect(raised!.get(q('code-run-error')).text()).toContain('ZeroDivisionError: division by zero (line 1)')
    expect(raised!.get(q('tool-step-summary')).text()).toBe('ZeroDivisionError: division by zero (line 1)')
    // An error in the code is a result the model reads, not a failed call.
    expect(raised!.attributes('data-ok')).toBe('true')
    await highlighted(w)
    expect(stopped!.get(q('code-run-source')).findAll('.tok-keyword').map((e) => e.text())).toContain('while')
  })

  it('still shows the code of a call that was refused', () => {
    const denied = { ...RUN, decision: 'denied', ok: false, result: null, error: 'denied by policy' }
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [denied] } }, open: true }, ...i18n() })
    expect(w.get(q('code-run-source')).text()).toContain('def primes(n):')
    expect(w.find(q('code-run-stdout')).exists()).toBe(false)
    expect(w.get(q('tool-step-summary')).text()).toBe('Failed: denied by policy')
  })

  it('leaves the other tools as they were', () => {
    const w = mount(ToolSteps, { props: { message: { id: 'm1', extra: { tool_steps: [ROLL] } }, open: true }, ...i18n() })
    expect(w.find(q('code-run')).exists()).toBe(false)
    expect(w.get(q('tool-step-summary')).text()).toBe('17')
  })
})

describe('approvals', () => {
  it('arrive over the WebSocket and show in the chat of their conversation and on the canvas of their run', async () => {
    const { conn, emit } = fakeConnection()
    respond = (c) => (c.url === '/api/tools/approvals' ? { status: 200, body: [] } : { status: 404, body: {} })
    startToolEvents(conn)
    await flushPromises()
    emit({ type: 'tool:approval-needed', approval: PENDING })
    const chat = mount(ChatApprovals, { props: { conversationId: 'c1' }, ...i18n() })
    const otherChat = mount(ChatApprovals, { props: { conversationId: 'c2' }, ...i18n() })
    const canvas = mount(ToolApprovals, { props: { runId: 'r1' }, ...i18n() })
    const otherRun = mount(ToolApprovals, { props: { runId: 'r' }, ...i18n() })
    await flushPromises()
    expect(chat.findAll(q('approval-card'))).toHaveLength(1)
    expect(otherChat.find(q('approval-card')).exists()).toBe(false)
    expect(canvas.findAll(q('approval-card'))).toHaveLength(1)
    expect(otherRun.find(q('approval-card')).exists()).toBe(false)
    const card = chat.find(q('approval-card'))
    expect(card.text()).toContain('Run kb:CreateEntry?')
    expect(card.find(q('approval-caller')).text()).toContain('agent · dice-keeper')
    expect(card.find(q('approval-arguments')).text()).toContain('Mira rolled 17')

    emit({ type: 'tool:approval-resolved', id: 'ap1', decision: 'deny' })
    await flushPromises()
    expect(chat.find(q('approval-card')).exists()).toBe(false)
  })

  it('pending ones are fetched on page load', async () => {
    respond = (c) => (c.url === '/api/tools/approvals' ? { status: 200, body: [PENDING, { junk: true }] } : { status: 404, body: {} })
    await refreshApprovals()
    expect(approvalsForConversation('c1').map((a) => a.id)).toEqual(['ap1'])
  })

  for (const [button, decision] of [
    ['approval-allow-once', 'allow_once'],
    ['approval-always', 'always'],
    ['approval-deny', 'deny'],
  ] as const) {
    it(`${button} posts "${decision}" and the card goes`, async () => {
      respond = (c) => {
        if (c.url === '/api/tools/approvals') return { status: 200, body: [PENDING] }
        if (c.url === '/api/tools/approvals/ap1') return { status: 204, body: null }
        return { status: 404, body: {} }
      }
      await refreshApprovals()
      const w = mount(ChatApprovals, { props: { conversationId: 'c1' }, ...i18n() })
      await w.find(q(button)).trigger('click')
      await flushPromises()
      const post = calls.find((c) => c.url === '/api/tools/approvals/ap1')!
      expect(post.method).toBe('POST')
      expect(post.body).toEqual({ decision })
      expect(w.find(q('approval-card')).exists()).toBe(false)
    })
  }

  it('an answer the server refuses stays on the card with the reason', async () => {
    respond = (c) => (c.url === '/api/tools/approvals/ap1' ? { status: 409, body: { error: { message: 'the run was stopped' } } } : { status: 200, body: [PENDING] })
    await refreshApprovals()
    const w = mount(ApprovalCard, { props: { approval: approvals.pending[0]! }, ...i18n() })
    await w.find(q('approval-allow-once')).trigger('click')
    await flushPromises()
    expect(w.find(q('approval-error')).text()).toContain('the run was stopped')
    expect(approvals.pending).toHaveLength(1)
  })

  it('over the WebSocket when the server cannot be reached by HTTP', async () => {
    const { conn, sent } = fakeConnection()
    startToolEvents(conn)
    respond = () => ({ status: 200, body: [PENDING] })
    await refreshApprovals()
    vi.stubGlobal('fetch', async () => Promise.reject(new TypeError('network down')))
    const w = mount(ApprovalCard, { props: { approval: approvals.pending[0]! }, ...i18n() })
    await w.find(q('approval-always')).trigger('click')
    await flushPromises()
    expect(sent).toContainEqual({ type: 'tool:approval', id: 'ap1', decision: 'always' })
    expect(approvals.pending).toHaveLength(0)
  })
})

describe('the agent profile of a conversation', () => {
  it('is a setting of the form, saved as agent_profile, cleared with null', () => {
    const c = conversation()
    const form = formFromConversation(c)
    expect(form.agent_profile).toBe('')
    expect('agent_profile' in settingsFromForm(form, c.settings)).toBe(false)
    const saved = settingsFromForm({ ...form, agent_profile: 'dice-keeper' }, c.settings)
    expect(saved.agent_profile).toBe('dice-keeper')
    const withOne = conversation({ settings: { ...c.settings, agent_profile: 'dice-keeper' } })
    expect(formFromConversation(withOne).agent_profile).toBe('dice-keeper')
    expect(settingsFromForm({ ...formFromConversation(withOne), agent_profile: '' }, withOne.settings).agent_profile).toBeNull()
  })
})

describe('the agent profile picker in the conversation settings', () => {
  it('lists the project’s profiles and saves the chosen one with the form', async () => {
    respond = (c) => {
      if (c.url === '/api/agents') return { status: 200, body: [{ id: 'dice-keeper', name: 'Dice keeper', tool_ids_inventory: ['chat:RollDice'] }, { id: 'plain', name: 'plain' }] }
      if (c.url === '/api/workflows') return { status: 200, body: { workflows: [], broken: [] } }
      return { status: 404, body: {} }
    }
    const w = mount(SettingsDrawer, { props: { conversation: conversation(), busy: false }, global: { plugins: [makeI18n('en')], stubs: { RouterLink: RouterLinkStub } } })
    await flushPromises()
    const select = w.find(q('chat-settings-agent-profile'))
    expect(select.findAll('option').map((o) => [o.attributes('value'), o.text()])).toEqual([
      ['', 'None (no tools)'],
      ['dice-keeper', 'Dice keeper (dice-keeper)'],
      ['plain', 'plain'],
    ])
    await select.setValue('dice-keeper')
    await w.find('form').trigger('submit')
    const saved = w.emitted('save')?.[0]?.[0] as { settings: Record<string, unknown> }
    expect(saved.settings.agent_profile).toBe('dice-keeper')
  })

  it('keeps a profile the project no longer has, marked, and says when the list failed', async () => {
    respond = (c) => (c.url === '/api/agents' ? { status: 500, body: { error: { message: 'disk on fire' } } } : { status: 404, body: {} })
    const c = conversation()
    const w = mount(SettingsDrawer, { props: { conversation: conversation({ settings: { ...c.settings, agent_profile: 'gone' } }), busy: false }, global: { plugins: [makeI18n('en')], stubs: { RouterLink: RouterLinkStub } } })
    await flushPromises()
    expect(w.find(q('chat-settings-agent-error')).text()).toContain('disk on fire')
    expect((w.find(q('chat-settings-agent-profile')).element as HTMLSelectElement).value).toBe('gone')
  })
})

describe('the prompt inspector', () => {
  it('lists the turn’s tool calls in a Tools section', async () => {
    respond = () => ({ status: 200, body: { blocks: [], lore: [], cut: [], messages: [] } })
    const w = mount(PromptInspector, {
      props: { conversationId: 'c1', messageId: 'm1', message: { id: 'm1', extra: { tool_steps: [ROLL, DENIED] } } },
      ...i18n(),
    })
    await flushPromises()
    const rows = w.findAll(q('chat-prompt-tool'))
    expect(rows.map((r) => [r.attributes('data-tool'), r.attributes('data-ok')])).toEqual([
      ['chat:RollDice', 'true'],
      ['kb:UpdateEntry', 'false'],
    ])
    expect(w.text()).toContain('Tools (2)')
    expect(rows[0]!.text()).toContain('17')
  })

  it('says when the turn called no tools', async () => {
    respond = () => ({ status: 200, body: { blocks: [], lore: [], cut: [], messages: [] } })
    const w = mount(PromptInspector, { props: { conversationId: 'c1', messageId: 'm1' }, ...i18n() })
    await flushPromises()
    expect(w.text()).toContain('This turn called no tools.')
  })
})
