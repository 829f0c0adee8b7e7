// The Tools page's components against a fake server (fetch): "try it" from a tool's
// parameters, enabling plugins (with and without overrides), and Settings → Extensions.
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import type { ConfigOptionInfo } from '../src/api/config'
import type { PluginInfo } from '../src/api/plugins'
import ExtensionsSection from '../src/components/settings/ExtensionsSection.vue'
import PluginList from '../src/components/tools/PluginList.vue'
import ToolTryForm from '../src/components/tools/ToolTryForm.vue'
import { makeI18n } from '../src/i18n'
import { type Call, type Reply, useFakeFetch } from './fakeFetch'
import { plugin, tool } from './toolFixtures'

const server = useFakeFetch()

const q = (id: string) => `[data-testid="${id}"]`
const global = { plugins: [makeI18n('en')] }

const DICE = tool('chat:RollDice', {
  displayName: 'Roll dice',
  description: 'Roll dice in NdM notation',
  parameters: {
    type: 'object',
    properties: {
      notation: { type: 'string', description: 'e.g. 2d6' },
      reason: { type: 'string' },
    },
    required: ['notation'],
  },
})

describe('try it', () => {
  it('calls the tool with the typed arguments, leaving empty optional ones out, and shows the outcome', async () => {
    server.respond = () => ({
      status: 200,
      body: { tool: DICE.id, arguments: { notation: '2d6' }, decision: 'allowed', ok: true, result: { total: 7 }, error: null, durationMs: 1.2, auditId: 5 },
    })
    const wrapper = mount(ToolTryForm, { props: { tool: DICE }, global })
    await wrapper.get(q('try-arg-notation')).setValue('2d6')
    await wrapper.get(q('try-run')).trigger('click')
    await wrapper.get('form').trigger('submit')
    await flushPromises()
    const posts = server.calls.filter((c) => c.url === '/api/tools/call')
    expect(posts.at(-1)).toEqual({ url: '/api/tools/call', method: 'POST', body: { tool: 'chat:RollDice', arguments: { notation: '2d6' } } })
    const result = wrapper.get(q('try-result'))
    expect(result.attributes('data-decision')).toBe('allowed')
    expect(wrapper.get(q('try-output')).text()).toContain('"total": 7')
    expect(wrapper.get(q('try-duration')).text()).toBe('1.2 ms')
  })

  it('does not call the tool while a required argument is missing', async () => {
    const wrapper = mount(ToolTryForm, { props: { tool: DICE }, global })
    await wrapper.get(q('try-arg-notation')).setValue('')
    await wrapper.get('form').trigger('submit')
    await flushPromises()
    expect(server.calls).toEqual([])
    expect(wrapper.find(q('try-invalid')).exists()).toBe(true)
  })

  it('shows a denial as a failed outcome with its reason', async () => {
    server.respond = () => ({
      status: 200,
      body: { tool: DICE.id, arguments: { notation: '1d4' }, decision: 'denied', ok: false, result: null, error: 'denied by rule chat:*', durationMs: 0.1, auditId: 6 },
    })
    const wrapper = mount(ToolTryForm, { props: { tool: DICE }, global })
    await wrapper.get(q('try-arg-notation')).setValue('1d4')
    await wrapper.get('form').trigger('submit')
    await flushPromises()
    expect(wrapper.get(q('try-result')).attributes('data-ok')).toBe('false')
    expect(wrapper.get(q('try-error')).text()).toBe('denied by rule chat:*')
  })
})

function pluginInfo(over: Partial<PluginInfo> = {}): PluginInfo {
  return plugin({
    name: 'example',
    displayName: 'Example',
    version: '0.1.0',
    description: 'An example',
    folder: '/p/plugins/example',
    riskReasons: ['runs Python in the server process'],
    declares: { nodes: ['example:Echo'], tools: ['example:shout'], workflows: [], hooks: [], ui: { wrap: [], inject: [], override: [] } },
    ...over,
  })
}

