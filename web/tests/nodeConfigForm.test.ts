// A node's config form: the knowledge editor's SchemaField walking the node type's
// `configSchema` (the shape storyloom/workflow/node_type.py sends), with its editor hints.
import { EditorView } from '@codemirror/view'
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it, vi } from 'vitest'
import type { WorkflowProblem } from '../src/api/workflows'
import NodeConfigForm from '../src/components/workflow/NodeConfigForm.vue'
import { makeI18n } from '../src/i18n'
import { describeObject, type JsonSchema } from '../src/lib/jsonSchema'
import type { components } from '../src/api/schema'
import type { ScriptFile, ScriptInfo } from '../src/api/scripts'
import { useFakeFetch } from './fakeFetch'

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

// The chat:Script node's config as storyloom/chat/prompt/shuttle_nodes.py sends it: the
// language, a script file (or none) and the inline code (widget "code").
const SCRIPT_SCHEMA: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    language: {
      type: 'string',
      enum: ['javascript', 'lua'],
      default: 'javascript',
      title: 'Language',
      'x-suggestions': [
        { value: 'javascript', label: 'JavaScript' },
        { value: 'lua', label: 'Lua' },
      ],
    },
    script: { type: 'string', default: '', title: 'Script', description: 'A script file; empty: the code below' },
    code: { type: 'string', default: '', title: 'Code', 'x-widget': 'code' },
    time_limit_ms: { type: 'integer', default: 1000, minimum: 1, title: 'Time Limit Ms' },
  },
}

const SCRIPTS = [
  { name: 'mood.lua', language: 'lua', size: 40, plugin: null },
  { name: 'tidy:clean.js', language: 'javascript', size: 12, plugin: 'tidy' },
]
const FILES: Record<string, { name: string; language: string; code: string; read_only: boolean }> = {
  'mood.lua': { name: 'mood.lua', language: 'lua', code: 'local n = 1\nctx.variables.mood = "calm"\n', read_only: false },
  'tidy:clean.js': { name: 'tidy:clean.js', language: 'javascript', code: 'const x = 1\n', read_only: true },
}

const server = useFakeFetch()

function mountScript(config: Record<string, unknown> = {}) {
  server.respond = (call) => {
    if (call.url === '/api/scripts') return { status: 200, body: SCRIPTS }
    const name = decodeURIComponent(call.url.slice('/api/scripts/'.length))
    if (call.method === 'PUT') return { status: 200, body: { ...FILES[name], code: (call.body as { code: string }).code } }
    return FILES[name] ? { status: 200, body: FILES[name] } : { status: 404, body: { error: { message: 'not found' } } }
  }
  return mount(NodeConfigForm, {
    props: { nodeId: 's1', schema: SCRIPT_SCHEMA, config, problems: [], workflows: [], workflowId: 'w', connected: new Set<string>() },
    global: { plugins: [makeI18n('en')] },
    attachTo: document.body,
  })
}

/** Wait for `id` to render (the editor and the picker are loaded on first use), then settle. */
async function appear(w: ReturnType<typeof mountScript>, id: string): Promise<void> {
  await vi.waitFor(() => expect(w.find(q(id)).exists()).toBe(true), { timeout: 10_000 })
  await settle()
}

async function settle(): Promise<void> {
  for (let i = 0; i < 6; i++) {
    await flushPromises()
    await new Promise((r) => setTimeout(r, 20))
  }
}

function keywords(root: Element): string[] {
  return [...root.querySelectorAll('.tok-keyword')].map((e) => e.textContent ?? '')
}

