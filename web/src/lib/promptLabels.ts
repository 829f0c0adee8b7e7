// The prompt inspector's labels in the page's language. The server sends each label as
// structure (storyloom/chat/prompt/source_label.py, Reason.term in the knowledge layer,
// CutBlock.term): what kind of label it is and its values. The words live in the
// catalogue (chat.prompt.source.*, reason.*, place.*, cutReason.*); numbers are formatted
// for the locale. A label the catalogue does not know (an older record, a custom
// pipeline's block) is shown as the English words the server also sent.

import { en } from '../locales'

export type LabelValue = string | number

export interface LabelVocabulary {
  /** vue-i18n's `t`. */
  t: (key: string, values?: Record<string, unknown>) => string
  /** vue-i18n's `te`: whether the key is in the catalogue. */
  te: (key: string) => boolean
  /** The page's BCP 47 tag (i18n.ts `htmlLang`), for numbers. */
  tag: string
}

export interface StructuredSource {
  kind?: string
  label?: string
  what?: string | null
  values?: Record<string, unknown> | null
}

export interface StructuredReason {
  rule?: string
  detail?: string
  term?: string | null
  values?: Record<string, unknown> | null
}

export interface StructuredCut {
  reason: string
  term?: string | null
  values?: Record<string, unknown> | null
}

/** A number in the locale (`4,161`, `0.42`). */
export function formatNumber(n: number, tag: string): string {
  return new Intl.NumberFormat(tag, { maximumFractionDigits: 3 }).format(n)
}

/** A run's duration in the locale ("12 ms", "1.5 秒"): milliseconds under a second. */
export function formatDuration(ms: number, tag: string): string {
  if (!Number.isFinite(ms) || ms < 0) return ''
  const seconds = ms >= 1000
  const amount = seconds ? Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0)) : Math.round(ms)
  return new Intl.NumberFormat(tag, { style: 'unit', unit: seconds ? 'second' : 'millisecond', unitDisplay: 'short' }).format(amount)
}

/** Values ready for a message: numbers formatted, a list (of keys) quoted and joined as
 * the page's language lists, everything else as text. */
function shown(values: Record<string, unknown> | null | undefined, v: Pick<LabelVocabulary, 't' | 'tag'>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(values ?? {})) {
    if (typeof value === 'number') out[key] = formatNumber(value, v.tag)
    else if (Array.isArray(value)) {
      const quoted = value.map((item) => v.t('chat.prompt.quoted', { text: String(item) }))
      out[key] = new Intl.ListFormat(v.tag, { type: 'conjunction' }).format(quoted)
    } else out[key] = String(value ?? '')
  }
  return out
}

function known(v: LabelVocabulary, key: string, values: Record<string, string>, fallback: string): string {
  return v.te(key) ? v.t(key, values) : fallback
}

/** A speaker the message does not name, by its role ("character" for the assistant). */
function roleSpeaker(v: LabelVocabulary, role: string): string {
  return known(v, `chat.prompt.speaker.${role}`, {}, role)
}

/** Where a block came from, in the page's language. */
export function sourceText(source: StructuredSource, v: LabelVocabulary): string {
  const what = source.what ?? ''
  const values = shown(source.values, v)
  const fallback = source.label ?? ''
  const key = `chat.prompt.source.${what}`
  switch (what) {
    case '':
      return fallback
    case 'preset_prompt':
      // The server sends a name only when the user gave one: SillyTavern's own name of a
      // built-in prompt is said in the page's language.
      return known(v, key, { ...values, name: promptName({ identifier: values.prompt ?? '', name: values.name }, v) }, fallback)
    case 'message':
      return known(v, key, { ...values, speaker: values.speaker || roleSpeaker(v, values.role ?? '') }, fallback)
    case 'background':
      return values.name ? known(v, key, values, fallback) : known(v, `${key}_unnamed`, values, fallback)
    case 'card_character_note':
      return values.member ? known(v, `${key}_member`, values, fallback) : known(v, key, values, fallback)
    case 'script':
      // A node's own (inline) code: "inline" said in the page's language.
      return known(v, key, { ...values, name: scriptName(values, v) }, fallback)
    case 'lore': {
      const placement = `chat.prompt.placement.${values.placement}`
      return known(v, key, { ...values, placement: v.te(placement) ? v.t(placement) : (values.placement ?? '') }, fallback)
    }
    default:
      return known(v, key, values, fallback)
  }
}

/** Where a key matched (a reason's values), e.g. '第 3 条消息（艾莉亚）中的“…灯…”'. */
function placeText(values: Record<string, string>, v: LabelVocabulary): string {
  const place = values.place ?? 'scanned'
  let key = `chat.prompt.place.${place}`
  const shownValues = { ...values }
  if (place === 'message' && !values.speaker) key = 'chat.prompt.place.message_unnamed'
  if (place === 'source') {
    const source = `chat.prompt.scanSource.${values.source}`
    shownValues.source = v.te(source) ? v.t(source) : (values.source ?? '')
  }
  const text = v.te(key) ? v.t(key, shownValues) : ''
  return values.across ? text + v.t('chat.prompt.place.across') : text
}

