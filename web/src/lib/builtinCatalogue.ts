// The texts of storyloom's own node types, tools and workflows in the page's language. The server
// describes them in English, for the model that calls them (and that English is what the
// model keeps getting); the web app shows its own translation, from the catalogue in
// locales/<lang>/nodes.json, builtinTools.json and builtinWorkflows.json, keyed by id. What the catalogue does not
// know (a plugin's node type or tool, an MCP server's tool) keeps the server's English and
// says so with `textLang: 'en'`, for screen readers and the page's language checks.
// tests/server/test_builtin_catalogue.py holds the catalogue to the registry.
import type { ToolInfo } from '../api/tools'
import type { InterfaceSlot, NodeTypeInfo, SlotInfo, WorkflowSummary } from '../api/workflows'
import type { Locale } from '../i18n'
import type { JsonSchema } from './jsonSchema'
import enTools from '../locales/en/builtinTools.json'
import enNodes from '../locales/en/nodes.json'
import enWorkflows from '../locales/en/builtinWorkflows.json'
import zhTools from '../locales/zh/builtinTools.json'
import zhNodes from '../locales/zh/nodes.json'
import zhWorkflows from '../locales/zh/builtinWorkflows.json'

/** One config field's label, hint and the labels of its suggested values. */
export interface FieldText {
  title: string
  description?: string
  /** Labels of the field's suggested values (`x-suggestions`), by value. */
  options?: Record<string, string>
  /** A list of objects' fields (SkeinBuilder's `prompts`), by name. */
  items?: Record<string, FieldText>
}

/** A built-in node type's texts: slot descriptions and config fields by name. */
export interface NodeText {
  name: string
  description: string
  inputs?: Record<string, string>
  outputs?: Record<string, string>
  config?: Record<string, FieldText>
}

export interface ToolText {
  name: string
  description: string
  /** Descriptions of the tool's arguments, by name. */
  parameters?: Record<string, string>
}

/** A built-in workflow's texts (the chat pipeline `chat-default`): its name, description
 * and the descriptions of its interface slots, by slot name. */
export interface WorkflowText {
  name: string
  description: string
  inputs?: Record<string, string>
  outputs?: Record<string, string>
}

export interface BuiltinCatalogue {
  nodes: Record<string, NodeText>
  tools: Record<string, ToolText>
  workflows: Record<string, WorkflowText>
}

export const BUILTIN_CATALOGUES: Record<Locale, BuiltinCatalogue> = {
  en: { nodes: enNodes, tools: enTools, workflows: enWorkflows },
  zh: { nodes: zhNodes, tools: zhTools, workflows: zhWorkflows },
}

/** `textLang` is `'en'` when the texts are the server's English (nobody here can translate
 * them), absent when they are the catalogue's, in the page's language. */
export type Shown<T> = T & { textLang?: 'en' }
export type ShownNodeType = Shown<NodeTypeInfo>
export type ShownTool = Shown<ToolInfo>

/** The id prefix of the tool a node type makes (storyloom/workflow/workflow_tools.py). */
export const NODE_TOOL_PREFIX = 'node:'
/** The source of a project workflow's tool (storyloom/tools/tool_registry.py). */
const WORKFLOW_SOURCE = 'workflow'

/** A node type as the page shows it: the catalogue's name, description, slot
 * descriptions and config labels where it knows the type, else the server's. */
export function shownNodeType(info: NodeTypeInfo, locale: Locale, catalogues = BUILTIN_CATALOGUES): ShownNodeType {
  const text = catalogues[locale].nodes[info.type]
  if (!text) return { ...info, textLang: 'en' }
  return {
    ...info,
    displayName: text.name,
    description: text.description,
    inputs: shownSlots(info.inputs, text.inputs),
    outputs: shownSlots(info.outputs, text.outputs),
    configSchema: shownConfig(info.configSchema, text.config),
  }
}

function shownSlots(slots: SlotInfo[], texts: Record<string, string> | undefined): SlotInfo[] {
  return slots.map((slot) => {
    const description = texts?.[slot.name]
    return description === undefined ? slot : { ...slot, description }
  })
}

/** An object schema with its fields' titles, descriptions and choice labels replaced. */
function shownConfig(schema: JsonSchema, fields: Record<string, FieldText> | undefined): JsonSchema {
  const properties = schema.properties
  if (!fields || !properties) return schema
  const shown: Record<string, JsonSchema> = {}
  for (const [name, property] of Object.entries(properties)) {
    const text = fields[name]
    shown[name] = text ? shownField(property, text) : property
  }
  return { ...schema, properties: shown }
}

