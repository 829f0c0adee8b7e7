// The frontend extension layer: the loader (GET /api/plugins → <link>/<script> tags, reload
// on enable/disable), the extension API on window, outlets with Vue and vanilla units, the
// permission gate of wrap/override, the four client hooks, and option values.
import { flushPromises, mount } from '@vue/test-utils'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { defineComponent, h, nextTick } from 'vue'
import {
  CLIENT_HOOKS,
  callerPlugin,
  emitAuthLogin,
  pluginRefusals,
  nodeUi,
  provideService,
  forgetPlugin,
  wrapPoint,
  emitChatMessageRendered,
  emitNodeRenderAfter,
  type ExtensionInfo,
  extensionApi,
  HookRefused,
  resetExtensionApi,
  resolveCoreComponent,
  runSettingsBeforeSave,
  runWorkflowBeforeExecute,
  setConfigValues,
  setExtensions,
} from '../src/extensions/extensionApi'
import { refusalMessage } from '../src/extensions/hookMessages'
import { loadExtensions, reloadExtensions, resetLoader } from '../src/extensions/loader'
import PluginOutlet from '../src/extensions/PluginOutlet.vue'
import ChatLog from '../src/components/chat/ChatLog.vue'
import { message } from './chatFixtures'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

function info(name: string, over: Partial<ExtensionInfo> = {}): ExtensionInfo {
  return {
    name,
    displayName: name,
    version: '1.0.0',
    frontend: { entryUrl: `/plugins/${name}/web/index.js`, styleUrls: [`/plugins/${name}/web/style.css`] },
    ...over,
  }
}

const scripts = () => [...document.querySelectorAll('script[data-storyloom-plugin]')].map((s) => (s as HTMLScriptElement).getAttribute('src'))
const links = () => [...document.querySelectorAll('link[data-storyloom-plugin]')].map((l) => l.getAttribute('href'))

beforeEach(() => {
  resetExtensionApi()
  resetLoader()
  vi.spyOn(console, 'warn').mockImplementation(() => {})
  vi.spyOn(console, 'error').mockImplementation(() => {})
})
afterEach(() => {
  vi.restoreAllMocks()
})

describe('the plugin loader', () => {
  it('puts the API on window and adds each enabled plugin’s styles and module script', async () => {
    const plugins = [info('hello'), info('no-web', { frontend: null })]
    await loadExtensions({ fetchPlugins: async () => plugins, fetchConfig: async () => ({}) })
    expect(window.storyloom?.extensionApi).toBe(extensionApi)
    expect(typeof window.storyloom?.reloadExtensions).toBe('function')
    // The seed's global name is the same object.
    expect(window.ComfyTavern).toBe(window.storyloom)
    expect(scripts()).toEqual(['/plugins/hello/web/index.js'])
    expect(links()).toEqual(['/plugins/hello/web/style.css'])
    const script = document.querySelector('script[data-storyloom-plugin="hello"]') as HTMLScriptElement
    expect(script.type).toBe('module')
  })

  it('unloads a disabled plugin with what it registered, and loads a re-enabled one again under a new URL', async () => {
    const hello = info('hello', { hooks: ['hook:client:settings:before-save'] })
    let plugins = [hello, info('other')]
    const options = { fetchPlugins: async () => plugins, fetchConfig: async () => ({}) }
    await reloadExtensions(options)
    extensionApi.forPlugin('hello').ui.registerOutletComponent('layout:header:right', { mount: (el) => void (el.textContent = 'hi') })
    const offHook = vi.fn()
    extensionApi.forPlugin('hello').hooks.on('hook:client:settings:before-save', offHook)

    plugins = [info('other')]
    await reloadExtensions(options)
    expect(scripts()).toEqual(['/plugins/other/web/index.js'])
    expect(links()).toEqual(['/plugins/other/web/style.css'])
    const w = mount(PluginOutlet, { props: { name: 'layout:header:right' } })
    expect(w.find(q('plugin-outlet-layout:header:right')).exists()).toBe(false)
    await runSettingsBeforeSave({ a: 1 })
    expect(offHook).not.toHaveBeenCalled()

    plugins = [info('other'), hello]
    await reloadExtensions(options)
    // A module runs once per URL: the second load is a new URL, so the plugin runs again.
    expect(scripts()).toEqual(['/plugins/other/web/index.js', '/plugins/hello/web/index.js?v=2'])
  })

  it('keeps the app working when the plugin list cannot be read', async () => {
    const result = await reloadExtensions({ fetchPlugins: async () => Promise.reject(new Error('offline')) })
    expect(result).toEqual([])
    expect(console.warn).toHaveBeenCalled()
  })

  it('reads the option values with the list, and tells listeners of changed values only', async () => {
    const values: Record<string, unknown> = { 'extensions.hello.greeting': 'Hi' }
    await reloadExtensions({ fetchPlugins: async () => [info('hello')], fetchConfig: async () => ({ ...values }) })
    const api = extensionApi.forPlugin('hello')
    expect(api.getConfig('greeting')).toBe('Hi')
    expect(extensionApi.getConfig('extensions.hello.greeting')).toBe('Hi')
    const heard = vi.fn()
    api.onConfigChange('greeting', heard)
    setConfigValues({ 'extensions.hello.greeting': 'Hi' })
    expect(heard).not.toHaveBeenCalled()
    setConfigValues({ 'extensions.hello.greeting': 'Hello' })
    expect(heard).toHaveBeenCalledWith('Hello')
  })
})

