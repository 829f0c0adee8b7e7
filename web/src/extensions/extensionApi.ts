// The extension API plugins' frontends call (seed 003 §15.2.2, §20, §21), installed as
// `window.storyloom.extensionApi` before any plugin script loads.
//
// Three layers, as the seed orders them by risk: outlets (add UI at named places, always
// allowed), hooks (react to or intercept a flow: the client hooks below, each only if the
// plugin's manifest declares it, ExtensionInfo.hooks), and wrap/override of core
// components, refused unless the user granted exactly that permission when enabling the
// plugin (ExtensionInfo.wraps, ExtensionInfo.overrides). A refusal is recorded in the
// plugin's status (pluginRefusals), which the Tools page shows. Everything a plugin
// registers is recorded under its name, so disabling it removes its UI and hooks without
// a page reload.
//
// Which plugin is calling: `extensionApi.forPlugin(name)` says so explicitly; otherwise the
// caller is found from the call stack (a plugin's script is served under /plugins/<name>/).
// A wrap/override whose caller cannot be told is refused.
import { type Component, computed, defineComponent, h, markRaw, shallowReactive } from 'vue'

/** A plugin UI unit without Vue: `mount` draws into `el` and may return a cleanup. */
export interface VanillaComponent {
  mount(el: HTMLElement, props: Record<string, unknown>): void | (() => void)
}

export type OutletComponent = Component | VanillaComponent

export interface OutletEntry {
  id: number
  plugin: string | null
  component: OutletComponent
}

export const CLIENT_HOOKS = [
  'hook:client:auth:login',
  'hook:client:workflow:before-execute',
  'hook:client:settings:before-save',
  'hook:client:node:render-after',
  'hook:client:chat:message-rendered',
] as const
export type ClientHook = (typeof CLIENT_HOOKS)[number]

/** The core components a plugin may wrap or override (plugin_manifest.WRAP_POINTS). */
export const WRAP_POINTS = ['ui:BaseNode', 'ui:ChatMessage', 'ui:SettingsPanel', 'ui:SidebarManager'] as const
export type WrapPoint = (typeof WRAP_POINTS)[number]

/** What each hook's handler receives. */
export interface AuthLogin {
  /** The page's first request that needed the server's access (GET /api/plugins). */
  via: 'page'
}
export interface WorkflowBeforeExecute {
  workflowId: string
  inputs: Record<string, unknown>
}
export interface SettingsBeforeSave {
  settings: Record<string, unknown>
}
export interface NodeRenderAfter {
  nodeId: string
  nodeType: string
  el: HTMLElement
}
export interface ChatMessageRendered {
  message: Record<string, unknown>
  el: HTMLElement
}

type HookHandler = (payload: never) => unknown

interface HookEntry {
  id: number
  plugin: string | null
  fn: HookHandler
}

/** What the app knows of an enabled plugin's frontend (GET /api/plugins, seed §15.1.1). */
export interface ExtensionInfo {
  name: string
  displayName: string
  version: string
  description?: string
  frontend?: { entryUrl: string; styleUrls: string[] } | null
  configOptions?: Record<string, unknown>[]
  /** Override permissions the user granted (`ui:BaseNode`, `service:x`). */
  overrides?: string[]
  /** Core components the user granted it to wrap (`ui:BaseNode` …). */
  wraps?: string[]
  /** The client hooks its manifest declares. */
  hooks?: string[]
}

/** Why the extension API refused something a plugin asked for (shown in its status). */
export type RefusalKind = 'wrapNotGranted' | 'overrideNotGranted' | 'noWrapPoint' | 'hookNotDeclared' | 'noSuchHook' | 'nodeUiTaken'
export interface Refusal {
  kind: RefusalKind
  /** The component id or hook name it asked for. */
  id: string
}

export type ConfigListener = (value: unknown) => void

export class HookRefused extends Error {
  readonly plugin: string | null
  constructor(plugin: string | null, message: string) {
    super(message)
    this.name = 'HookRefused'
    this.plugin = plugin
  }
}

let nextId = 1