function shownField(property: JsonSchema, text: FieldText): JsonSchema {
  const field: JsonSchema = { ...property, title: text.title }
  if (text.description !== undefined) field.description = text.description
  const options = text.options
  const suggestions = property['x-suggestions']
  if (options && suggestions) {
    field['x-suggestions'] = suggestions.map((s) => {
      const label = typeof s.value === 'string' ? options[s.value] : undefined
      return label === undefined ? s : { ...s, label }
    })
  }
  if (text.items && property.items) field.items = shownConfig(property.items, text.items)
  return field
}

/** A tool as the page shows it: a built-in tool's or a built-in node type's tool's texts
 * from the catalogue. A project workflow's are its author's own words, in whatever
 * language they wrote; a plugin's or an MCP server's stay the server's English. */
export function shownTool(tool: ToolInfo, locale: Locale, catalogues = BUILTIN_CATALOGUES): ShownTool {
  if (tool.source === WORKFLOW_SOURCE) return tool
  const catalogue = catalogues[locale]
  const text: ToolText | undefined = tool.source === 'builtin' ? catalogue.tools[tool.id] : nodeOfTool(tool, catalogue)
  if (!text) return { ...tool, textLang: 'en' }
  return { ...tool, displayName: text.name, description: text.description }
}

function nodeOfTool(tool: ToolInfo, catalogue: BuiltinCatalogue): NodeText | undefined {
  if (tool.source !== 'node' || !tool.id.startsWith(NODE_TOOL_PREFIX)) return undefined
  return catalogue.nodes[tool.id.slice(NODE_TOOL_PREFIX.length)]
}

/** The tool's `parameters` for the "try it" form: a built-in's argument descriptions in
 * the page's language. Only for the form: the schema shown as JSON, like the one the
 * model gets, stays the server's. */
export function shownParameters(tool: ToolInfo, locale: Locale, catalogues = BUILTIN_CATALOGUES): JsonSchema {
  const schema = tool.parameters ?? { type: 'object', properties: {} }
  const texts = parameterTexts(tool, catalogues[locale])
  const properties = schema.properties
  if (!texts || !properties) return schema
  const shown: Record<string, JsonSchema> = {}
  for (const [name, property] of Object.entries(properties)) {
    const description = texts[name]
    shown[name] = description === undefined ? property : { ...property, description }
  }
  return { ...schema, properties: shown }
}

function parameterTexts(tool: ToolInfo, catalogue: BuiltinCatalogue): Record<string, string> | undefined {
  if (tool.source === 'builtin') return catalogue.tools[tool.id]?.parameters
  const node = nodeOfTool(tool, catalogue)
  if (!node) return undefined
  // A node's tool has a parameter per input and per config field that is not an input
  // (storyloom/workflow/workflow_tools.py node_tool_schema): the input's text wins.
  const texts: Record<string, string> = {}
  for (const [name, field] of Object.entries(node.config ?? {})) if (field.description !== undefined) texts[name] = field.description
  return { ...texts, ...node.inputs }
}

/** What a workflow's list entry and editor show of it: the name, description and interface. */
export interface WorkflowTexts {
  id: string
  name?: string
  description?: string
  interfaceInputs?: Record<string, InterfaceSlot>
  interfaceOutputs?: Record<string, InterfaceSlot>
}

/** A workflow as the page shows it: while it IS a built-in one (the server lists it
 * `builtin`, the project has no file of its id), its name, description and interface
 * slots' descriptions from the catalogue. A project's own workflow (its copy of a
 * built-in included) is the user's words and is shown as it is. Only for showing: what
 * is validated, run or duplicated stays the server's workflow. */
export function shownWorkflow<T extends WorkflowTexts>(
  workflow: T,
  builtin: boolean,
  locale: Locale,
  catalogues = BUILTIN_CATALOGUES,
): T {
  const text = builtin ? catalogues[locale].workflows[workflow.id] : undefined
  if (!text) return workflow
  const shown: T = { ...workflow, name: text.name, description: text.description }
  if (workflow.interfaceInputs) shown.interfaceInputs = shownInterface(workflow.interfaceInputs, text.inputs)
  if (workflow.interfaceOutputs) shown.interfaceOutputs = shownInterface(workflow.interfaceOutputs, text.outputs)
  return shown
}

/** A workflow list's entry as the page shows it (a built-in's name and description). */
export function shownWorkflowEntry(entry: WorkflowSummary, locale: Locale, catalogues = BUILTIN_CATALOGUES): WorkflowSummary {
  return shownWorkflow(entry, entry.builtin, locale, catalogues)
}

function shownInterface(
  slots: Record<string, InterfaceSlot>,
  texts: Record<string, string> | undefined,
): Record<string, InterfaceSlot> {
  const shown: Record<string, InterfaceSlot> = {}
  for (const [name, slot] of Object.entries(slots)) {
    const description = texts?.[name]
    shown[name] = description === undefined ? slot : { ...slot, description }
  }
  return shown
}
