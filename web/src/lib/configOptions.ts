// The logic behind Settings → Extensions, kept free of Vue so it can be unit-tested: the
// options of GET /api/config grouped into one card per plugin (tools' `configSchema`
// inside their plugin's card, or under "built-in tools"), then by category; a draft
// per option; checks that mirror the server's (ConfigOption.check); and the PUT body,
// which carries only what changed. Secrets are write-only: the field starts empty, a typed
// value replaces the stored one, "clear" sends null, an untouched field is left out.
import type { ConfigOptionInfo } from '../api/config'

/** What `v-model` gives for an `<input type="number">`: a number, or '' when empty. */
export type Draft = string | number | boolean | null

export interface SecretDraft {
  value: string
  clear: boolean
}

export interface OptionCategory {
  /** The category's key (translated when the page knows it) or '' for uncategorised. */
  key: string
  label: string
  options: ConfigOptionInfo[]
}

export interface OptionGroup {
  /** A plugin's name, or '' for options of tools that belong to no plugin. */
  plugin: string
  /** The tool whose configSchema this is; '' for the plugin's own options. */
  tool: string
  categories: OptionCategory[]
}

export interface OptionCard {
  plugin: string
  groups: OptionGroup[]
}

function categorise(options: ConfigOptionInfo[]): OptionCategory[] {
  const out: OptionCategory[] = []
  for (const option of options) {
    const key = option.categoryKey ?? option.category ?? ''
    let found = out.find((c) => c.key === key)
    if (!found) {
      found = { key, label: option.category ?? option.categoryKey ?? '', options: [] }
      out.push(found)
    }
    found.options.push(option)
  }
  // Uncategorised options first, as the manifest lists them; categories in first-seen order.
  return [...out.filter((c) => c.key === ''), ...out.filter((c) => c.key !== '')]
}

/** One card per plugin, in the order `plugins` names them (the enabled ones); options of
 * plugins not listed are dropped (a disabled plugin's settings are not shown). Tool
 * options without a plugin make a last card whose plugin is ''. */
export function optionCards(options: readonly ConfigOptionInfo[], plugins: readonly string[]): OptionCard[] {
  const cards: OptionCard[] = []
  const owners = [...plugins, '']
  for (const plugin of owners) {
    const own = options.filter((o) => (o.plugin ?? '') === plugin)
    if (!own.length) continue
    const groups: OptionGroup[] = []
    const pluginOptions = own.filter((o) => !o.tool)
    if (pluginOptions.length) groups.push({ plugin, tool: '', categories: categorise(pluginOptions) })
    const tools = [...new Set(own.filter((o) => o.tool).map((o) => o.tool as string))]
    for (const tool of tools) groups.push({ plugin, tool, categories: categorise(own.filter((o) => o.tool === tool)) })
    cards.push({ plugin, groups })
  }
  return cards
}

/** The key a PUT uses for an option: the key GET /api/config lists it under. */
export function optionKey(option: ConfigOptionInfo): string {
  return option.key
}

export function isSecret(option: ConfigOptionInfo): boolean {
  return option.type === 'secret' || option.secret === true
}

/** The field's starting draft: the current value (secrets start empty). */
export function initialDraft(option: ConfigOptionInfo): Draft {
  if (isSecret(option)) return ''
  const value = option.value === undefined || option.value === null ? (option.defaultValue ?? null) : option.value
  if (option.type === 'boolean') return value === true
  if (option.type === 'number' || option.type === 'integer') return typeof value === 'number' ? value : ''
  if (option.type === 'select') return value === null ? '' : JSON.stringify(value)
  return typeof value === 'string' ? value : value === null ? '' : JSON.stringify(value)
}

export interface OptionError {
  code: 'required' | 'number' | 'integer' | 'min' | 'max' | 'step' | 'choice'
  params: Record<string, string | number>
}

/** The value a draft stands for, or an error (the server checks again). */
export function draftValue(option: ConfigOptionInfo, draft: Draft): { value: unknown } | { error: OptionError } {
  switch (option.type) {
    case 'boolean':
      return { value: draft === true }
    case 'number':
    case 'integer': {
      if (draft === '' || draft === null) return { error: { code: 'required', params: {} } }
      const n = typeof draft === 'number' ? draft : Number(draft)
      if (!Number.isFinite(n)) return { error: { code: 'number', params: {} } }
      if (option.type === 'integer' && !Number.isInteger(n)) return { error: { code: 'integer', params: {} } }
      if (option.min !== undefined && option.min !== null && n < option.min) return { error: { code: 'min', params: { limit: option.min } } }
      if (option.max !== undefined && option.max !== null && n > option.max) return { error: { code: 'max', params: { limit: option.max } } }
      if (option.step && option.type === 'number') {
        const base = option.min ?? 0
        const steps = (n - base) / option.step
        if (Math.abs(steps - Math.round(steps)) > 1e-9) return { error: { code: 'step', params: { step: option.step } } }
      }
      return { value: n }
    }
    case 'select': {
      const choices = option.options ?? []
      const found = choices.find((c) => JSON.stringify(c.value) === draft)
      if (!found) return { error: { code: 'choice', params: {} } }
      return { value: found.value }
    }
    default:
      return { value: typeof draft === 'string' ? draft : String(draft ?? '') }
  }
}

export interface ConfigUpdate {
  values: Record<string, unknown>
  errors: Map<string, OptionError>
}

/** The PUT body for the options of one card: only values that differ from the stored ones,
 * secrets only when typed or cleared. `errors` by option key; when any, nothing is sent. */
export function buildUpdate(
  options: readonly ConfigOptionInfo[],
  drafts: Readonly<Record<string, Draft>>,
  secrets: Readonly<Record<string, SecretDraft>>,
): ConfigUpdate {
  const values: Record<string, unknown> = {}
  const errors = new Map<string, OptionError>()
  for (const option of options) {
    const key = optionKey(option)
    if (isSecret(option)) {
      const secret = secrets[key]
      if (secret?.clear) values[key] = null
      else if (secret && secret.value !== '') values[key] = secret.value
      continue
    }
    if (!(key in drafts)) continue
    const parsed = draftValue(option, drafts[key] ?? null)
    if ('error' in parsed) {
      errors.set(key, parsed.error)
      continue
    }
    const stored = option.value === undefined || option.value === null ? (option.defaultValue ?? null) : option.value
    if (JSON.stringify(parsed.value) !== JSON.stringify(stored)) values[key] = parsed.value
  }
  return { values, errors }
}

/** The server's 422 problems by option key (fields may be written with or without `values.`). */
export function problemsByKey(problems: readonly { field: string; reason: string }[]): Map<string, string> {
  const out = new Map<string, string>()
  for (const p of problems) {
    const key = p.field.startsWith('values.') ? p.field.slice('values.'.length) : p.field
    out.set(key, out.has(key) ? `${out.get(key)}; ${p.reason}` : p.reason)
  }
  return out
}