/** A word the knowledge editor's pickers also say (a generation type, a condition's
 * operator), in the page's language; else as it came. */
function enumText(value: unknown, v: LabelVocabulary): string {
  const key = `knowledge.enums.${String(value)}`
  return v.te(key) ? v.t(key) : String(value ?? '')
}

/** A trigger condition as the page says it: "mood 等于 \"calm\"". */
function conditionText(raw: Record<string, unknown>, v: LabelVocabulary): string {
  const parts = { variable: String(raw.variable ?? ''), operator: enumText(raw.operator, v), expected: String(raw.expected ?? '') }
  return v.t(raw.expected === undefined ? 'chat.prompt.condition.bare' : 'chat.prompt.condition.compared', parts)
}

/** A lore reason's words, in the page's language. */
export function reasonText(reason: StructuredReason, v: LabelVocabulary): string {
  const fallback = reason.detail ?? ''
  if (!reason.term) return fallback
  const raw = { ...(reason.values ?? {}) }
  // Generation types are the knowledge editor's words too.
  if (reason.term === 'generation_type') {
    raw.type = enumText(raw.type, v)
    if (Array.isArray(raw.allowed)) raw.allowed = raw.allowed.map((item) => enumText(item, v))
  }
  const values = shown(raw, v)
  // A group's name is the author's: quoted, as keys are.
  if (reason.term.startsWith('group_') && typeof raw.group === 'string') values.group = v.t('chat.prompt.quoted', { text: raw.group })
  if (reason.term.startsWith('condition_')) values.condition = conditionText(raw, v)
  const key = `chat.prompt.reason.${reason.term}`
  if (reason.term === 'key' || reason.term === 'regex') {
    return known(v, key, { ...values, at: placeText(values, v) }, fallback)
  }
  return known(v, key, values, fallback)
}

/** An EJS template left as written, as structure (TemplateProblem). */
export interface StructuredTemplateProblem {
  origin?: string
  label?: string
  line?: number | null
  message: string
  limit?: string | null
}

/** Where a template is ("lore 阶段指导", "card description"), in the page's language. */
export function templateWhere(problem: StructuredTemplateProblem, v: LabelVocabulary): string {
  const label = problem.label ?? ''
  return known(v, `chat.prompt.templateOrigin.${problem.origin ?? 'lore'}`, { label }, label)
}

/** Why a template was left as written: the limit that stopped it, else the engine's
 * message (the JavaScript error as quickjs wrote it: code, not prose) and its line. */
export function templateProblemText(problem: StructuredTemplateProblem, v: LabelVocabulary): string {
  if (problem.limit) return known(v, `chat.prompt.templateLimit.${problem.limit}`, {}, problem.message)
  if (problem.line != null) return v.t('chat.prompt.templateProblemLine', { line: formatNumber(problem.line, v.tag), message: problem.message })
  return v.t('chat.prompt.templateProblem', { message: problem.message })
}

/** A lore rule's name ("primary_key" → "关键词"), else the rule as it came. */
export function ruleText(rule: string | undefined, v: LabelVocabulary): string {
  if (!rule) return ''
  return known(v, `chat.prompt.rule.${rule}`, {}, rule)
}

/** A script's name: its file's, or a workflow node's own (inline) code's. */
export function scriptName(run: { name?: unknown; node?: unknown }, v: Pick<LabelVocabulary, 't'>): string {
  return typeof run.node === 'string' && run.node ? v.t('chat.prompt.scriptInline', { node: run.node }) : String(run.name ?? '')
}

/** Why the budget (or the context window, or a script) cut a block. */
export function cutText(cut: StructuredCut, v: LabelVocabulary): string {
  if (!cut.term) return cut.reason
  const values = shown(cut.values, v)
  if (cut.term === 'removed_by_script') values.name = scriptName(cut.values ?? {}, v)
  return known(v, `chat.prompt.cutReason.${cut.term}`, values, cut.reason)
}

/** SillyTavern's name of a built-in prompt (the English catalogue's, which is its own). */
function defaultPromptName(identifier: string): string | undefined {
  const names = (en as { chat?: { prompt?: { promptName?: Record<string, string> } } }).chat?.prompt?.promptName
  return names?.[identifier]
}

/** A preset prompt's name as the prompt manager shows it: a built-in prompt still under
 * SillyTavern's own name (or none) in the page's language, a name the user gave as given. */
export function promptName(prompt: { identifier: string; name?: string | null }, v: LabelVocabulary): string {
  const name = prompt.name ?? ''
  const key = `chat.prompt.promptName.${prompt.identifier}`
  if ((!name || name === defaultPromptName(prompt.identifier)) && v.te(key)) return v.t(key)
  return name || prompt.identifier
}
