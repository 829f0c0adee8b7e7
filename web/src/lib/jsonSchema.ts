// The JSON Schema subset pydantic writes for the knowledge-base file and for node config,
// and the form fields generated from it. The form editor walks the schema the server sends
// (GET /api/knowledge/schema, a node type's `configSchema`), so a field added to the models
// shows up without UI work. Editor hints beside the standard keys: `x-widget` (textarea,
// json, kb, workflow, code), `x-suggestions` (offered values, or labels of an enum's values).

/** A value offered for a field; `label` is shown instead of it. */
export interface SchemaSuggestion {
  value: unknown
  label?: string | null
}

export interface JsonSchema {
  $ref?: string
  $defs?: Record<string, JsonSchema>
  type?: string | string[]
  anyOf?: JsonSchema[]
  enum?: unknown[]
  const?: unknown
  properties?: Record<string, JsonSchema>
  additionalProperties?: boolean | JsonSchema
  required?: string[]
  items?: JsonSchema
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  exclusiveMaximum?: number
  minLength?: number
  maxLength?: number
  minItems?: number
  maxItems?: number
  pattern?: string
  title?: string
  description?: string
  default?: unknown
  'x-widget'?: string
  'x-suggestions'?: SchemaSuggestion[]
  'x-match-categories'?: string[]
  [extra: string]: unknown
}

/** Follow a local `$ref` (`#/$defs/Name`); keys beside the `$ref` win over the target's. */
export function deref(root: JsonSchema, schema: JsonSchema): JsonSchema {
  let current = schema
  const seen = new Set<string>()
  while (current.$ref) {
    const ref = current.$ref
    if (seen.has(ref)) break
    seen.add(ref)
    const name = ref.startsWith('#/$defs/') ? ref.slice('#/$defs/'.length) : null
    const target = name !== null ? root.$defs?.[name] : undefined
    if (!target) break
    const { $ref: _ignored, ...siblings } = current
    current = { ...target, ...siblings }
  }
  return current
}

function isNullSchema(s: JsonSchema): boolean {
  return s.type === 'null'
}

/** `X | None` written as `anyOf: [X, {type: null}]` → X and nullable. */
export function unwrapNullable(
  root: JsonSchema,
  schema: JsonSchema,
): { schema: JsonSchema; nullable: boolean } {
  const s = deref(root, schema)
  if (!s.anyOf) return { schema: s, nullable: s.type === 'null' }
  const others = s.anyOf.filter((o) => !isNullSchema(o))
  const nullable = others.length < s.anyOf.length
  if (others.length === 1) {
    const { anyOf: _a, ...rest } = s
    return { schema: { ...deref(root, others[0]!), ...rest, description: s.description ?? rest.description }, nullable }
  }
  return { schema: { ...s, anyOf: others }, nullable }
}

export type FieldKind =
  | 'string'
  | 'number'
  | 'integer'
  | 'boolean'
  | 'tristate'
  | 'enum'
  | 'stringList'
  | 'enumList'
  | 'object'
  | 'objectList'
  | 'scalarUnion'
  | 'json'
  | 'kb'
  | 'workflow'
  | 'code'
  | 'script'

export interface FieldSpec {
  key: string
  path: string[]
  kind: FieldKind
  title: string
  description: string
  nullable: boolean
  required: boolean
  readonly: boolean
  enumValues: string[]
  /** Constants a scalar union accepts besides numbers (e.g. "critical"). */
  constants: string[]
  /** Kinds a scalar union accepts. */
  unionTypes: string[]
  min?: number
  max?: number
  step?: string
  default?: unknown
  /** `x-widget`: how the field wants to be edited when its type does not say. */
  widget?: string
  /** `x-suggestions`: values offered (a datalist), or the labels of an enum's values. */
  suggestions: SchemaSuggestion[]
  children: FieldSpec[]
  schema: JsonSchema
}

function typeOf(s: JsonSchema): string | undefined {
  return Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type
}

function scalarUnion(root: JsonSchema, s: JsonSchema): { types: string[]; constants: string[] } | null {
  if (!s.anyOf) return null
  const types: string[] = []
  const constants: string[] = []
  for (const option of s.anyOf.map((o) => deref(root, o))) {
    if (option.const !== undefined && typeof option.const === 'string') constants.push(option.const)
    else if (option.enum) constants.push(...option.enum.map(String))
    else if (['string', 'integer', 'number', 'boolean'].includes(typeOf(option) ?? '')) types.push(typeOf(option)!)
    else return null
  }
  return { types, constants }
}

const WIDGET_KINDS: Record<string, FieldKind> = { kb: 'kb', workflow: 'workflow', json: 'json', code: 'code', script: 'script' }

/** The sibling field whose value is a `code` field's language. */
export const CODE_LANGUAGE_FIELD = 'language'

/** A string field named `script` beside a `code` field names a script file run instead of
 * the inline code (the chat:Script node): it gets the script-file picker. */
const SCRIPT_FILE_FIELD = 'script'

function kindOf(root: JsonSchema, s: JsonSchema, nullable: boolean): FieldKind {
  const widget = s['x-widget'] ? WIDGET_KINDS[s['x-widget']] : undefined
  if (widget) return widget
  if (s.enum) return 'enum'
  const type = typeOf(s)
  if (type === 'boolean') return nullable ? 'tristate' : 'boolean'
  if (type === 'integer') return 'integer'
  if (type === 'number') return 'number'
  if (type === 'string') return 'string'
  if (type === 'array' && s.items) {
    const item = unwrapNullable(root, s.items).schema
    if (item.enum) return 'enumList'
    if (typeOf(item) === 'string') return 'stringList'
    if (typeOf(item) === 'object' && item.properties) return 'objectList'
    return 'json'
  }
  if (type === 'object' && s.properties) return 'object'
  if (scalarUnion(root, s)) return 'scalarUnion'
  return 'json'
}

