// The Tools page's and Settings → Extensions' logic without Vue: config option cards and
// PUT bodies, tool search and fnmatch globs, plugin grants, agent profile and MCP forms.
import { describe, expect, it } from 'vitest'
import type { ConfigOptionInfo } from '../src/api/config'
import type { McpServerInfo } from '../src/api/mcp'
import { newAgentProfile } from '../src/api/agents'
import { AVAILABLE_TOOLS_MARKER, profileErrors, promptLacksToolDocs, toggleInventory, unknownInventory } from '../src/lib/agentProfileForm'
import { buildUpdate, draftValue, initialDraft, optionCards, problemsByKey } from '../src/lib/configOptions'
import { mcpFormErrors, mcpFormFrom, mcpUpdate } from '../src/lib/mcpServerForm'
import {
  callerText,
  declaredItems,
  durationText,
  globMatches,
  matchingIds,
  needsGrant,
  parseGlobList,
  requestedOverrides,
  searchTools,
} from '../src/lib/toolCatalog'
import { plugin, tool } from './toolFixtures'

function option(over: Partial<ConfigOptionInfo> & { key: string }): ConfigOptionInfo {
  return { type: 'string', label: over.key, value: null, plugin: null, tool: null, ...over }
}

describe('config option cards', () => {
  const options = [
    option({ key: 'extensions.b.mode', plugin: 'b', category: 'Style' }),
    option({ key: 'extensions.a.on', plugin: 'a', type: 'boolean' }),
    option({ key: 'extensions.a.size', plugin: 'a', type: 'integer', category: 'Layout' }),
    option({ key: 'extensions.a.title', plugin: 'a' }),
    option({ key: 'endpoint', plugin: 'a', tool: 'a:fetch' }),
    option({ key: 'units', plugin: null, tool: 'system:get_current_time' }),
    option({ key: 'extensions.off.x', plugin: 'off' }),
  ]

  it('give each enabled plugin one card in the order given, tools of no plugin last, disabled plugins none', () => {
    const cards = optionCards(options, ['a', 'b'])
    expect(cards.map((c) => c.plugin)).toEqual(['a', 'b', ''])
  })

  it('put uncategorised options first, then categories, then each tool of the plugin', () => {
    const [a] = optionCards(options, ['a'])
    expect(a!.groups.map((g) => g.tool)).toEqual(['', 'a:fetch'])
    expect(a!.groups[0]!.categories.map((c) => [c.key, c.options.map((o) => o.key)])).toEqual([
      ['', ['extensions.a.on', 'extensions.a.title']],
      ['Layout', ['extensions.a.size']],
    ])
  })
})