// -- state (module-level: one app per page) ------------------------------------------------

const outletRegistry = shallowReactive(new Map<string, readonly OutletEntry[]>())
/** Each node type's body UI from a plugin (one per type: the first to register keeps it). */
const nodeUis = shallowReactive(new Map<string, OutletEntry>())
const hookRegistry = new Map<ClientHook, HookEntry[]>()
const wrappers = shallowReactive(new Map<string, readonly { plugin: string; wrap: Wrapper }[]>())
const overrides = shallowReactive(new Map<string, { plugin: string; component: Component }>())
const extensions = new Map<string, ExtensionInfo>()
const configValues = new Map<string, unknown>()
const configListeners = new Map<string, Set<{ plugin: string | null; fn: ConfigListener }>>()
const refusals = shallowReactive(new Map<string, readonly Refusal[]>())
/** The page has made an authenticated request: auth:login has fired. */
let authenticated = false

/** What the API refused each plugin (reactive), by plugin name. */
export function pluginRefusals(plugin: string): readonly Refusal[] {
  return refusals.get(plugin) ?? []
}

function recordRefusal(plugin: string | null, kind: RefusalKind, id: string): void {
  const what = `[storyloom extensions] ${plugin ?? 'an unknown caller'}: ${id} refused (${kind})`
  console.warn(what)
  if (!plugin) return
  const before = refusals.get(plugin) ?? []
  if (before.some((r) => r.kind === kind && r.id === id)) return
  refusals.set(plugin, [...before, { kind, id }])
}

/** The plugins the loader knows (their ExtensionInfo decides what they may override). */
export function setExtensions(list: readonly ExtensionInfo[]): void {
  extensions.clear()
  for (const info of list) extensions.set(info.name, info)
}

export function knownExtensions(): ExtensionInfo[] {
  return [...extensions.values()]
}

