// A node's config form: the knowledge editor's SchemaField walking the node type's
// `configSchema` (the shape storyloom/workflow/node_type.py sends), with its editor hints.
import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import type { WorkflowProblem } from '../src/api/workflows'
import NodeConfigForm from '../src/components/workflow/NodeConfigForm.vue'
import { makeI18n } from '../src/i18n'
import { describeObject, type JsonSchema } from '../src/lib/jsonSchema'

const SCHEMA: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prompt: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null, title: 'Prompt', 'x-widget': 'textarea' },
    role: {
      type: 'string',
      enum: ['user', 'agent'],
      default: 'user',
      title: 'Role',
      'x-suggestions': [
        { value: 'user', label: 'User model' },
        { value: 'agent', label: 'Agent model' },
      ],
      'x-match-categories': ['ComboOption'],
    },
    temperature: { anyOf: [{ type: 'number', minimum: 0, maximum: 2 }, { type: 'null' }], default: null, title: 'Temperature' },
    max_depth: { type: 'integer', minimum: 1, maximum: 50, default: 5, title: 'Max Depth' },
    flags: { type: 'string', default: 'g', title: 'Flags', 'x-suggestions': [{ value: 'g' }, { value: 'gi' }], 'x-match-categories': ['ComboOption'] },
    workflow: { type: 'string', title: 'Workflow', description: 'The id of the workflow to call', 'x-widget': 'workflow' },
    carry: { anyOf: [{ type: 'object', additionalProperties: { type: 'string' } }, { type: 'null' }], default: null, title: 'Carry' },
  },
  required: ['workflow'],
}

const q = (id: string) => `[data-testid="${id}"]`

function mountForm(config: Record<string, unknown> = {}, problems: WorkflowProblem[] = [], connected: string[] = []) {
  return mount(NodeConfigForm, {
    props: {
      nodeId: 'n1',
      schema: SCHEMA,
      config,
      problems,
      workflows: [
        { id: 'caller', name: 'Caller', description: '', nodeCount: 2, builtin: false },
        { id: 'echo', name: 'Echo', description: '', nodeCount: 3, builtin: false },
      ],
      workflowId: 'caller',
      connected: new Set(connected),
    },
    global: { plugins: [makeI18n('en')] },
  })
}

describe('node config schema', () => {
  it('gives each hint its editor', () => {
    const kinds = Object.fromEntries(describeObject(SCHEMA, SCHEMA).map((f) => [f.key, [f.kind, f.widget ?? '']]))
    expect(kinds).toEqual({
      prompt: ['string', 'textarea'],
      role: ['enum', ''],
      temperature: ['number', ''],
      max_depth: ['integer', ''],
      flags: ['string', ''],
      workflow: ['workflow', 'workflow'],
      carry: ['json', ''],
    })
  })
})

describe('node config form', () => {
  it('renders long text, labelled choices, bounded numbers and suggestions', () => {
    const w = mountForm({ prompt: 'Hello' })
    expect(w.get(q('wf-config-prompt')).element.tagName).toBe('TEXTAREA')
    expect((w.get(q('wf-config-prompt')).element as HTMLTextAreaElement).value).toBe('Hello')
    const role = w.get(q('wf-config-role'))
    expect(role.element.tagName).toBe('SELECT')
    expect(role.findAll('option').map((o) => o.text())).toEqual(['User model', 'Agent model'])
    expect((role.element as HTMLSelectElement).value).toBe('user')
    const depth = w.get(q('wf-config-max_depth')).element as HTMLInputElement
    expect(depth.value).toBe('5') // the default, shown while unset
    const flags = w.get(q('wf-config-flags')).element as HTMLInputElement
    expect(flags.getAttribute('list')).toBeTruthy()
    expect(w.findAll(`datalist#${flags.getAttribute('list')} option`).map((o) => o.attributes('value'))).toEqual(['g', 'gi'])
  })

  it('sends each change by field name; a cleared number is unset', async () => {
    const w = mountForm({ temperature: 0.7 })
    await w.get(q('wf-config-role')).setValue('agent')
    await w.get(q('wf-config-temperature')).setValue('')
    await w.get(q('wf-config-prompt')).setValue('Hi')
    expect(w.emitted('config')).toEqual([
      ['role', 'agent'],
      ['temperature', null],
      ['prompt', 'Hi'],
    ])
  })

  it('offers the other workflows of the project', async () => {
    const w = mountForm()
    const picker = w.get(q('wf-config-workflow'))
    expect(picker.findAll('option').map((o) => o.attributes('value'))).toEqual(['', 'echo'])
    await picker.setValue('echo')
    expect(w.emitted('config')).toEqual([['workflow', 'echo']])
  })

  it('shows a problem beside its field and says when a connected input wins', () => {
    const problems: WorkflowProblem[] = [
      { nodeId: 'n1', field: 'nodes.n1.config.max_depth', code: 'bad-config', message: "node 'n1' config 'max_depth': 0 is below the minimum 1" },
      { nodeId: 'n2', field: 'nodes.n2.config.max_depth', code: 'bad-config', message: 'another node' },
    ]
    const w = mountForm({ max_depth: 0 }, problems, ['prompt'])
    expect(w.get(q('error-max_depth')).text()).toContain('below the minimum 1')
    expect(w.text()).not.toContain('another node')
    expect(w.text()).toContain('The connected input is used instead of this value.')
  })
})