describe('config option values', () => {
  it('send only the values that changed', () => {
    const list = [
      option({ key: 'k.text', value: 'same' }),
      option({ key: 'k.n', type: 'number', value: 1 }),
      option({ key: 'k.flag', type: 'boolean', value: null, defaultValue: true }),
    ]
    const drafts = { 'k.text': 'same', 'k.n': 2, 'k.flag': true }
    expect(buildUpdate(list, drafts, {}).values).toEqual({ 'k.n': 2 })
  })

  it('leave an untouched secret out, send a typed one, and send null to clear', () => {
    const list = [
      option({ key: 's.kept', type: 'secret', isSet: true }),
      option({ key: 's.new', type: 'secret', isSet: false }),
      option({ key: 's.gone', type: 'string', secret: true, isSet: true }),
    ]
    const secrets = { 's.kept': { value: '', clear: false }, 's.new': { value: 'sk-1', clear: false }, 's.gone': { value: '', clear: true } }
    expect(buildUpdate(list, {}, secrets).values).toEqual({ 's.new': 'sk-1', 's.gone': null })
  })

  it('never fill a secret field from the server', () => {
    expect(initialDraft(option({ key: 's', type: 'secret', value: 'leak', isSet: true }))).toBe('')
  })

  it('check bounds, whole numbers and steps as the server does, and send nothing when one fails', () => {
    const n = option({ key: 'n', type: 'number', min: 0, max: 1, step: 0.25, value: 0.5 })
    const i = option({ key: 'i', type: 'integer', min: 1, value: 3 })
    expect(draftValue(n, 1.5)).toEqual({ error: { code: 'max', params: { limit: 1 } } })
    expect(draftValue(n, -1)).toEqual({ error: { code: 'min', params: { limit: 0 } } })
    expect(draftValue(n, 0.3)).toEqual({ error: { code: 'step', params: { step: 0.25 } } })
    expect(draftValue(n, 0.75)).toEqual({ value: 0.75 })
    expect(draftValue(i, 2.5)).toEqual({ error: { code: 'integer', params: {} } })
    expect(draftValue(i, '')).toEqual({ error: { code: 'required', params: {} } })
    const update = buildUpdate([n, i], { n: 0.75, i: 0 }, {})
    expect([...update.errors.keys()]).toEqual(['i'])
  })

  it('keep a select option’s value type (numbers stay numbers)', () => {
    const s = option({ key: 'sel', type: 'select', value: 2, options: [{ value: 1, label: 'one' }, { value: 2, label: 'two' }] })
    expect(initialDraft(s)).toBe('2')
    expect(buildUpdate([s], { sel: '1' }, {}).values).toEqual({ sel: 1 })
    expect(draftValue(s, '"x"')).toEqual({ error: { code: 'choice', params: {} } })
  })

  it('read the server’s problems by option key', () => {
    const byKey = problemsByKey([
      { field: 'values.extensions.a.size', reason: 'must be at most 10' },
      { field: 'extensions.a.title', reason: 'too long' },
    ])
    expect(Object.fromEntries(byKey)).toEqual({ 'extensions.a.size': 'must be at most 10', 'extensions.a.title': 'too long' })
  })
})

describe('tool search and globs', () => {
  const tools = [
    tool('kb:Query', { description: 'Hybrid search in a knowledge base' }),
    tool('chat:RollDice', { displayName: 'Roll dice', source: 'builtin' }),
    tool('mcp.github.search_issues', { source: 'mcp:github', implementation: 'mcp' }),
  ]

  it('find tools by every word in id, name, description or source', () => {
    expect(searchTools(tools, 'search').map((t) => t.id)).toEqual(['kb:Query', 'mcp.github.search_issues'])
    expect(searchTools(tools, 'KNOWLEDGE hybrid').map((t) => t.id)).toEqual(['kb:Query'])
    expect(searchTools(tools, 'mcp:github').map((t) => t.id)).toEqual(['mcp.github.search_issues'])
    expect(searchTools(tools, '  ')).toHaveLength(3)
  })

  it('match ids as fnmatch does: * and ? wild, . and : plain, [seq] and [!seq]', () => {
    expect(globMatches('kb:*', 'kb:Query')).toBe(true)
    expect(globMatches('kb:*', 'kbx:Query')).toBe(false)
    expect(globMatches('mcp.github.*', 'mcpXgithub.a')).toBe(false)
    expect(globMatches('mcp.github.*', 'mcp.github.a')).toBe(true)
    expect(globMatches('chat:?etVariable', 'chat:SetVariable')).toBe(true)
    expect(globMatches('chat:[GS]etVariable', 'chat:GetVariable')).toBe(true)
    expect(globMatches('chat:[!G]etVariable', 'chat:GetVariable')).toBe(false)
    expect(globMatches('a[b', 'a[b')).toBe(true)
    expect(globMatches('kb:Query', 'kb:QueryX')).toBe(false)
    expect(matchingIds('*', ['a', 'b'])).toEqual(['a', 'b'])
  })

  it('read one glob per line or comma, without blanks or repeats', () => {
    expect(parseGlobList(' lore-*\n\nworld, lore-*,\n')).toEqual(['lore-*', 'world'])
  })
})

describe('plugins', () => {
  it('ask for a grant only when the plugin wraps or overrides components or services', () => {
    expect(needsGrant(plugin())).toBe(false)
    const over = plugin({
      declares: { ...plugin().declares, ui: { wrap: ['ui:BaseNode'], inject: [], override: ['ui:ChatComposer'] } },
    })
    expect(needsGrant(over)).toBe(true)
    expect(requestedOverrides(over)).toEqual(['wrap:ui:BaseNode', 'ui:ChatComposer'])
    const wrapOnly = plugin({ declares: { ...plugin().declares, ui: { wrap: ['ui:BaseNode'], inject: [], override: [] } } })
    expect(needsGrant(wrapOnly)).toBe(true)
    expect(declaredItems(over).map((g) => g.kind)).toEqual(['uiWrap', 'uiOverride'])
  })
})