/** The plugin whose script is on the call stack (served under /plugins/<name>/), if any. */
export function callerPlugin(stack: string | undefined = new Error().stack): string | null {
  if (!stack) return null
  for (const m of stack.matchAll(/\/plugins\/([^/?#\s:]+)\//g)) {
    const name = decodeURIComponent(m[1]!)
    if (extensions.size === 0 || extensions.has(name)) return name
  }
  return null
}

function isVanilla(component: OutletComponent): component is VanillaComponent {
  return typeof (component as VanillaComponent).mount === 'function' && !('setup' in component) && !('render' in component) && !('template' in component)
}

function validComponent(component: unknown): component is OutletComponent {
  if (typeof component === 'function') return true // a functional Vue component
  return typeof component === 'object' && component !== null
}

// -- outlets -------------------------------------------------------------------------------

function registerOutlet(plugin: string | null, outlet: string, component: OutletComponent): () => void {
  if (!outlet || typeof outlet !== 'string' || !validComponent(component)) {
    console.warn(`[storyloom extensions] ${plugin ?? 'a plugin'}: registerOutletComponent needs an outlet name and a component`)
    return () => {}
  }
  const entry: OutletEntry = { id: nextId++, plugin, component: markRaw(component as object) as OutletComponent }
  outletRegistry.set(outlet, [...(outletRegistry.get(outlet) ?? []), entry])
  return () => {
    const left = (outletRegistry.get(outlet) ?? []).filter((e) => e.id !== entry.id)
    if (left.length) outletRegistry.set(outlet, left)
    else outletRegistry.delete(outlet)
  }
}

// -- plugin pages and menu items (seed 003 §20.1 router.addRoute, ui.addMenuItem) -----------

/** A page of a plugin's own, at /ext/<plugin>/<path> in the app's router. */
export interface PluginPage {
  id: number
  plugin: string
  path: string
  title: string
  component: OutletComponent
}
/** A navigation entry a plugin added: it opens one of that plugin's pages. */
export interface PluginMenuItem {
  id: number
  plugin: string
  label: string
  path: string
}
const pages = shallowReactive(new Map<string, PluginPage>())
const menuItems = shallowReactive(new Map<number, PluginMenuItem>())

/** A page path: segments of letters, digits, `-`, `_`, `.` joined by `/`, no leading `/`. */
function cleanPagePath(path: unknown): string | null {
  if (typeof path !== 'string') return null
  const p = path.replace(/^\/+|\/+$/g, '')
  return /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(p) ? p : null
}

function addRoute(plugin: string | null, route: { path: string; component: OutletComponent; title?: string }): () => void {
  const path = cleanPagePath(route?.path)
  if (!plugin || !path || !validComponent(route.component)) {
    // The page's address names its plugin: a caller that cannot be told has none.
    console.warn(`[storyloom extensions] ${plugin ?? 'an unknown caller'}: router.addRoute needs a plugin, a path (letters, digits, - _ . /) and a component`)
    return () => {}
  }
  const entry: PluginPage = {
    id: nextId++,
    plugin,
    path,
    title: typeof route.title === 'string' && route.title ? route.title : path,
    component: markRaw(route.component as object) as OutletComponent,
  }
  pages.set(`${plugin}/${path}`, entry)
  return () => {
    if (pages.get(`${plugin}/${path}`)?.id === entry.id) pages.delete(`${plugin}/${path}`)
  }
}

/** The page `plugin` registered at `path` (reactive), or null. */
export function pluginPage(plugin: string, path: string): PluginPage | null {
  return pages.get(`${plugin}/${path}`) ?? null
}

function addMenuItem(plugin: string | null, item: { label: string; path: string }): () => void {
  const path = cleanPagePath(item?.path)
  if (!plugin || !path || typeof item.label !== 'string' || !item.label) {
    console.warn(`[storyloom extensions] ${plugin ?? 'an unknown caller'}: ui.addMenuItem needs a plugin, a label and the path of one of its pages`)
    return () => {}
  }
  const entry: PluginMenuItem = { id: nextId++, plugin, label: item.label, path }
  menuItems.set(entry.id, entry)
  return () => menuItems.delete(entry.id)
}

/** The navigation entries plugins added, in the order they were added (reactive). */
export function pluginMenuItems(): PluginMenuItem[] {
  return [...menuItems.values()]
}

// -- services (seed 003 §20.4: services.get answers a read-only proxy) ---------------------

const services = new Map<string, object>()

/** Why `services.override` throws, for the plugin author's console (the server's
 * plugin_manifest.SERVICE_OVERRIDE_REFUSED says the same of plugin.yaml). */
const SERVICE_OVERRIDE_REFUSED = (name: string) =>
  `services.override('${name}'): storyloom has no replaceable core services; change behaviour through hooks, outlets, wraps and node types`

/** The app offers `facade` to plugins as service `name`: only what the facade has is seen. */
export function provideService(name: string, facade: object): void {
  services.set(name, facade)
}

/** A view of `target` that reads through and refuses every write; `_private` members are hidden. */
function readOnly(name: string, target: object): object {
  const refuse = (): never => {
    throw new TypeError(`[storyloom extensions] service ${name} is read-only`)
  }
  return new Proxy(target, {
    get(t, prop, receiver) {
      if (typeof prop === 'string' && prop.startsWith('_')) return undefined
      const value: unknown = Reflect.get(t, prop, receiver)
      if (typeof value === 'function') return (value as (...a: unknown[]) => unknown).bind(t)
      if (value && typeof value === 'object') return readOnly(`${name}.${String(prop)}`, value)
      return value
    },
    has: (t, prop) => !(typeof prop === 'string' && prop.startsWith('_')) && Reflect.has(t, prop),
    set: refuse,
    deleteProperty: refuse,
    defineProperty: refuse,
    setPrototypeOf: refuse,
  })
}

function getService(plugin: string | null, name: string): unknown {
  const service = services.get(name)
  if (!service) {
    const known = [...services.keys()].join(', ')
    console.warn(`[storyloom extensions] ${plugin ?? 'a plugin'}: no service ${name} (known: ${known})`)
    return undefined
  }
  return readOnly(name, service)
}

// -- node UIs (seed 003 §15.2.2 registerNodeUI, §20.1 nodes.registerUI) ----------------------

function registerNodeUI(plugin: string | null, nodeType: string, component: OutletComponent): () => void {
  if (!nodeType || typeof nodeType !== 'string' || !validComponent(component)) {
    console.warn(`[storyloom extensions] ${plugin ?? 'a plugin'}: registerNodeUI needs a node type and a component`)
    return () => {}
  }
  const held = nodeUis.get(nodeType)
  if (held && held.plugin !== plugin) {
    // Two plugins drawing one node type would fight over it: the first keeps it.
    recordRefusal(plugin, 'nodeUiTaken', nodeType)
    return () => {}
  }
  const entry: OutletEntry = { id: nextId++, plugin, component: markRaw(component as object) as OutletComponent }
  nodeUis.set(nodeType, entry)
  return () => {
    if (nodeUis.get(nodeType)?.id === entry.id) nodeUis.delete(nodeType)
  }
}

/** The plugin UI drawn as the body of every node of `nodeType`, if any (reactive). */
export function nodeUi(nodeType: string): OutletEntry | null {
  return nodeUis.get(nodeType) ?? null
}

/** What is registered at `outlet` (reactive: a PluginOutlet re-renders when it changes). */
export function outletComponents(outlet: string): readonly OutletEntry[] {
  return outletRegistry.get(outlet) ?? []
}

export { isVanilla }

// -- wrap / override -----------------------------------------------------------------------

/** What a wrapper gets besides the original: Vue's `h`, since a plugin's script cannot
 * import the app's Vue. */
export interface WrapTools {
  h: typeof h
}
export type Wrapper = (original: Component, tools: WrapTools) => Component

/** Whether `plugin` may wrap (`wraps`) or override (`overrides`) `componentId`: exactly
 * what the user granted, never one for the other. */
function granted(plugin: string | null, componentId: string, list: 'wraps' | 'overrides'): boolean {
  if (!plugin) return false
  return (extensions.get(plugin)?.[list] ?? []).includes(componentId)
}

function isWrapPoint(componentId: string): boolean {
  return (WRAP_POINTS as readonly string[]).includes(componentId)
}

/** Why `plugin` may not wrap/override `componentId`, or null when it may. */
function componentRefusal(plugin: string | null, componentId: string, list: 'wraps' | 'overrides'): RefusalKind | null {
  if (!isWrapPoint(componentId)) return 'noWrapPoint'
  if (!granted(plugin, componentId, list)) return list === 'wraps' ? 'wrapNotGranted' : 'overrideNotGranted'
  return null
}

function wrapComponent(plugin: string | null, componentId: string, wrap: Wrapper): boolean {
  if (typeof wrap !== 'function') return false
  const refused = componentRefusal(plugin, componentId, 'wraps')
  if (refused) {
    recordRefusal(plugin, refused, componentId)
    return false
  }
  wrappers.set(componentId, [...(wrappers.get(componentId) ?? []), { plugin: plugin!, wrap }])
  return true
}

function overrideComponent(plugin: string | null, componentId: string, component: Component): boolean {
  if (!validComponent(component)) return false
  const refused = componentRefusal(plugin, componentId, 'overrides')
  if (refused) {
    recordRefusal(plugin, refused, componentId)
    return false
  }
  overrides.set(componentId, { plugin: plugin!, component: markRaw(component as object) as Component })
  return true
}

/** The component to render for core component `componentId`: the granted override, else
 * the original, then each granted wrapper in registration order. A wrapper that throws is
 * skipped (logged). */
export function resolveCoreComponent(componentId: string, original: Component): Component {
  let current = overrides.get(componentId)?.component ?? original
  for (const w of wrappers.get(componentId) ?? []) {
    try {
      current = markRaw(w.wrap(current, { h }) as object) as Component
    } catch (exc) {
      console.error(`[storyloom extensions] ${w.plugin}: wrapper of ${componentId} failed`, exc)
    }
  }
  return current
}

/**
 * A core component as the page renders it at wrap point `componentId`: `original`, or
 * what the granted override and wrappers make of it, following them as plugins come and
 * go. Props, listeners and slots pass through.
 */
export function wrapPoint(componentId: WrapPoint, original: Component): Component {
  return markRaw(
    defineComponent({
      name: `WrapPoint(${componentId})`,
      inheritAttrs: false,
      setup(_, { attrs, slots }) {
        const shown = computed(() => resolveCoreComponent(componentId, original))
        return () => h(shown.value, attrs, slots)
      },
    }),
  )
}

// -- hooks ---------------------------------------------------------------------------------

/** Only an enabled plugin may register a hook, and only one its manifest declares; a
 * caller that cannot be told (no plugin script on the stack) is refused, as for wraps. */
function declared(plugin: string | null, hook: ClientHook): boolean {
  if (!plugin) return false
  return (extensions.get(plugin)?.hooks ?? []).includes(hook)
}

function onHook(plugin: string | null, name: string, fn: HookHandler): () => void {
  if (typeof fn !== 'function') return () => {}
  if (!(CLIENT_HOOKS as readonly string[]).includes(name)) {
    recordRefusal(plugin, 'noSuchHook', name)
    return () => {}
  }
  const hook = name as ClientHook
  if (!declared(plugin, hook)) {
    recordRefusal(plugin, 'hookNotDeclared', hook)
    return () => {}
  }
  const entry: HookEntry = { id: nextId++, plugin, fn }
  hookRegistry.set(hook, [...(hookRegistry.get(hook) ?? []), entry])
  // auth:login has already fired for this page: a handler registered after it (every
  // plugin's, since plugins load once the page is in) is told at once.
  if (hook === 'hook:client:auth:login' && authenticated) queueMicrotask(() => callAuthLogin(entry))
  return () => hookRegistry.set(hook, (hookRegistry.get(hook) ?? []).filter((e) => e.id !== entry.id))
}

function callAuthLogin(entry: HookEntry): void {
  if (!(hookRegistry.get('hook:client:auth:login') ?? []).includes(entry)) return
  try {
    const out = (entry.fn as (p: AuthLogin) => unknown)({ via: 'page' })
    if (out instanceof Promise) out.catch((exc: unknown) => console.error(`[storyloom extensions] ${entry.plugin ?? 'a plugin'}: auth:login failed`, exc))
  } catch (exc) {
    console.error(`[storyloom extensions] ${entry.plugin ?? 'a plugin'}: auth:login failed`, exc)
  }
}

/**
 * `hook:client:auth:login`: the page is in (its first request that needs the server's
 * access, GET /api/plugins, succeeded — with the token cookie where the server asks for
 * one). Fires once per page: handlers registered later are called when they register.
 */
export function emitAuthLogin(): void {
  if (authenticated) return
  authenticated = true
  for (const h of hookHandlers('hook:client:auth:login')) callAuthLogin(h)
}

function hookHandlers(name: ClientHook): HookEntry[] {
  return [...(hookRegistry.get(name) ?? [])]
}

function reason(exc: unknown): string {
  return exc instanceof Error ? exc.message : String(exc)
}

/**
 * `hook:client:workflow:before-execute`: each handler may return new inputs (an object,
 * or a promise of one); they run in order, each seeing the previous one's inputs. A handler
 * that throws stops the run: HookRefused names the plugin.
 */
export async function runWorkflowBeforeExecute(workflowId: string, inputs: Record<string, unknown>): Promise<Record<string, unknown>> {
  let current = inputs
  for (const h of hookHandlers('hook:client:workflow:before-execute')) {
    let out: unknown
    try {
      out = await (h.fn as (p: WorkflowBeforeExecute) => unknown)({ workflowId, inputs: { ...current } })
    } catch (exc) {
      throw new HookRefused(h.plugin, reason(exc))
    }
    if (out && typeof out === 'object' && !Array.isArray(out)) current = out as Record<string, unknown>
  }
  return current
}

/**
 * `hook:client:settings:before-save`: a handler throws to refuse the save (HookRefused
 * carries its message), or returns changed settings.
 */
export async function runSettingsBeforeSave<T extends object>(settings: T): Promise<T> {
  let current = settings
  for (const h of hookHandlers('hook:client:settings:before-save')) {
    let out: unknown
    try {
      out = await (h.fn as (p: SettingsBeforeSave) => unknown)({ settings: { ...(current as Record<string, unknown>) } })
    } catch (exc) {
      throw new HookRefused(h.plugin, reason(exc))
    }
    if (out && typeof out === 'object' && !Array.isArray(out)) current = out as T
  }
  return current
}

/** Notification hooks: every handler runs; one that throws is logged, the others still run. */
function notify(name: ClientHook, payload: unknown): void {
  for (const h of hookHandlers(name)) {
    try {
      const out = (h.fn as (p: unknown) => unknown)(payload)
      if (out instanceof Promise) out.catch((exc: unknown) => console.error(`[storyloom extensions] ${h.plugin ?? 'a plugin'}: ${name} failed`, exc))
    } catch (exc) {
      console.error(`[storyloom extensions] ${h.plugin ?? 'a plugin'}: ${name} failed`, exc)
    }
  }
}

export function hasHandlers(name: ClientHook): boolean {
  return (hookRegistry.get(name)?.length ?? 0) > 0
}

export function emitNodeRenderAfter(payload: NodeRenderAfter): void {
  if (hasHandlers('hook:client:node:render-after')) notify('hook:client:node:render-after', payload)
}

export function emitChatMessageRendered(payload: ChatMessageRendered): void {
  if (hasHandlers('hook:client:chat:message-rendered')) notify('hook:client:chat:message-rendered', payload)
}

// -- configuration -------------------------------------------------------------------------

/** A plugin's short option name means its own `extensions.<plugin>.<option>`. */
function configKey(plugin: string | null, key: string): string {
  if (plugin && !key.includes('.')) return `extensions.${plugin}.${key}`
  return key
}

/** The option values the app knows (GET /api/config, or after a save): listeners of each
 * value that changed are told. Secret options have no value here (never sent). */
export function setConfigValues(values: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(values)) {
    const had = configValues.has(key)
    const before = configValues.get(key)
    configValues.set(key, value)
    if (had && JSON.stringify(before) === JSON.stringify(value)) continue
    for (const l of configListeners.get(key) ?? []) {
      try {
        l.fn(value)
      } catch (exc) {
        console.error(`[storyloom extensions] ${l.plugin ?? 'a plugin'}: onConfigChange(${key}) failed`, exc)
      }
    }
  }
}

function getConfig(plugin: string | null, key: string): unknown {
  return configValues.get(configKey(plugin, key))
}

function onConfigChange(plugin: string | null, key: string, fn: ConfigListener): () => void {
  const full = configKey(plugin, key)
  let set = configListeners.get(full)
  if (!set) configListeners.set(full, (set = new Set()))
  const entry = { plugin, fn }
  set.add(entry)
  return () => set.delete(entry)
}

// -- the API object ------------------------------------------------------------------------

export interface ExtensionApi {
  readonly plugin: string | null
  ui: {
    registerOutletComponent(outlet: string, component: OutletComponent): () => void
    wrapComponent(componentId: string, wrapper: Wrapper): boolean
    overrideComponent(componentId: string, component: Component): boolean
    /** A navigation entry opening one of this plugin's pages (router.addRoute). */
    addMenuItem(item: { label: string; path: string }): () => void
  }
  /** A read-only view of an app service (`connection`, `health`); undefined for another
   * name. `override` always throws: no core service can be replaced (plugin.yaml refuses
   * `permissions.services.override` too). */
  services: { get(name: string): unknown; override(name: string, service: object): never }
  /** A page of this plugin's own, at /ext/<plugin>/<path>. */
  router: { addRoute(route: { path: string; component: OutletComponent; title?: string }): () => void }
  hooks: { on(name: string, fn: (payload: never) => unknown): () => void }
  /** Draw every node of `nodeType` with `component` as its body (handles stay the app's). */
  registerNodeUI(nodeType: string, component: OutletComponent): () => void
  /** The seed's §20.1 spelling of registerNodeUI. */
  nodes: { registerUI(nodeType: string, component: OutletComponent): () => void }
  getConfig(key: string): unknown
  onConfigChange(key: string, fn: ConfigListener): () => void
  /** The same API, with every registration recorded under plugin `name`. */
  forPlugin(name: string): ExtensionApi
}

function makeApi(fixed: string | null): ExtensionApi {
  const who = () => fixed ?? callerPlugin()
  return {
    plugin: fixed,
    ui: {
      registerOutletComponent: (outlet, component) => registerOutlet(who(), outlet, component),
      wrapComponent: (id, wrap) => wrapComponent(who(), id, wrap),
      overrideComponent: (id, component) => overrideComponent(who(), id, component),
      addMenuItem: (item) => addMenuItem(who(), item),
    },
    router: { addRoute: (route) => addRoute(who(), route) },
    services: {
      get: (name) => getService(who(), name),
      override: (name) => {
        throw new Error(SERVICE_OVERRIDE_REFUSED(name))
      },
    },
    hooks: { on: (name, fn) => onHook(who(), name, fn) },
    registerNodeUI: (nodeType, component) => registerNodeUI(who(), nodeType, component),
    nodes: { registerUI: (nodeType, component) => registerNodeUI(who(), nodeType, component) },
    getConfig: (key) => getConfig(who(), key),
    onConfigChange: (key, fn) => onConfigChange(who(), key, fn),
    forPlugin: (name) => makeApi(name),
  }
}

export const extensionApi: ExtensionApi = makeApi(null)

export interface StoryloomGlobal {
  extensionApi?: ExtensionApi
  reloadExtensions?: () => Promise<void>
  [key: string]: unknown
}

/** Set `window.storyloom` and its alias `window.ComfyTavern` to one object. */
export function setStoryloomGlobal(value: StoryloomGlobal, target: Window = window): void {
  target.storyloom = value
  target.ComfyTavern = value
}

declare global {
  interface Window {
    storyloom?: StoryloomGlobal
    /** The seed's name for the same object (plugins written for ComfyTavern find it there). */
    ComfyTavern?: StoryloomGlobal
  }
}

/** Put the API on `window.storyloom.extensionApi` (before any plugin script runs). */
export function initializeExtensionApi(target: Window = window): ExtensionApi {
  setStoryloomGlobal({ ...(target.storyloom ?? {}), extensionApi }, target)
  return extensionApi
}

/** Take back everything `plugin` registered (it was disabled). */
export function forgetPlugin(plugin: string): void {
  for (const [outlet, entries] of [...outletRegistry]) {
    const left = entries.filter((e) => e.plugin !== plugin)
    if (left.length === entries.length) continue
    if (left.length) outletRegistry.set(outlet, left)
    else outletRegistry.delete(outlet)
  }
  for (const [hook, entries] of hookRegistry) hookRegistry.set(hook, entries.filter((e) => e.plugin !== plugin))
  for (const [id, list] of [...wrappers]) {
    const left = list.filter((w) => w.plugin !== plugin)
    if (left.length) wrappers.set(id, left)
    else wrappers.delete(id)
  }
  for (const [id, o] of [...overrides]) if (o.plugin === plugin) overrides.delete(id)
  for (const [type, e] of [...nodeUis]) if (e.plugin === plugin) nodeUis.delete(type)
  for (const [key, page] of [...pages]) if (page.plugin === plugin) pages.delete(key)
  for (const [id, item] of [...menuItems]) if (item.plugin === plugin) menuItems.delete(id)
  for (const set of configListeners.values()) for (const l of [...set]) if (l.plugin === plugin) set.delete(l)
  refusals.delete(plugin)
}

/** Forget every registration and value (tests). */
export function resetExtensionApi(): void {
  outletRegistry.clear()
  nodeUis.clear()
  pages.clear()
  menuItems.clear()
  hookRegistry.clear()
  wrappers.clear()
  overrides.clear()
  extensions.clear()
  configValues.clear()
  configListeners.clear()
  refusals.clear()
  authenticated = false
}