describe('outlets', () => {
  it('render nothing until a plugin registers, then a Vue component with the outlet’s props', async () => {
    const w = mount(PluginOutlet, { props: { name: 'node:footer', props: { nodeId: 'n1' } } })
    expect(w.html()).toBe('<!--v-if-->')
    const Badge = defineComponent({ props: { nodeId: String }, setup: (p) => () => h('b', { class: 'badge' }, `node ${p.nodeId}`) })
    const off = extensionApi.forPlugin('hello').ui.registerOutletComponent('node:footer', Badge)
    await nextTick()
    expect(w.find(q('plugin-outlet-node:footer')).exists()).toBe(true)
    expect(w.find('.badge').text()).toBe('node n1')
    off()
    await nextTick()
    expect(w.find('.badge').exists()).toBe(false)
  })

  it('mount a vanilla unit into its own element, again when the props change, and clean it up', async () => {
    const cleanups: string[] = []
    extensionApi.ui.registerOutletComponent('chat:message:actions', {
      mount(el, props) {
        el.textContent = `reply ${String(props.id)}`
        return () => cleanups.push(String(props.id))
      },
    })
    const w = mount(PluginOutlet, { props: { name: 'chat:message:actions', props: { id: 'm1' } } })
    await nextTick()
    expect(w.find('.plugin-vanilla').text()).toBe('reply m1')
    await w.setProps({ props: { id: 'm1' } })
    expect(cleanups).toEqual([])
    await w.setProps({ props: { id: 'm2' } })
    expect(w.find('.plugin-vanilla').text()).toBe('reply m2')
    expect(cleanups).toEqual(['m1'])
    w.unmount()
    expect(cleanups).toEqual(['m1', 'm2'])
  })

  it('drop a unit that throws and keep the others and the page', async () => {
    const Broken = defineComponent({ setup: () => () => { throw new Error('boom') } })
    extensionApi.forPlugin('bad').ui.registerOutletComponent('layout:header:right', Broken)
    extensionApi.forPlugin('bad').ui.registerOutletComponent('layout:header:right', { mount: () => { throw new Error('vanilla boom') } })
    extensionApi.forPlugin('good').ui.registerOutletComponent('layout:header:right', { mount: (el) => void (el.textContent = 'fine') })
    const Page = defineComponent({ setup: () => () => h('div', [h('p', 'page'), h(PluginOutlet, { name: 'layout:header:right' })]) })
    const w = mount(Page)
    await flushPromises()
    expect(w.find('p').text()).toBe('page')
    expect(w.text()).toContain('fine')
    expect(console.error).toHaveBeenCalled()
    expect(String(vi.mocked(console.error).mock.calls.map((c) => c[0]).join('\n'))).toContain('bad')
  })

  it('refuse a registration without an outlet name or a component', () => {
    const off = extensionApi.ui.registerOutletComponent('', { mount() {} })
    off()
    extensionApi.ui.registerOutletComponent('x', null as never)
    expect(console.warn).toHaveBeenCalledTimes(2)
  })
})