describe('script node config', () => {
  it('marks the code field as code and the script name beside it as a script file', () => {
    const kinds = Object.fromEntries(describeObject(SCRIPT_SCHEMA, SCRIPT_SCHEMA).map((f) => [f.key, f.kind]))
    expect(kinds).toEqual({ language: 'enum', script: 'script', code: 'code', time_limit_ms: 'integer' })
    // A `script` field with no code field beside it stays text.
    const alone: JsonSchema = { type: 'object', properties: { script: { type: 'string' } } }
    expect(describeObject(alone, alone)[0]!.kind).toBe('string')
  })

  it('edits the code in an editor highlighted in the language chosen beside it', async () => {
    const w = mountScript({ language: 'lua', code: 'local mood = "calm"\nctx.variables.mood = mood\n' })
    await appear(w, 'wf-config-code')
    const editor = w.get(q('wf-config-code'))
    expect(editor.classes()).toContain('code-editor')
    expect(editor.attributes('data-language')).toBe('lua')
    expect(editor.find('.cm-content').text()).toContain('local mood')
    expect(keywords(editor.element)).toContain('local')
    // Typing in the editor sends the code as the field's value.
    const view = EditorView.findFromDOM(editor.get('.cm-editor').element as HTMLElement)!
    view.dispatch({ changes: { from: 0, insert: '-- hi\n' } })
    expect(w.emitted('config')!.at(-1)).toEqual(['code', '-- hi\nlocal mood = "calm"\nctx.variables.mood = mood\n'])
    w.unmount()
  })

  it('uses the language default when none is set, and follows a change of language', async () => {
    const w = mountScript({ code: 'const x = 1' })
    await appear(w, 'wf-config-code')
    expect(w.get(q('wf-config-code')).attributes('data-language')).toBe('javascript')
    expect(keywords(w.get(q('wf-config-code')).element)).toContain('const')
    await w.setProps({ config: { code: 'const x = 1', language: 'lua' } })
    await settle()
    expect(w.get(q('wf-config-code')).attributes('data-language')).toBe('lua')
    w.unmount()
  })

  it('picks a script file from the project and the plugins', async () => {
    const w = mountScript()
    await appear(w, 'wf-config-script-select')
    const select = w.get(q('wf-config-script-select'))
    expect(select.findAll('option').map((o) => o.attributes('value'))).toEqual(['', 'mood.lua', 'tidy:clean.js'])
    expect(select.findAll('optgroup').map((g) => g.attributes('label'))).toEqual(['Project scripts', 'Plugin scripts (read-only)'])
    await select.setValue('mood.lua')
    expect(w.emitted('config')).toEqual([['script', 'mood.lua']])
    w.unmount()
  })

  it('opens the chosen file in an editor and saves it', async () => {
    const w = mountScript({ script: 'mood.lua', language: 'lua' })
    await appear(w, 'wf-config-script-edit')
    await w.get(q('wf-config-script-edit')).trigger('click')
    await settle()
    const editor = w.get(q('wf-config-script-code'))
    expect(editor.attributes('data-language')).toBe('lua')
    expect(editor.find('.cm-content').text()).toContain('ctx.variables.mood')
    expect(keywords(editor.element)).toContain('local')
    expect(w.get(q('wf-config-script-save')).attributes('disabled')).toBeDefined()
    const view = EditorView.findFromDOM(editor.get('.cm-editor').element as HTMLElement)!
    view.dispatch({ changes: { from: 0, insert: '-- edited\n' } })
    await flushPromises()
    await w.get(q('wf-config-script-save')).trigger('click')
    await settle()
    const put = server.calls.find((c) => c.method === 'PUT')!
    expect(put.url).toBe('/api/scripts/mood.lua')
    expect(put.body).toEqual({ code: '-- edited\nlocal n = 1\nctx.variables.mood = "calm"\n' })
    expect(w.find(q('wf-config-script-saved')).exists()).toBe(true)
    // The node's config is not touched by saving the file.
    expect(w.emitted('config')).toBeUndefined()
    w.unmount()
  })

  it("shows a plugin's script read-only, with no save", async () => {
    const w = mountScript({ script: 'tidy:clean.js' })
    await appear(w, 'wf-config-script-edit')
    await w.get(q('wf-config-script-edit')).trigger('click')
    await settle()
    expect(server.calls.map((c) => c.url)).toContain('/api/scripts/tidy%3Aclean.js')
    expect(w.get(q('wf-config-script-code')).attributes('data-readonly')).toBe('true')
    expect(w.find(q('wf-config-script-readonly')).exists()).toBe(true)
    expect(w.find(q('wf-config-script-save')).exists()).toBe(false)
    w.unmount()
  })

  it('creates a new project script with the extension of the language', async () => {
    const w = mountScript({ language: 'lua' })
    await appear(w, 'wf-config-script-new')
    await w.get(q('wf-config-script-new')).trigger('click')
    await w.get(q('wf-config-script-new-name')).setValue('../evil')
    expect(w.get(q('wf-config-script-create')).attributes('disabled')).toBeDefined()
    await w.get(q('wf-config-script-new-name')).setValue('greet')
    await w.get(q('wf-config-script-create')).trigger('click')
    await settle()
    expect(server.calls.find((c) => c.method === 'PUT')).toEqual({ url: '/api/scripts/greet.lua', method: 'PUT', body: { code: '' } })
    expect(w.emitted('config')).toEqual([['script', 'greet.lua']])
    w.unmount()
  })
})

describe('scripts API shapes', () => {
  it('accept what the server declares it sends (checked by the typecheck)', () => {
    type Schemas = components['schemas']
    const accepts = <T>(value: T): T => value
    const checks = [(v: Schemas['ScriptInfo']) => accepts<ScriptInfo>(v), (v: Schemas['ScriptFile']) => accepts<ScriptFile>(v)]
    expect(checks).toHaveLength(2)
  })
})
