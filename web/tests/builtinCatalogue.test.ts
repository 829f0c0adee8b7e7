// The built-in node types' and tools' texts in the page's language, looked up by id in
// locales/<lang>/nodes.json and builtinTools.json; what the catalogue does not know keeps
// the server's English, marked `textLang: 'en'`.
import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import type { NodeTypeInfo, Workflow } from '../src/api/workflows'
import NodePalette from '../src/components/workflow/NodePalette.vue'
import { makeI18n } from '../src/i18n'
import { BUILTIN_CATALOGUES, shownNodeType, shownParameters, shownTool, shownWorkflow, shownWorkflowEntry } from '../src/lib/builtinCatalogue'
import { tool } from './toolFixtures'

/** chat:Weaver as the server lists it (storyloom/workflow/nodes), in English. */
function weaver(over: Partial<NodeTypeInfo> = {}): NodeTypeInfo {
  return {
    type: 'chat:Weaver',
    displayName: 'Weaver',
    category: 'Chat',
    description: 'Renders the Skein as chat messages.',
    version: 1,
    idempotent: true,
    streaming: false,
    dynamicSlots: false,
    inputs: [{ name: 'skein', type: 'SKEIN', description: 'The prompt being built', required: true }],
    outputs: [{ name: 'messages', type: 'MESSAGES', description: '[{role, content, name?}]' }],
    configSchema: {
      type: 'object',
      properties: {
        names_behavior: {
          type: 'string',
          default: 'default',
          title: 'Names Behavior',
          description: "How speakers are named (SillyTavern's character names behavior)",
          'x-suggestions': [
            { value: 'none', label: 'None' },
            { value: 'default', label: 'Default (only other speakers)' },
          ],
        },
        squash_system: { type: 'boolean', default: false, title: 'Squash System' },
      },
    },
    ...over,
  }
}

const pluginNode = (): NodeTypeInfo =>
  weaver({ type: 'dice:Roll', displayName: 'Roll dice', description: 'Rolls dice.', inputs: [], outputs: [], configSchema: { type: 'object' } })

describe('shownNodeType', () => {
  it("gives a built-in type's name, description, slots and config labels in Chinese", () => {
    const shown = shownNodeType(weaver(), 'zh')
    const zh = BUILTIN_CATALOGUES.zh.nodes['chat:Weaver']!
    expect(shown.textLang).toBeUndefined()
    expect(shown.displayName).toBe(zh.name)
    expect(shown.displayName).toMatch(/[\u4e00-\u9fff]/)
    expect(shown.description).toBe(zh.description)
    expect(shown.inputs[0]!.description).toBe(zh.inputs!.skein)
    const field = shown.configSchema.properties!.names_behavior!
    expect(field.title).toBe(zh.config!.names_behavior!.title)
    expect(field.description).toBe(zh.config!.names_behavior!.description)
    expect(field['x-suggestions']!.map((s) => s.label)).toEqual([zh.config!.names_behavior!.options!.none, zh.config!.names_behavior!.options!.default])
    // What the editor works with stays the server's.
    expect(shown.type).toBe('chat:Weaver')
    expect(shown.inputs[0]!.type).toBe('SKEIN')
    expect(field.default).toBe('default')
    expect(field['x-suggestions']!.map((s) => s.value)).toEqual(['none', 'default'])
  })

  it("gives a list of objects' fields their Chinese titles too", () => {
    const info = weaver({
      type: 'chat:SkeinBuilder',
      configSchema: {
        type: 'object',
        properties: {
          prompts: { type: 'array', title: 'Prompts', items: { type: 'object', properties: { name: { type: 'string', title: 'Name', default: '' } } } },
        },
      },
    })
    const zh = BUILTIN_CATALOGUES.zh.nodes['chat:SkeinBuilder']!.config!.prompts!
    const prompts = shownNodeType(info, 'zh').configSchema.properties!.prompts!
    expect(prompts.title).toBe(zh.title)
    expect(prompts.items!.properties!.name).toEqual({ type: 'string', title: zh.items!.name!.title, default: '' })
  })

  it('follows the language of the page', () => {
    expect(shownNodeType(weaver(), 'en').displayName).toBe(BUILTIN_CATALOGUES.en.nodes['chat:Weaver']!.name)
    expect(shownNodeType(weaver(), 'en').textLang).toBeUndefined()
  })

  it("keeps a plugin's node type in the server's English, marked so", () => {
    const shown = shownNodeType(pluginNode(), 'zh')
    expect(shown.displayName).toBe('Roll dice')
    expect(shown.description).toBe('Rolls dice.')
    expect(shown.textLang).toBe('en')
  })

  it("falls back to the server's text for a slot or field the catalogue does not know", () => {
    const info = weaver({
      inputs: [...weaver().inputs, { name: 'extra', type: 'STRING', description: 'A new input' }],
      configSchema: { type: 'object', properties: { ...weaver().configSchema.properties, later: { type: 'string', title: 'Later' } } },
    })
    const shown = shownNodeType(info, 'zh')
    expect(shown.inputs[1]!.description).toBe('A new input')
    expect(shown.configSchema.properties!.later!.title).toBe('Later')
  })

  it('uses the catalogue it is given', () => {
    const catalogues = { en: { nodes: {}, tools: {}, workflows: {} }, zh: { nodes: { 'dice:Roll': { name: '掷骰', description: '掷骰子。' } }, tools: {}, workflows: {} } }
    expect(shownNodeType(pluginNode(), 'zh', catalogues)).toMatchObject({ displayName: '掷骰', description: '掷骰子。' })
    expect(shownNodeType(pluginNode(), 'zh', catalogues).textLang).toBeUndefined()
  })
})