describe('services', () => {
  it('services.get answers a read-only view: reads through, refuses writes, hides _private', () => {
    const facade = { count: 1, nested: { n: 2 }, _secret: 's', read() { return this.count } }
    provideService('thing', facade)
    const view = extensionApi.services.get('thing') as typeof facade
    expect(view.count).toBe(1)
    expect(view.read()).toBe(1)
    expect(view._secret).toBeUndefined()
    expect(() => { view.count = 5 }).toThrow(/read-only/)
    expect(() => { view.nested.n = 5 }).toThrow(/read-only/)
    expect(facade.count).toBe(1)
    expect(extensionApi.services.get('nothing')).toBeUndefined()
    expect(() => extensionApi.services.override('thing', {})).toThrow(/no replaceable core services/)
  })
})

describe('node UIs', () => {
  it('one plugin draws a node type; a second is refused and told why; disabling frees it', () => {
    const unit = { mount: () => undefined }
    extensionApi.forPlugin('first').registerNodeUI('chat:Weaver', unit)
    extensionApi.forPlugin('second').nodes.registerUI('chat:Weaver', unit)
    expect(nodeUi('chat:Weaver')?.plugin).toBe('first')
    expect(pluginRefusals('second')).toEqual([{ kind: 'nodeUiTaken', id: 'chat:Weaver' }])
    forgetPlugin('first')
    expect(nodeUi('chat:Weaver')).toBeNull()
    extensionApi.forPlugin('second').nodes.registerUI('chat:Weaver', unit)
    expect(nodeUi('chat:Weaver')?.plugin).toBe('second')
  })
})

describe('wrap and override', () => {
  const Original = defineComponent({ setup: () => () => h('span', 'core') })
  const Replacement = defineComponent({ setup: () => () => h('span', 'plugin') })

  it('are refused unless the user granted the plugin that permission', () => {
    setExtensions([info('plain'), info('trusted', { overrides: ['ui:BaseNode'] })])
    expect(extensionApi.forPlugin('plain').ui.overrideComponent('ui:BaseNode', Replacement)).toBe(false)
    expect(extensionApi.forPlugin('plain').ui.wrapComponent('ui:BaseNode', (c) => c)).toBe(false)
    expect(extensionApi.forPlugin('trusted').ui.wrapComponent('ui:GraphEditor', (c) => c)).toBe(false)
    // Granted an override is not granted a wrap: exactly what was granted.
    expect(extensionApi.forPlugin('trusted').ui.wrapComponent('ui:BaseNode', (c) => c)).toBe(false)
    // The caller cannot be told (no plugin URL on the stack): refused.
    expect(extensionApi.ui.overrideComponent('ui:BaseNode', Replacement)).toBe(false)
    expect(console.warn).toHaveBeenCalledTimes(5)
    expect(pluginRefusals('plain')).toEqual([
      { kind: 'overrideNotGranted', id: 'ui:BaseNode' },
      { kind: 'wrapNotGranted', id: 'ui:BaseNode' },
    ])
    expect(pluginRefusals('trusted')).toEqual([
      { kind: 'noWrapPoint', id: 'ui:GraphEditor' },
      { kind: 'wrapNotGranted', id: 'ui:BaseNode' },
    ])
    expect(resolveCoreComponent('ui:BaseNode', Original)).toBe(Original)

    expect(extensionApi.forPlugin('trusted').ui.overrideComponent('ui:BaseNode', Replacement)).toBe(true)
    expect(resolveCoreComponent('ui:BaseNode', Original)).toBe(Replacement)
  })

  it('apply a granted wrapper around the original', () => {
    setExtensions([info('trusted', { wraps: ['ui:SettingsPanel'] })])
    const seen: unknown[] = []
    const ok = extensionApi.forPlugin('trusted').ui.wrapComponent('ui:SettingsPanel', (original, tools) => {
      seen.push(original, typeof tools.h)
      return Replacement
    })
    expect(ok).toBe(true)
    expect(resolveCoreComponent('ui:SettingsPanel', Original)).toBe(Replacement)
    expect(seen).toEqual([Original, 'function'])
    // A wrap point renders what the wrappers make of the original.
    const w = mount(wrapPoint('ui:SettingsPanel', Original))
    expect(w.text()).toBe('plugin')
  })

  it('reach the chat: a granted ui:ChatMessage wrapper draws every message, an ungranted one nothing', async () => {
    const props = {
      hidden: 0,
      visible: [message('a', null, { content: 'Hello there.' })],
      continuation: [],
      futureShown: [],
      pointerId: 'a',
      editingId: null,
      locked: false,
      scripts: false,
      empty: false,
    }
    setExtensions([info('plain'), info('trusted', { wraps: ['ui:ChatMessage'] })])
    const Framed = (original: unknown) =>
      defineComponent({ inheritAttrs: false, setup: (_, { attrs }) => () => h('div', { 'data-testid': 'framed' }, [h(original as never, attrs)]) })
    expect(extensionApi.forPlugin('plain').ui.wrapComponent('ui:ChatMessage', Framed)).toBe(false)
    const before = mount(ChatLog, { props, global: { plugins: [makeI18n('en')] } })
    expect(before.find(q('framed')).exists()).toBe(false)
    expect(before.text()).toContain('Hello there.')

    expect(extensionApi.forPlugin('trusted').ui.wrapComponent('ui:ChatMessage', Framed)).toBe(true)
    await nextTick()
    expect(before.find(q('framed')).exists()).toBe(true)
    expect(before.find(q('framed')).text()).toContain('Hello there.')
  })

  it('know the calling plugin from its script URL on the stack', () => {
    setExtensions([info('hello')])
    expect(callerPlugin('Error\n    at register (http://127.0.0.1:8420/plugins/hello/web/index.js?v=2:3:9)')).toBe('hello')
    expect(callerPlugin('Error\n    at x (http://127.0.0.1:8420/plugins/stranger/web/index.js:1:1)')).toBeNull()
    expect(callerPlugin('Error\n    at x (http://127.0.0.1:8420/assets/index.js:1:1)')).toBeNull()
  })
})

