import { describe, expect, it } from 'vitest'
import openapi from '../src/api/openapi.json'
import {
  defaultFor,
  deref,
  describeObject,
  getAt,
  type JsonSchema,
  parsePathKey,
  pathKey,
  setAt,
  unwrapNullable,
} from '../src/lib/jsonSchema'
import { entryRuleErrors, validate, validateKnowledgeBase } from '../src/lib/schemaValidate'

// The server's own KB schema, taken from openapi.json with its refs made local: the same
// models GET /api/knowledge/schema exports, so these tests follow the real file format.
function knowledgeSchema(): JsonSchema {
  const text = JSON.stringify(openapi.components.schemas).replaceAll('#/components/schemas/', '#/$defs/')
  const defs = JSON.parse(text) as Record<string, JsonSchema>
  return { ...defs.KnowledgeBase, $defs: defs }
}

const root = knowledgeSchema()
const CAIU: JsonSchema = { $ref: '#/$defs/CAIU' }

function entry(over: Record<string, unknown> = {}): Record<string, unknown> {
  const e = defaultFor(root, CAIU) as Record<string, unknown>
  return { ...e, id: 'caiu_a', ...over }
}

describe('schema walking', () => {
  it('follows $ref and keeps the keys beside it', () => {
    const placement = deref(root, { $ref: '#/$defs/Placement', default: 'before_prompt' })
    expect(placement.enum).toContain('at_depth')
    expect(placement.default).toBe('before_prompt')
  })

  it('unwraps X | None into X and nullable', () => {
    const caseSensitive = deref(root, CAIU)
    const ac = deref(root, caseSensitive.properties!.activation_criteria!)
    const { schema, nullable } = unwrapNullable(root, ac.properties!.case_sensitive!)
    expect(nullable).toBe(true)
    expect(schema.type).toBe('boolean')
  })

  it('describes every CAIU field with a kind the form can render', () => {
    const fields = describeObject(root, CAIU)
    const byKey = new Map(fields.map((f) => [f.key, f]))
    expect(byKey.get('displayName')).toMatchObject({ kind: 'string', nullable: true })
    expect(byKey.get('id')).toMatchObject({ kind: 'string', readonly: true })
    expect(byKey.get('extensions')?.kind).toBe('json')
    const ac = byKey.get('activation_criteria')!
    expect(ac.kind).toBe('object')
    const acFields = new Map(ac.children.map((f) => [f.key, f]))
    expect(acFields.get('keywords')?.kind).toBe('stringList')
    expect(acFields.get('trigger_probability')).toMatchObject({ kind: 'number', min: 0, max: 1 })
    expect(acFields.get('case_sensitive')?.kind).toBe('tristate')
    expect(acFields.get('secondary_logic')).toMatchObject({ kind: 'enum', enumValues: ['AND_ANY', 'NOT_ALL', 'NOT_ANY', 'AND_ALL'] })
    expect(acFields.get('also_scan')?.kind).toBe('enumList')
    expect(acFields.get('key_groups')?.kind).toBe('objectList')
    // openapi.json is written with sorted keys; the live schema keeps model order.
    expect(acFields.get('key_groups')?.children.map((c) => c.key).sort()).toEqual(['group_id', 'keys', 'logic'])
    expect(acFields.get('character_filter')).toMatchObject({ kind: 'object', nullable: true })
    expect(acFields.get('scan_depth')).toMatchObject({ kind: 'integer', nullable: true, min: 0 })
    expect(acFields.get('trigger_conditions')?.children.find((c) => c.key === 'value')?.kind).toBe('json')
    const usage = new Map(byKey.get('usage_metadata')!.children.map((f) => [f.key, f]))
    expect(usage.get('token_budget_impact')).toMatchObject({ kind: 'scalarUnion', constants: ['critical'], unionTypes: ['integer'] })
    expect(usage.get('prefix')?.children.map((c) => c.path.join('.')).sort()).toEqual([
      'usage_metadata.prefix.is_enabled',
      'usage_metadata.prefix.text',
    ])
  })

  it('builds a default entry the schema accepts', () => {
    const e = entry()
    expect(getAt(e, ['activation_criteria', 'trigger_probability'])).toBe(1)
    expect(getAt(e, ['usage_metadata', 'placement'])).toBe('before_prompt')
    expect(getAt(e, ['activation_criteria', 'character_filter'])).toBeNull()
    expect(validate(root, CAIU, e)).toEqual([])
  })

  it('reads and writes values by path', () => {
    const target: Record<string, unknown> = {}
    setAt(target, ['entries', 0, 'content', 'value'], 'x')
    expect(target).toEqual({ entries: [{ content: { value: 'x' } }] })
    expect(getAt(target, ['entries', 0, 'content', 'value'])).toBe('x')
    expect(getAt(target, ['entries', 3, 'content'])).toBeUndefined()
  })

  it('converts field paths both ways like the server writes them', () => {
    const path = ['entries', 1, 'activation_criteria', 'trigger_probability']
    expect(pathKey(path)).toBe('entries[1].activation_criteria.trigger_probability')
    expect(parsePathKey('entries[1].activation_criteria.trigger_probability')).toEqual(path)
    expect(parsePathKey('')).toEqual([])
  })
})