describe('audit words', () => {
  it('name the caller and the duration briefly', () => {
    expect(callerText({ kind: 'agent', name: 'narrator' })).toBe('agent: narrator')
    expect(callerText({ kind: 'user', name: 'user' })).toBe('user')
    expect(callerText('cli')).toBe('cli')
    expect(durationText(0.42)).toBe('0.4 ms')
    expect(durationText(12.6)).toBe('13 ms')
    expect(durationText(1530)).toBe('1.53 s')
  })
})

describe('agent profile form', () => {
  it('require an id fit for a file name, a name, at least one step and rule globs', () => {
    const p = { ...newAgentProfile('bad id'), max_steps: 0, policy: { rules: [{ tool: ' ', action: 'deny' as const }], default: 'ask' as const } }
    expect(profileErrors(p).map((e) => `${e.field}:${e.code}`)).toEqual([
      'id:idPattern',
      'name:required',
      'max_steps:minSteps',
      'policy.rules[0].tool:required',
    ])
    const ok = { ...newAgentProfile('narrator'), name: 'Narrator' }
    expect(profileErrors(ok)).toEqual([])
    expect(profileErrors(ok, ['narrator']).map((e) => e.code)).toEqual(['idTaken'])
  })

  it('warn when a TAM profile with tools has no tool documentation in its prompt', () => {
    const p = { ...newAgentProfile('a'), name: 'A', tool_ids_inventory: ['chat:RollDice'], protocol: 'tam' as const }
    expect(promptLacksToolDocs(p)).toBe(true)
    expect(promptLacksToolDocs({ ...p, prompt: `Tools:\n${AVAILABLE_TOOLS_MARKER}` })).toBe(false)
    expect(promptLacksToolDocs({ ...p, protocol: 'native' })).toBe(false)
  })

  it('add and remove inventory ids in place and spot unknown ones', () => {
    expect(toggleInventory(['a', 'b'], 'c', true)).toEqual(['a', 'b', 'c'])
    expect(toggleInventory(['a', 'b'], 'a', true)).toEqual(['a', 'b'])
    expect(toggleInventory(['a', 'b'], 'a', false)).toEqual(['b'])
    expect(unknownInventory(['a', 'gone'], ['a'])).toEqual(['gone'])
  })
})

describe('MCP server form', () => {
  const server: McpServerInfo = {
    name: 'github',
    scope: 'project',
    transport: 'stdio',
    command: 'npx',
    args: ['-y', '@modelcontextprotocol/server-github'],
    url: null,
    envKeys: ['GITHUB_TOKEN', 'OLD'],
    timeoutS: 30,
    enabled: true,
    status: 'failed',
    error: 'exited',
    tools: [],
  }

  it('keep stored env values unless replaced or removed, and never echo them', () => {
    const form = mcpFormFrom(server)
    expect(form.env.map((r) => r.value)).toEqual(['', ''])
    form.env[1]!.remove = true
    form.env.push({ key: 'NEW', value: 'v', stored: false, remove: false })
    const update = mcpUpdate(form)
    expect(update.env).toEqual({ OLD: null, NEW: 'v' })
    expect(update.args).toEqual(['-y', '@modelcontextprotocol/server-github'])
    expect(update.url).toBeNull()
  })

  it('need a command for stdio, an http(s) URL for http, and a plain unique name', () => {
    const form = { ...mcpFormFrom(server), transport: 'http' as const, url: 'ftp://x', name: 'git hub', timeoutS: 0 }
    expect(mcpFormErrors(form)).toEqual({ name: 'namePattern', url: 'url', timeoutS: 'positive' })
    expect(mcpFormErrors({ ...mcpFormFrom(server), command: ' ' }, ['github'])).toEqual({ name: 'nameTaken', command: 'required' })
  })
})
