// A small JSON Schema validator for the subset pydantic emits for the knowledge-base
// models: type, enum, const, numeric bounds, string/array lengths, pattern, properties,
// required, items, anyOf and local $ref. Errors carry a code and parameters so the page
// can word them in the user's language; the server validates again on save.
import { deref, type JsonSchema, pathKey } from './jsonSchema'

export type ErrorCode =
  | 'type'
  | 'enum'
  | 'const'
  | 'minimum'
  | 'maximum'
  | 'exclusiveMinimum'
  | 'exclusiveMaximum'
  | 'minLength'
  | 'maxLength'
  | 'minItems'
  | 'maxItems'
  | 'pattern'
  | 'required'
  | 'anyOf'
  | 'forbiddenChars'
  | 'duplicateId'

export interface SchemaError {
  path: (string | number)[]
  code: ErrorCode
  params: Record<string, string | number>
}

function typeMatches(type: string, value: unknown): boolean {
  switch (type) {
    case 'null':
      return value === null
    case 'boolean':
      return typeof value === 'boolean'
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value)
    case 'number':
      return typeof value === 'number' && Number.isFinite(value)
    case 'string':
      return typeof value === 'string'
    case 'array':
      return Array.isArray(value)
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value)
    default:
      return true
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

/** Every problem of `value` against `schema` (`root` holds the `$defs`). */
export function validate(
  root: JsonSchema,
  schema: JsonSchema,
  value: unknown,
  path: (string | number)[] = [],
): SchemaError[] {
  const s = deref(root, schema)
  if (s.anyOf) {
    const branches = s.anyOf.map((option) => validate(root, option, value, path))
    if (branches.some((errors) => errors.length === 0)) return []
    // Report the branch whose type fits (its errors are the useful ones), else a type error.
    const fitting = branches.filter((errors) => !errors.some((e) => e.code === 'type' && pathKey(e.path) === pathKey(path)))
    if (fitting.length > 0) return fitting[0]!
    const types = s.anyOf.map((o) => {
      const d = deref(root, o)
      return d.const !== undefined ? JSON.stringify(d.const) : String(d.type ?? 'value')
    })
    return [{ path, code: 'anyOf', params: { types: types.join(' / ') } }]
  }
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type]
  if (types.length > 0 && !types.some((t) => typeMatches(t, value))) {
    return [{ path, code: 'type', params: { type: types.join(' / ') } }]
  }
  const errors: SchemaError[] = []
  if (s.const !== undefined && !sameValue(s.const, value)) {
    errors.push({ path, code: 'const', params: { value: JSON.stringify(s.const) } })
  }
  if (s.enum && !s.enum.some((option) => sameValue(option, value))) {
    errors.push({ path, code: 'enum', params: { values: s.enum.map(String).join(', ') } })
  }
  if (typeof value === 'number') {
    if (s.minimum !== undefined && value < s.minimum) errors.push({ path, code: 'minimum', params: { limit: s.minimum } })
    if (s.maximum !== undefined && value > s.maximum) errors.push({ path, code: 'maximum', params: { limit: s.maximum } })
    if (s.exclusiveMinimum !== undefined && value <= s.exclusiveMinimum) {
      errors.push({ path, code: 'exclusiveMinimum', params: { limit: s.exclusiveMinimum } })
    }
    if (s.exclusiveMaximum !== undefined && value >= s.exclusiveMaximum) {
      errors.push({ path, code: 'exclusiveMaximum', params: { limit: s.exclusiveMaximum } })
    }
  }
  if (typeof value === 'string') {
    const length = [...value].length
    if (s.minLength !== undefined && length < s.minLength) errors.push({ path, code: 'minLength', params: { limit: s.minLength } })
    if (s.maxLength !== undefined && length > s.maxLength) errors.push({ path, code: 'maxLength', params: { limit: s.maxLength } })
    if (s.pattern !== undefined && !new RegExp(s.pattern, 'u').test(value)) {
      errors.push({ path, code: 'pattern', params: { pattern: s.pattern } })
    }
  }
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems) errors.push({ path, code: 'minItems', params: { limit: s.minItems } })
    if (s.maxItems !== undefined && value.length > s.maxItems) errors.push({ path, code: 'maxItems', params: { limit: s.maxItems } })
    if (s.items) value.forEach((item, i) => errors.push(...validate(root, s.items!, item, [...path, i])))
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const record = value as Record<string, unknown>
    for (const key of s.required ?? []) {
      if (!(key in record)) errors.push({ path: [...path, key], code: 'required', params: {} })
    }
    for (const [key, prop] of Object.entries(s.properties ?? {})) {
      if (key in record) errors.push(...validate(root, prop, record[key], [...path, key]))
    }
  }
  return errors
}

const REFERENCE_DELIMITERS = ['/', '{{{', '}}}']

/**
 * The rules of the entry model that are code, not schema (pydantic validators): a display
 * name must not hold reference delimiters, and entry ids are unique in a KB.
 */
export function entryRuleErrors(entries: readonly unknown[]): SchemaError[] {
  const errors: SchemaError[] = []
  const seen = new Map<string, number>()
  entries.forEach((entry, index) => {
    if (entry === null || typeof entry !== 'object') return
    const record = entry as Record<string, unknown>
    const name = record.displayName
    if (typeof name === 'string') {
      const found = REFERENCE_DELIMITERS.filter((d) => name.includes(d))
      if (found.length > 0) {
        errors.push({ path: ['entries', index, 'displayName'], code: 'forbiddenChars', params: { chars: found.join(' ') } })
      }
    }
    if (typeof record.id === 'string') {
      const first = seen.get(record.id)
      if (first !== undefined) {
        errors.push({ path: ['entries', index, 'id'], code: 'duplicateId', params: { index: first + 1 } })
      } else seen.set(record.id, index)
    }
  })
  return errors
}

/** Validate a whole knowledge base document: schema errors plus the entry rules. */
export function validateKnowledgeBase(root: JsonSchema, kb: unknown): SchemaError[] {
  const errors = validate(root, root, kb)
  const entries = (kb as { entries?: unknown }).entries
  if (Array.isArray(entries)) errors.push(...entryRuleErrors(entries))
  return errors
}