describe('plugins', () => {
  function serve(plugins: PluginInfo[]) {
    server.respond = (call) => {
      if (call.url === '/api/plugins/installed') {
        return { status: 200, body: { plugins, problems: [{ folder: 'broken', file: 'plugin.yaml', field: 'name', reason: 'must be kebab-case' }] } }
      }
      const m = /^\/api\/plugins\/([^/]+)\/(enable|disable)$/.exec(call.url)
      if (m) {
        const p = plugins.find((x) => x.name === m[1])!
        p.enabled = m[2] === 'enable'
        return { status: 200, body: p }
      }
      return { status: 200, body: [] }
    }
  }

  it('lists what a plugin declares, its risk and the problems of broken plugins', async () => {
    serve([pluginInfo()])
    const wrapper = mount(PluginList, { global })
    await flushPromises()
    expect(wrapper.get(q('plugin-problem')).text()).toContain('must be kebab-case')
    expect(wrapper.get(q('plugin-risk-example')).text()).toBe('medium risk')
    expect(wrapper.get(q('plugin-example')).text()).toContain('example:shout')
  })

  it('enables a plugin without overrides at once and reloads the plugin frontends', async () => {
    serve([pluginInfo()])
    const wrapper = mount(PluginList, { global })
    await flushPromises()
    await wrapper.get(q('plugin-enable-example')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url === '/api/plugins/example/enable')?.body).toEqual({ grantOverrides: false })
    expect(server.calls.some((c) => c.url === '/api/plugins')).toBe(true)
    expect(wrapper.emitted('changed')).toHaveLength(1)
    expect(wrapper.get(q('plugin-example')).attributes('data-enabled')).toBe('true')
  })

  it('asks before granting overrides, and grants only when the user says so', async () => {
    const over = pluginInfo({ declares: { ...pluginInfo().declares, ui: { wrap: [], inject: [], override: ['ui:ChatComposer'] } } })
    serve([over])
    const wrapper = mount(PluginList, { global })
    await flushPromises()
    await wrapper.get(q('plugin-enable-example')).trigger('click')
    await flushPromises()
    expect(server.calls.some((c) => c.url.endsWith('/enable'))).toBe(false)
    expect(wrapper.get(q('plugin-grant-dialog-example')).text()).toContain('ui:ChatComposer')
    await wrapper.get(q('plugin-grant-example')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url === '/api/plugins/example/enable')?.body).toEqual({ grantOverrides: true })
  })
})

describe('Settings → Extensions', () => {
  const OPTIONS: ConfigOptionInfo[] = [
    { key: 'extensions.example.loud', type: 'boolean', label: 'Loud', value: false, plugin: 'example', tool: null },
    { key: 'extensions.example.size', type: 'integer', label: 'Size', min: 1, max: 10, value: 3, plugin: 'example', tool: null, category: 'Layout' },
    { key: 'extensions.example.api_key', type: 'secret', label: 'API key', value: null, isSet: true, plugin: 'example', tool: null },
  ]

  function serve(put: (call: Call) => Reply = () => ({ status: 200, body: OPTIONS })) {
    server.respond = (call) => {
      if (call.url === '/api/config' && call.method === 'GET') return { status: 200, body: OPTIONS }
      if (call.url === '/api/config') return put(call)
      if (call.url === '/api/plugins') {
        return { status: 200, body: [{ name: 'example', displayName: 'Example', version: '0.1.0', description: '', frontend: null, configOptions: [] }] }
      }
      return { status: 404, body: {} }
    }
  }

  it('shows a card per enabled plugin, secrets empty with whether one is stored', async () => {
    serve()
    const wrapper = mount(ExtensionsSection, { global })
    await flushPromises()
    const card = wrapper.get(q('settings-ext-example'))
    expect(card.text()).toContain('Example')
    expect(card.text()).toContain('Layout')
    expect((wrapper.get(q('config-extensions.example.api_key')).element as HTMLInputElement).value).toBe('')
    expect(wrapper.get(q('config-extensions.example.api_key-state')).text()).toBe('set')
  })

  it('saves only what changed, and clears a secret with null', async () => {
    serve()
    const wrapper = mount(ExtensionsSection, { global })
    await flushPromises()
    await wrapper.get(q('config-extensions.example.loud')).setValue(true)
    await wrapper.get(q('config-extensions.example.api_key-clear')).setValue(true)
    await wrapper.get(q('settings-ext-example')).trigger('submit')
    await flushPromises()
    const put = server.calls.find((c) => c.method === 'PUT')
    expect(put?.body).toEqual({ values: { 'extensions.example.loud': true, 'extensions.example.api_key': null } })
  })

  it('shows a value out of bounds by its field without saving, and the server’s 422 by its field', async () => {
    serve(() => ({ status: 422, body: { error: { message: 'invalid', problems: [{ field: 'values.extensions.example.size', reason: 'must be even' }] } } }))
    const wrapper = mount(ExtensionsSection, { global })
    await flushPromises()
    await wrapper.get(q('config-extensions.example.size')).setValue('11')
    await wrapper.get(q('settings-ext-example')).trigger('submit')
    await flushPromises()
    expect(server.calls.some((c) => c.method === 'PUT')).toBe(false)
    expect(wrapper.get(q('config-extensions.example.size-error')).text()).toBe('Must be at most 10')
    await wrapper.get(q('config-extensions.example.size')).setValue('5')
    await wrapper.get(q('settings-ext-example')).trigger('submit')
    await flushPromises()
    expect(server.calls.find((c) => c.method === 'PUT')?.body).toEqual({ values: { 'extensions.example.size': 5 } })
    expect(wrapper.get(q('config-extensions.example.size-error')).text()).toBe('must be even')
  })
})