describe('shownTool', () => {
  it("gives a built-in tool's name and description in Chinese", () => {
    const shown = shownTool(tool('kb:Query', { displayName: 'Search knowledge', description: 'Search the knowledge bases.' }), 'zh')
    const zh = BUILTIN_CATALOGUES.zh.tools['kb:Query']!
    expect(shown).toMatchObject({ displayName: zh.name, description: zh.description })
    expect(zh.name).toMatch(/[\u4e00-\u9fff]/)
    expect(shown.textLang).toBeUndefined()
    expect(shown.id).toBe('kb:Query')
  })

  it("gives a built-in node type's tool the node type's texts", () => {
    const shown = shownTool(tool('node:core:Merge', { source: 'node', implementation: 'node', displayName: 'Merge' }), 'zh')
    expect(shown.displayName).toBe(BUILTIN_CATALOGUES.zh.nodes['core:Merge']!.name)
    expect(shown.textLang).toBeUndefined()
  })

  it("keeps a plugin's, a plugin node's and an MCP server's tool in English, marked so", () => {
    for (const t of [
      tool('dice:roll', { source: 'plugin:dice', plugin: 'dice', displayName: 'Roll' }),
      tool('node:dice:Roll', { source: 'node', implementation: 'node', displayName: 'Roll dice' }),
      tool('mcp:files:read', { source: 'mcp:files', implementation: 'mcp', displayName: 'Read' }),
      // A plugin's tool cannot borrow a built-in's id to get its text.
      tool('kb:Query', { source: 'plugin:kb', plugin: 'kb', displayName: 'Other query' }),
    ]) {
      const shown = shownTool(t, 'zh')
      expect(shown.displayName, t.id).toBe(t.displayName)
      expect(shown.textLang, t.id).toBe('en')
    }
  })

  it("leaves a project workflow's tool as its author wrote it, unmarked", () => {
    const shown = shownTool(tool('workflow:summarize', { source: 'workflow', implementation: 'workflow', displayName: '总结' }), 'zh')
    expect(shown.displayName).toBe('总结')
    expect(shown.textLang).toBeUndefined()
  })
})

describe('shownParameters', () => {
  const query = tool('kb:Query', {
    parameters: {
      type: 'object',
      properties: { query: { type: 'string', minLength: 1, description: 'What to look for, in words' }, other: { type: 'string', description: 'Not known' } },
      required: ['query'],
    },
  })

  it("gives a built-in tool's argument hints in Chinese for the try-it form, the schema otherwise the server's", () => {
    const shown = shownParameters(query, 'zh')
    expect(shown.properties!.query!.description).toBe(BUILTIN_CATALOGUES.zh.tools['kb:Query']!.parameters!.query)
    expect(shown.properties!.query!.minLength).toBe(1)
    expect(shown.required).toEqual(['query'])
    expect(shown.properties!.other!.description).toBe('Not known')
    // The tool itself (its schema as JSON, like the model's) is untouched.
    expect(query.parameters.properties!.query!.description).toBe('What to look for, in words')
  })

  it("takes a built-in node's tool's hints from its inputs and config fields", () => {
    const merge = tool('node:core:Merge', {
      source: 'node',
      implementation: 'node',
      parameters: { type: 'object', properties: { first: { description: 'The first value (optional)' }, separator: { type: 'string', description: 'x' } } },
    })
    const shown = shownParameters(merge, 'zh')
    const zh = BUILTIN_CATALOGUES.zh.nodes['core:Merge']!
    expect(shown.properties!.first!.description).toBe(zh.inputs!.first)
    expect(shown.properties!.separator!.description).toBe(zh.config!.separator!.description)
  })

  it("leaves a plugin's tool's hints as they are", () => {
    const plugin = tool('dice:roll', { source: 'plugin:dice', parameters: { type: 'object', properties: { n: { description: 'How many' } } } })
    expect(shownParameters(plugin, 'zh')).toBe(plugin.parameters)
  })
})