describe('client hooks', () => {
  // The plugins the tests below register for, each declaring every client hook.
  const declaringAll = (name: string) => info(name, { hooks: [...CLIENT_HOOKS] })
  beforeEach(() => setExtensions(['a', 'b', 'c', 'guard', 'x', 'y'].map(declaringAll)))

  it('a caller that is no enabled plugin registers no hook', async () => {
    const fn = vi.fn()
    extensionApi.hooks.on('hook:client:settings:before-save', fn as never)
    extensionApi.forPlugin('stranger').hooks.on('hook:client:settings:before-save', fn as never)
    await runSettingsBeforeSave({ a: 1 })
    expect(fn).not.toHaveBeenCalled()
    expect(pluginRefusals('stranger')).toEqual([{ kind: 'hookNotDeclared', id: 'hook:client:settings:before-save' }])
  })

  it('a known plugin registers only the hooks its manifest declares; the refusal is in its status', async () => {
    setExtensions([info('careful', { hooks: ['hook:client:auth:login'] })])
    const api = extensionApi.forPlugin('careful')
    const saved = vi.fn()
    api.hooks.on('hook:client:settings:before-save', saved as never)
    api.hooks.on('hook:client:auth:logout', saved as never)
    await runSettingsBeforeSave({ a: 1 })
    expect(saved).not.toHaveBeenCalled()
    expect(pluginRefusals('careful')).toEqual([
      { kind: 'hookNotDeclared', id: 'hook:client:settings:before-save' },
      { kind: 'noSuchHook', id: 'hook:client:auth:logout' },
    ])
  })

  it('auth:login fires once when the page is in, and at once for a handler registered later', async () => {
    setExtensions([info('early', { hooks: ['hook:client:auth:login'] }), info('late', { hooks: ['hook:client:auth:login'] })])
    const early = vi.fn()
    extensionApi.forPlugin('early').hooks.on('hook:client:auth:login', early as never)
    expect(early).not.toHaveBeenCalled()
    emitAuthLogin()
    emitAuthLogin()
    expect(early).toHaveBeenCalledTimes(1)
    expect(early).toHaveBeenCalledWith({ via: 'page' })
    const late = vi.fn()
    extensionApi.forPlugin('late').hooks.on('hook:client:auth:login', late as never)
    await Promise.resolve()
    expect(late).toHaveBeenCalledTimes(1)
  })

  it('the loader fires auth:login once the plugin list (which needs the server’s access) is read', async () => {
    const heard = vi.fn()
    setExtensions([info('p', { hooks: ['hook:client:auth:login'] })])
    extensionApi.forPlugin('p').hooks.on('hook:client:auth:login', heard as never)
    await reloadExtensions({ fetchPlugins: async () => Promise.reject(new Error('401')) })
    expect(heard).not.toHaveBeenCalled()
    await reloadExtensions({ fetchPlugins: async () => [], fetchConfig: async () => ({}) })
    expect(heard).toHaveBeenCalledTimes(1)
  })

  it('workflow:before-execute passes each handler the inputs the previous one returned', async () => {
    extensionApi.forPlugin('a').hooks.on('hook:client:workflow:before-execute', ((p: { inputs: Record<string, unknown> }) => ({ ...p.inputs, n: Number(p.inputs.n) + 1 })) as never)
    extensionApi.forPlugin('b').hooks.on('hook:client:workflow:before-execute', (async (p: { workflowId: string; inputs: Record<string, unknown> }) => ({ ...p.inputs, by: p.workflowId })) as never)
    extensionApi.forPlugin('c').hooks.on('hook:client:workflow:before-execute', (() => undefined) as never)
    expect(await runWorkflowBeforeExecute('wf', { n: 1 })).toEqual({ n: 2, by: 'wf' })
  })

  it('a handler that throws refuses, naming its plugin', async () => {
    extensionApi.forPlugin('guard').hooks.on('hook:client:settings:before-save', (() => {
      throw new Error('the API key looks wrong')
    }) as never)
    const refusal = await runSettingsBeforeSave({ user_llm: {} }).catch((e: unknown) => e)
    expect(refusal).toBeInstanceOf(HookRefused)
    expect((refusal as HookRefused).plugin).toBe('guard')
    const i18n = makeI18n('en')
    expect(refusalMessage(refusal, i18n.global.t as never)).toBe('The plugin guard stopped this: the API key looks wrong')
    expect(refusalMessage(new Error('other'), i18n.global.t as never)).toBeNull()
    await expect(runWorkflowBeforeExecute('wf', {})).resolves.toEqual({})
  })

  it('settings:before-save may change the settings', async () => {
    extensionApi.forPlugin('a').hooks.on('hook:client:settings:before-save', ((p: { settings: Record<string, unknown> }) => ({ ...p.settings, checked: true })) as never)
    expect(await runSettingsBeforeSave({ a: 1 })).toEqual({ a: 1, checked: true })
  })

  it('render hooks reach every handler even when one throws', () => {
    const el = document.createElement('div')
    const seen: string[] = []
    extensionApi.forPlugin('x').hooks.on('hook:client:node:render-after', (() => {
      throw new Error('x')
    }) as never)
    extensionApi.forPlugin('y').hooks.on('hook:client:node:render-after', ((p: { nodeId: string }) => seen.push(`node ${p.nodeId}`)) as never)
    extensionApi.forPlugin('y').hooks.on('hook:client:chat:message-rendered', ((p: { message: { id: string } }) => seen.push(`message ${p.message.id}`)) as never)
    emitNodeRenderAfter({ nodeId: 'n1', nodeType: 'core:Text', el })
    emitChatMessageRendered({ message: { id: 'm1' }, el })
    expect(seen).toEqual(['node n1', 'message m1'])
    expect(console.error).toHaveBeenCalledTimes(1)
  })

  it('an unknown hook name is refused with a warning', async () => {
    const fn = vi.fn()
    extensionApi.hooks.on('hook:client:auth:logout', fn)
    expect(console.warn).toHaveBeenCalledTimes(1)
  })

  it('unsubscribing stops the handler', async () => {
    const fn = vi.fn()
    const off = extensionApi.forPlugin('a').hooks.on('hook:client:settings:before-save', fn)
    off()
    await runSettingsBeforeSave({})
    expect(fn).not.toHaveBeenCalled()
  })
})
