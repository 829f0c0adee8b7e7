// The chat's daily parts as logic: the prompt manager's model, the inspector's lore
// sections, who speaks (names and faces), hidden messages, versions and token counts.
import { describe, expect, it } from 'vitest'
import type { CutBlock, LoreRecord } from '../src/api/chat'
import type { Workflow } from '../src/api/workflows'
import { loreCutCount, loreSections } from '../src/lib/chatInspector'
import { characterAvatarUrl, initials, speakersOf } from '../src/lib/chatPeople'
import {
  copyIdFor,
  moveLine,
  parseSampler,
  type PromptDefaults,
  promptConfig,
  promptLines,
  samplersOf,
  withPromptManager,
} from '../src/lib/chatPrompts'
import { isHiddenMessage, laterOnBranch, messageTime, messageVersions, uncounted } from '../src/lib/chatThread'
import { chain, conversation, message } from './chatFixtures'

const DEFAULTS: PromptDefaults = {
  prompts: [
    { identifier: 'main', name: 'Main Prompt', content: 'Be {{char}}.' },
    { identifier: 'charDescription', name: 'Char Description', marker: true },
    { identifier: 'chatHistory', name: 'Chat History', marker: true },
    { identifier: 'nsfw', name: 'Auxiliary Prompt' },
  ],
  prompt_order: [
    { identifier: 'main', enabled: true },
    { identifier: 'charDescription', enabled: true },
    { identifier: 'chatHistory', enabled: true },
  ],
}

function pipeline(builder: Record<string, unknown> = {}, invoker: Record<string, unknown> = {}): Workflow {
  return {
    id: 'chat-default',
    nodes: [
      { id: 'builder', type: 'chat:SkeinBuilder', config: builder, position: { x: 0, y: 0 } },
      { id: 'budget', type: 'chat:TokenBudget', config: { reserve_tokens: 512 }, position: { x: 1, y: 0 } },
      { id: 'invoker', type: 'chat:LLMInvoker', config: invoker, position: { x: 2, y: 0 } },
    ],
    edges: [],
  }
}

describe('the prompt manager', () => {
  it('lists the defaults in order when the pipeline leaves them out, unordered prompts last and off', () => {
    const lines = promptLines({}, DEFAULTS)
    expect(lines.map((l) => [l.prompt.identifier, l.enabled])).toEqual([
      ['main', true],
      ['charDescription', true],
      ['chatHistory', true],
      ['nsfw', false],
    ])
  })

  it('follows the config, skipping order entries that name no prompt', () => {
    const config = {
      prompts: DEFAULTS.prompts,
      prompt_order: [{ identifier: 'ghost' }, { identifier: 'chatHistory', enabled: false }, { identifier: 'main' }],
    }
    expect(promptLines(config, DEFAULTS).map((l) => [l.prompt.identifier, l.enabled])).toEqual([
      ['chatHistory', false],
      ['main', true],
      ['charDescription', false],
      ['nsfw', false],
    ])
  })

  it('moves a line and writes the order back', () => {
    const lines = moveLine(promptLines({}, DEFAULTS), 2, 0)
    expect(lines.map((l) => l.prompt.identifier)).toEqual(['chatHistory', 'main', 'charDescription', 'nsfw'])
    expect(moveLine(lines, 0, 99).map((l) => l.prompt.identifier)).toEqual(['main', 'charDescription', 'nsfw', 'chatHistory'])
    expect(moveLine(lines, 7, 0)).toEqual(lines)
    expect(promptConfig(lines).prompt_order).toEqual([
      { identifier: 'chatHistory', enabled: true },
      { identifier: 'main', enabled: true },
      { identifier: 'charDescription', enabled: true },
      { identifier: 'nsfw', enabled: false },
    ])
  })

  it('writes prompts and samplers into their nodes and leaves the rest alone', () => {
    const wf = pipeline({ wi_format: '{0}' }, { temperature: 0.7, top_p: 0.9 })
    const samplers = { ...samplersOf(wf), temperature: 1.1, top_p: null, max_context_tokens: 4096 }
    const out = withPromptManager(wf, promptLines({}, DEFAULTS), samplers)
    const [builder, budget, invoker] = out.nodes
    expect(builder!.config.wi_format).toBe('{0}')
    expect((builder!.config.prompt_order as unknown[]).length).toBe(4)
    expect(budget!.config).toEqual({ reserve_tokens: 512, max_context_tokens: 4096 })
    expect(invoker!.config).toEqual({ temperature: 1.1 })
    expect(wf.nodes[2]!.config).toEqual({ temperature: 0.7, top_p: 0.9 })
  })

  it('reads samplers, and checks typed ones against their ranges', () => {
    expect(samplersOf(pipeline({}, { temperature: 0.5, seed: 3 }))).toMatchObject({ temperature: 0.5, seed: 3, top_p: null, max_context_tokens: null })
    expect(parseSampler('temperature', '')).toEqual({ value: null, ok: true })
    expect(parseSampler('temperature', '1.5')).toEqual({ value: 1.5, ok: true })
    expect(parseSampler('temperature', '3').ok).toBe(false)
    expect(parseSampler('max_tokens', '1.5').ok).toBe(false)
    expect(parseSampler('top_p', 'abc').ok).toBe(false)
    expect(parseSampler('top_p', 0.5)).toEqual({ value: 0.5, ok: true })
  })

  it('gives a built-in a copy id that is not taken', () => {
    expect(copyIdFor('chat-default', ['chat-default', 'chat-default-2'])).toBe('chat-default-3')
    expect(copyIdFor('chat-default', [])).toBe('chat-default-2')
  })
})