describe('validation', () => {
  it('reports an out-of-range probability at its path', () => {
    const e = entry({ activation_criteria: { ...(entry().activation_criteria as object), trigger_probability: 1.5 } })
    expect(validate(root, CAIU, e, ['entries', 1])).toEqual([
      { path: ['entries', 1, 'activation_criteria', 'trigger_probability'], code: 'maximum', params: { limit: 1 } },
    ])
  })

  it('reports text where a number belongs as a type error', () => {
    const e = entry({ usage_metadata: { ...(entry().usage_metadata as object), priority: 'high' } })
    const errors = validate(root, CAIU, e)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ path: ['usage_metadata', 'priority'], code: 'type' })
  })

  it('accepts each branch of a union and refuses anything else', () => {
    const usage = entry().usage_metadata as object
    for (const ok of [null, 120, 'critical']) {
      expect(validate(root, CAIU, entry({ usage_metadata: { ...usage, token_budget_impact: ok } }))).toEqual([])
    }
    const bad = validate(root, CAIU, entry({ usage_metadata: { ...usage, token_budget_impact: 'lots' } }))
    expect(bad).toHaveLength(1)
    expect(bad[0]!.path).toEqual(['usage_metadata', 'token_budget_impact'])
  })

  it('checks enums, required keys and array items', () => {
    const ac = entry().activation_criteria as Record<string, unknown>
    const e = entry({
      activation_criteria: {
        ...ac,
        secondary_logic: 'MAYBE',
        keywords: ['ok', 7],
        trigger_conditions: [{ operator: 'equals' }],
      },
    })
    const codes = validate(root, CAIU, e).map((err) => [pathKey(err.path), err.code])
    expect(codes).toEqual(
      expect.arrayContaining([
        ['activation_criteria.secondary_logic', 'enum'],
        ['activation_criteria.keywords[1]', 'type'],
        ['activation_criteria.trigger_conditions[0].variable', 'required'],
      ]),
    )
  })

  it('checks the rules pydantic validators enforce: display names and unique ids', () => {
    const errors = entryRuleErrors([entry({ displayName: 'a/b' }), entry({ id: 'caiu_a', displayName: 'ok' })])
    expect(errors).toEqual([
      { path: ['entries', 0, 'displayName'], code: 'forbiddenChars', params: { chars: '/' } },
      { path: ['entries', 1, 'id'], code: 'duplicateId', params: { index: 1 } },
    ])
  })

  it('validates a whole knowledge base document', () => {
    const kb = { kb_id: 'kb_1', kb_displayName: 'Eldoria', entries: [entry(), entry({ id: 'caiu_b', version: 0 })] }
    const errors = validateKnowledgeBase(root, kb)
    expect(errors.map((e) => [pathKey(e.path), e.code])).toEqual([['entries[1].version', 'minimum']])
  })
})
