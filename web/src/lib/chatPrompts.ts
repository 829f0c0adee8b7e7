// The prompt manager's model: the chat pipeline's prompts in `prompt_order` (as
// SillyTavern's prompt manager lists them), each on or off, and the samplers of its LLM
// node. Read from the pipeline workflow's `chat:SkeinBuilder` and `chat:LLMInvoker` nodes
// (a config that leaves `prompts` or `prompt_order` out means SillyTavern's defaults, which
// the server hands over), and written back into the same nodes' config.
import type { PresetPrompt, PromptDefaults, PromptOrderEntry } from '../api/chat'
import type { Workflow, WorkflowNode } from '../api/workflows'

export type { PresetPrompt, PromptDefaults, PromptOrderEntry, PromptRole } from '../api/chat'

export const BUILDER_TYPE = 'chat:SkeinBuilder'
export const INVOKER_TYPE = 'chat:LLMInvoker'
export const BUDGET_TYPE = 'chat:TokenBudget'

/** A line of the manager: the prompt and whether it is on. */
export interface PromptLine {
  prompt: PresetPrompt
  enabled: boolean
}

export const SAMPLER_FIELDS = ['temperature', 'top_p', 'max_tokens', 'frequency_penalty', 'presence_penalty', 'seed'] as const
export type SamplerField = (typeof SAMPLER_FIELDS)[number]
/** Sampler values; null: the endpoint's own default (the field is left out of the config). */
export type Samplers = Record<SamplerField, number | null> & { max_context_tokens: number | null }

export const SAMPLER_LIMITS: Record<SamplerField | 'max_context_tokens', { min?: number; max?: number; step: number; integer: boolean }> = {
  temperature: { min: 0, max: 2, step: 0.05, integer: false },
  top_p: { min: 0, max: 1, step: 0.01, integer: false },
  max_tokens: { min: 1, step: 1, integer: true },
  frequency_penalty: { min: -2, max: 2, step: 0.05, integer: false },
  presence_penalty: { min: -2, max: 2, step: 0.05, integer: false },
  seed: { step: 1, integer: true },
  max_context_tokens: { min: 256, step: 1, integer: true },
}

export function nodeOfType(workflow: Workflow, type: string): WorkflowNode | null {
  return workflow.nodes.find((n) => n.type === type) ?? null
}

function arrayOf<T>(value: unknown): T[] | null {
  return Array.isArray(value) ? (value as T[]) : null
}

/**
 * The lines the manager shows: the prompts in `prompt_order`, then any prompt the order
 * leaves out (off, at the end, so the user can switch it on). Order entries naming no prompt
 * are skipped, as SillyTavern skips them.
 */
export function promptLines(config: Record<string, unknown>, defaults: PromptDefaults): PromptLine[] {
  const prompts = arrayOf<PresetPrompt>(config.prompts) ?? defaults.prompts
  const order = arrayOf<PromptOrderEntry>(config.prompt_order) ?? defaults.prompt_order
  const byId = new Map(prompts.map((p) => [p.identifier, p]))
  const lines: PromptLine[] = []
  const seen = new Set<string>()
  for (const entry of order) {
    const prompt = byId.get(entry.identifier)
    if (!prompt || seen.has(entry.identifier)) continue
    seen.add(entry.identifier)
    lines.push({ prompt, enabled: entry.enabled !== false })
  }
  for (const prompt of prompts) if (!seen.has(prompt.identifier)) lines.push({ prompt, enabled: false })
  return lines
}

/** `lines` with the one at `from` moved to `to` (both clamped). */
export function moveLine<T>(lines: readonly T[], from: number, to: number): T[] {
  const out = lines.slice()
  if (from < 0 || from >= out.length) return out
  const target = Math.max(0, Math.min(out.length - 1, to))
  const [line] = out.splice(from, 1)
  out.splice(target, 0, line as T)
  return out
}

/** What the Skein Builder's config gets: `prompts` and `prompt_order` from the lines. */
export function promptConfig(lines: readonly PromptLine[]): { prompts: PresetPrompt[]; prompt_order: PromptOrderEntry[] } {
  return {
    prompts: lines.map((l) => l.prompt),
    prompt_order: lines.map((l) => ({ identifier: l.prompt.identifier, enabled: l.enabled })),
  }
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null
}

export function samplersOf(workflow: Workflow): Samplers {
  const invoker = nodeOfType(workflow, INVOKER_TYPE)?.config ?? {}
  const budget = nodeOfType(workflow, BUDGET_TYPE)?.config ?? {}
  const out = { max_context_tokens: numberOrNull(budget.max_context_tokens) } as Samplers
  for (const field of SAMPLER_FIELDS) out[field] = numberOrNull(invoker[field])
  return out
}

/** A sampler as typed: '' is "not set" (null); anything else must be a number in range. A
 * number input's model may hand over a number already. */
export function parseSampler(field: SamplerField | 'max_context_tokens', text: string | number | null | undefined): { value: number | null; ok: boolean } {
  const trimmed = String(text ?? '').trim()
  if (!trimmed) return { value: null, ok: true }
  const value = Number(trimmed)
  const limits = SAMPLER_LIMITS[field]
  if (!Number.isFinite(value)) return { value: null, ok: false }
  if (limits.integer && !Number.isInteger(value)) return { value: null, ok: false }
  if (limits.min !== undefined && value < limits.min) return { value: null, ok: false }
  if (limits.max !== undefined && value > limits.max) return { value: null, ok: false }
  return { value, ok: true }
}

function withConfig(node: WorkflowNode, changes: Record<string, number | null | unknown>): WorkflowNode {
  const config: Record<string, unknown> = { ...node.config }
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined) delete config[key]
    else config[key] = value
  }
  return { ...node, config }
}

/** The workflow with the manager's prompts and samplers in its nodes' config (other nodes
 * and other config fields untouched). */
export function withPromptManager(workflow: Workflow, lines: readonly PromptLine[], samplers: Samplers): Workflow {
  const { max_context_tokens, ...llm } = samplers
  const nodes = workflow.nodes.map((node) => {
    if (node.type === BUILDER_TYPE) return withConfig(node, promptConfig(lines))
    if (node.type === INVOKER_TYPE) return withConfig(node, llm)
    if (node.type === BUDGET_TYPE) return withConfig(node, { max_context_tokens })
    return node
  })
  return { ...workflow, nodes }
}

/**
 * The id of a project copy of a built-in pipeline: saving never changes the built-in, the
 * conversation moves to its own copy (`chat-default-2`, ...: the first id not taken).
 */
export function copyIdFor(baseId: string, taken: Iterable<string>): string {
  const used = new Set(taken)
  for (let n = 2; ; n++) {
    const id = `${baseId}-${n}`
    if (!used.has(id)) return id
  }
}