function record(kb: string, entry: string, over: Partial<LoreRecord> = {}): LoreRecord {
  return { kb_id: kb, entry_id: entry, title: entry, activated: true, tokens: 10, reasons: [], ...over }
}

describe('the inspector lore', () => {
  it('puts what went in first, grouped by KB name, and counts budget cuts as left out', () => {
    const lore = [
      record('kb1', 'a', { kb_name: 'Eldoria', scope: 'global' }),
      record('kb2', 'b'),
      record('kb1', 'c', { kb_name: 'Eldoria', activated: false, tokens: 40 }),
      record('kb1', 'd', { kb_name: 'Eldoria' }),
      record('kb2', 'e', { reasons: [{ rule: 'token_budget', outcome: 'dropped' }] }),
    ]
    const cut: CutBlock[] = [{ id: 'lore:kb1/d', kind: 'lore', tokens: 10, reason: 'budget' }]
    const sections = loreSections(lore, cut)
    expect(sections.included.map((g) => [g.name, g.scope, g.entries.map((e) => e.record.entry_id)])).toEqual([
      ['Eldoria', 'global', ['a']],
      ['kb2', null, ['b']],
    ])
    expect(sections.dropped.map((g) => [g.name, g.entries.map((e) => [e.record.entry_id, e.cutByBudget])])).toEqual([
      ['Eldoria', [['c', false], ['d', true]]],
      ['kb2', [['e', true]]],
    ])
    expect(loreCutCount(sections)).toBe(2)
  })
})

describe('who speaks', () => {
  it('names the character and the persona, with their faces', () => {
    const conv = conversation({
      character: { source_preset: 'sera', card: { name: 'Seraphina', avatar: 'sera.png' } },
      settings: { ...conversation().settings, user_name: 'Ann', persona_id: 'p2' },
    })
    const personas = [
      { id: 'p1', name: 'Default Dan', is_default: true },
      { id: 'p2', name: 'Wren', avatar_url: '/api/personas/p2/avatar?v=1' },
    ]
    expect(speakersOf(conv, personas)).toEqual({
      names: { assistant: 'Seraphina', user: 'Wren' },
      avatars: { assistant: '/api/characters/sera/avatar', user: '/api/personas/p2/avatar?v=1' },
    })
    // The chat's copy of the card has no avatar, its character has one now: the character's route.
    const bare = conversation({ character: { source_preset: 'mira', card: { name: 'Mira' } } })
    expect(characterAvatarUrl(bare)).toBe('/api/characters/mira/avatar')
    const plain = conversation({ settings: { ...conversation().settings, user_name: 'Ann' } })
    expect(speakersOf(plain, personas).names.user).toBe('Default Dan')
    expect(speakersOf(plain).names).toEqual({ assistant: 'Seraphina', user: 'Ann' })
    expect(characterAvatarUrl(plain)).toBeNull()
    expect(initials('Mira of the Inn')).toBe('MI')
    expect(initials('塞拉')).toBe('塞')
  })
})

describe('per message', () => {
  it('reads hidden marks and earlier versions from extra', () => {
    expect(isHiddenMessage(message('a', null, { extra: { hidden: true } }))).toBe(true)
    expect(isHiddenMessage(message('a', null, { extra: { hidden: 'yes' } }))).toBe(false)
    const versions = messageVersions(message('a', null, { extra: { versions: [{ content: 'old', replaced_at: 5 }, { bad: 1 }, 'x'] } }))
    expect(versions).toEqual([{ content: 'old', replaced_at: 5 }])
  })

  it('counts the messages a swipe leaves on the other version', () => {
    const path = chain(5)
    expect(laterOnBranch(path, 'm1')).toBe(3)
    expect(laterOnBranch(path, 'm4')).toBe(0)
    expect(laterOnBranch(path, 'nope')).toBe(0)
  })

  it('asks for token counts only for new or changed texts, never for a reply being written', () => {
    const path = [...chain(3), message('s', 'm2', { status: 'streaming' })]
    const known = new Map([
      ['m0', { content: 'text of m0', tokens: 3 }],
      ['m1', { content: 'an older text', tokens: 4 }],
    ])
    expect(uncounted(path, known)).toEqual(['m1', 'm2'])
  })

  it('shows the time, and the date when it is not today', () => {
    const now = new Date(2026, 10, 25, 18, 0)
    const today = messageTime(new Date(2026, 10, 25, 9, 5).getTime() / 1000, now, 'en-GB')
    expect(today.short).toBe('09:05')
    const earlier = messageTime(new Date(2025, 0, 2, 9, 5).getTime() / 1000, now, 'en-GB')
    expect(earlier.short).toContain('2025')
    expect(earlier.iso).toBe(new Date(2025, 0, 2, 9, 5).toISOString())
  })
})