/** Field ids that are never edited by hand (the entry's identity). */
const READONLY = new Set(['id'])

/** The form fields of an object schema, in the schema's property order. */
export function describeObject(root: JsonSchema, schema: JsonSchema, path: string[] = []): FieldSpec[] {
  const object = deref(root, schema)
  const required = new Set(object.required ?? [])
  const fields = Object.entries(object.properties ?? {}).map(([key, raw]) =>
    describeField(root, raw, [...path, key], required.has(key)),
  )
  if (fields.some((f) => f.kind === 'code')) {
    for (const f of fields) {
      if (f.key === SCRIPT_FILE_FIELD && f.kind === 'string' && !f.widget) Object.assign(f, { kind: 'script', widget: 'script' })
    }
  }
  return fields
}

export function describeField(root: JsonSchema, raw: JsonSchema, path: string[], required = false): FieldSpec {
  const { schema, nullable } = unwrapNullable(root, raw)
  const key = path[path.length - 1] ?? ''
  const kind = kindOf(root, schema, nullable)
  const union = kind === 'scalarUnion' ? scalarUnion(root, schema) : null
  let enumValues: string[] = []
  if (kind === 'enum') enumValues = (schema.enum ?? []).map(String)
  if (kind === 'enumList' && schema.items) enumValues = (unwrapNullable(root, schema.items).schema.enum ?? []).map(String)
  let children: FieldSpec[] = []
  if (kind === 'object') children = describeObject(root, schema, path)
  if (kind === 'objectList' && schema.items) children = describeObject(root, unwrapNullable(root, schema.items).schema, [])
  const min = schema.minimum ?? schema.exclusiveMinimum
  const max = schema.maximum ?? schema.exclusiveMaximum
  return {
    key,
    path,
    kind,
    title: schema.title ?? raw.title ?? key,
    description: raw.description ?? schema.description ?? '',
    nullable,
    required,
    readonly: path.length === 1 && READONLY.has(key),
    enumValues,
    constants: union?.constants ?? [],
    unionTypes: union?.types ?? [],
    min,
    max,
    step: kind === 'integer' ? '1' : kind === 'number' ? (max !== undefined && max <= 1 ? '0.05' : 'any') : undefined,
    default: raw.default ?? schema.default,
    widget: schema['x-widget'] ?? raw['x-widget'],
    suggestions: schema['x-suggestions'] ?? raw['x-suggestions'] ?? [],
    children,
    schema,
  }
}

/** The label of `value` among a field's suggestions, else the value itself. */
export function suggestionLabel(spec: FieldSpec, value: unknown): string {
  const found = spec.suggestions.find((s) => JSON.stringify(s.value) === JSON.stringify(value))
  if (found?.label) return found.label
  return typeof value === 'string' ? value : JSON.stringify(value)
}

/** A fresh value for an object schema: defaults where given, required strings empty. */
export function defaultFor(root: JsonSchema, raw: JsonSchema): unknown {
  const { schema, nullable } = unwrapNullable(root, raw)
  if (raw.default !== undefined) return structuredClone(raw.default)
  if (schema.default !== undefined) return structuredClone(schema.default)
  if (nullable) return null
  if (schema.const !== undefined) return schema.const
  if (schema.enum) return schema.enum[0]
  switch (typeOf(schema)) {
    case 'object': {
      const out: Record<string, unknown> = {}
      for (const [key, prop] of Object.entries(schema.properties ?? {})) out[key] = defaultFor(root, prop)
      return out
    }
    case 'array':
      return []
    case 'string':
      return ''
    case 'integer':
    case 'number':
      return schema.minimum ?? 0
    case 'boolean':
      return false
    default:
      return null
  }
}

/** The value at `path` inside `value` (undefined when a step is missing). */
export function getAt(value: unknown, path: readonly (string | number)[]): unknown {
  let current = value
  for (const step of path) {
    if (current === null || typeof current !== 'object') return undefined
    current = (current as Record<string | number, unknown>)[step]
  }
  return current
}

/** Set the value at `path`, creating objects on the way. */
export function setAt(target: Record<string, unknown>, path: readonly (string | number)[], value: unknown): void {
  let current: Record<string | number, unknown> = target
  path.forEach((step, i) => {
    if (i === path.length - 1) {
      current[step] = value
      return
    }
    const next = current[step]
    if (next === null || typeof next !== 'object') current[step] = typeof path[i + 1] === 'number' ? [] : {}
    current = current[step] as Record<string | number, unknown>
  })
}

/** `['entries', 1, 'x']` → `entries[1].x`: the server's field path notation. */
export function pathKey(path: readonly (string | number)[]): string {
  let out = ''
  for (const step of path) {
    if (typeof step === 'number') out += `[${step}]`
    else out += out ? `.${step}` : step
  }
  return out
}

/** `entries[1].x` → `['entries', 1, 'x']`. */
export function parsePathKey(key: string): (string | number)[] {
  const out: (string | number)[] = []
  for (const m of key.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined) out.push(Number(m[2]))
    else if (m[1] !== undefined) out.push(m[1])
  }
  return out
}