/** The chat pipeline as GET /api/workflows/chat-default gives it (default_pipeline.py). */
function chatDefault(over: Partial<Workflow> = {}): Workflow {
  return {
    id: 'chat-default',
    name: 'Chat (default)',
    description: 'One chat turn: snapshot → Skein → prompt → model → reply and state.',
    nodes: [{ id: 'input', type: 'core:GroupInput', config: {}, position: { x: 0, y: 0 } }],
    edges: [],
    interfaceInputs: { snapshot: { dataFlowType: 'OBJECT', required: true, description: "The turn's context snapshot (ContextSnapshot JSON)" } },
    interfaceOutputs: {
      reply: { dataFlowType: 'STRING', description: 'The visible reply' },
      extra: { dataFlowType: 'STRING', description: 'A slot the catalogue does not know' },
    },
    ...over,
  }
}

describe('shownWorkflow', () => {
  it("gives the built-in chat pipeline's name, description and interface texts in Chinese", () => {
    const zh = BUILTIN_CATALOGUES.zh.workflows['chat-default']!
    const shown = shownWorkflow(chatDefault(), true, 'zh')
    expect(shown.name).toBe(zh.name)
    expect(shown.name).toMatch(/[\u4e00-\u9fff]/)
    expect(shown.description).toBe(zh.description)
    expect(shown.interfaceInputs!.snapshot!.description).toBe(zh.inputs!.snapshot)
    expect(shown.interfaceOutputs!.reply!.description).toBe(zh.outputs!.reply)
    // What is run and connected stays the server's; an unknown slot keeps its text.
    expect(shown.interfaceInputs!.snapshot).toMatchObject({ dataFlowType: 'OBJECT', required: true })
    expect(Object.keys(shown.interfaceOutputs!)).toEqual(['reply', 'extra'])
    expect(shown.interfaceOutputs!.extra!.description).toBe('A slot the catalogue does not know')
    expect(shown.nodes).toEqual(chatDefault().nodes)
  })

  it('follows the language of the page', () => {
    expect(shownWorkflow(chatDefault(), true, 'en').name).toBe(BUILTIN_CATALOGUES.en.workflows['chat-default']!.name)
  })

  it("leaves the project's own copy of a built-in, and any other workflow, as the user wrote it", () => {
    const copy = chatDefault({ name: 'My chat' })
    expect(shownWorkflow(copy, false, 'zh')).toBe(copy)
    const other = chatDefault({ id: 'chat-default-2', name: 'Chat (default) copy' })
    expect(shownWorkflow(other, true, 'zh')).toBe(other)
  })

  it('shows a list entry by its builtin mark', () => {
    const entry = { id: 'chat-default', name: 'Chat (default)', description: 'One chat turn', nodeCount: 12, builtin: true }
    const zh = BUILTIN_CATALOGUES.zh.workflows['chat-default']!
    expect(shownWorkflowEntry(entry, 'zh')).toEqual({ ...entry, name: zh.name, description: zh.description })
    expect(shownWorkflowEntry({ ...entry, builtin: false }, 'zh').name).toBe('Chat (default)')
  })
})

describe('the catalogues', () => {
  it('know the same node types, slots, fields, tools and workflows in both languages', () => {
    const shape = (c: (typeof BUILTIN_CATALOGUES)['en']) => ({
      workflows: Object.entries(c.workflows).map(([id, w]) => [id, Object.keys(w.inputs ?? {}), Object.keys(w.outputs ?? {})]),
      tools: Object.entries(c.tools).map(([id, tl]) => [id, Object.keys(tl.parameters ?? {})]),
      nodes: Object.fromEntries(
        Object.entries(c.nodes).map(([id, n]) => [
          id,
          [Object.keys(n.inputs ?? {}), Object.keys(n.outputs ?? {}), Object.entries(n.config ?? {}).map(([k, f]) => [k, !!f.description, Object.keys(f.options ?? {}), Object.keys(f.items ?? {})])],
        ]),
      ),
    })
    expect(shape(BUILTIN_CATALOGUES.zh)).toEqual(shape(BUILTIN_CATALOGUES.en))
  })
})

describe('NodePalette', () => {
  it("shows a built-in type's Chinese name unmarked, and a plugin's English marked lang=en", () => {
    const i18n = makeI18n('zh')
    const types = [shownNodeType(weaver(), 'zh'), shownNodeType(pluginNode(), 'zh')]
    const wrapper = mount(NodePalette, { props: { types }, global: { plugins: [i18n] } })
    const builtin = wrapper.get('[data-node-type="chat:Weaver"]')
    expect(builtin.text()).toContain(BUILTIN_CATALOGUES.zh.nodes['chat:Weaver']!.name)
    expect(builtin.attributes('lang')).toBeUndefined()
    expect(builtin.attributes('title')).toBe(BUILTIN_CATALOGUES.zh.nodes['chat:Weaver']!.description)
    const plugin = wrapper.get('[data-node-type="dice:Roll"]')
    expect(plugin.text()).toContain('Roll dice')
    expect(plugin.attributes('lang')).toBe('en')
  })
})
