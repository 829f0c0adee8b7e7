// The extension API plugins' frontends call (seed 003 §15.2.2, §20, §21), installed as
// `window.storyloom.extensionApi` before any plugin script loads.
//
// Three layers, as the seed orders them by risk: outlets (add UI at named places, always
// allowed), hooks (react to or intercept a flow: the four client hooks below), and
// wrap/override of core components, refused unless the user granted that permission when
// enabling the plugin (ExtensionInfo.overrides). Everything a plugin registers is recorded
// under its name, so disabling it removes its UI and hooks without a page reload.
//
// Which plugin is calling: `extensionApi.forPlugin(name)` says so explicitly; otherwise the
// caller is found from the call stack (a plugin's script is served under /plugins/<name>/).
// A wrap/override whose caller cannot be told is refused.
import { type Component, markRaw, shallowReactive } from 'vue'

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
  'hook:client:workflow:before-execute',
  'hook:client:settings:before-save',
  'hook:client:node:render-after',
  'hook:client:chat:message-rendered',
] as const
export type ClientHook = (typeof CLIENT_HOOKS)[number]

/** What each hook's handler receives. */
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
  /** wrap/override permissions the user granted (`ui:BaseNode` …). */
  overrides?: string[]
  /** The same, under the settings' name for it. */
  granted?: string[]
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
const hookRegistry = new Map<ClientHook, HookEntry[]>()
const wrappers = shallowReactive(new Map<string, readonly { plugin: string; wrap: (original: Component) => Component }[]>())
const overrides = shallowReactive(new Map<string, { plugin: string; component: Component }>())
const extensions = new Map<string, ExtensionInfo>()
const configValues = new Map<string, unknown>()
const configListeners = new Map<string, Set<{ plugin: string | null; fn: ConfigListener }>>()

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

/** What is registered at `outlet` (reactive: a PluginOutlet re-renders when it changes). */
export function outletComponents(outlet: string): readonly OutletEntry[] {
  return outletRegistry.get(outlet) ?? []
}

export { isVanilla }

// -- wrap / override -----------------------------------------------------------------------

function granted(plugin: string | null, componentId: string): boolean {
  if (!plugin) return false
  const info = extensions.get(plugin)
  if (!info) return false
  const list = [...(info.overrides ?? []), ...(info.granted ?? [])]
  return list.includes(componentId)
}

function refuse(plugin: string | null, what: string, componentId: string): false {
  console.warn(
    `[storyloom extensions] ${plugin ?? 'an unknown caller'}: ${what}("${componentId}") refused: ` +
      'the user has not granted this plugin that permission (Tools → Plugins).',
  )
  return false
}

function wrapComponent(plugin: string | null, componentId: string, wrap: (original: Component) => Component): boolean {
  if (typeof wrap !== 'function' || !granted(plugin, componentId)) return refuse(plugin, 'wrapComponent', componentId)
  wrappers.set(componentId, [...(wrappers.get(componentId) ?? []), { plugin: plugin!, wrap }])
  return true
}

function overrideComponent(plugin: string | null, componentId: string, component: Component): boolean {
  if (!validComponent(component) || !granted(plugin, componentId)) return refuse(plugin, 'overrideComponent', componentId)
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
      current = markRaw(w.wrap(current) as object) as Component
    } catch (exc) {
      console.error(`[storyloom extensions] ${w.plugin}: wrapper of ${componentId} failed`, exc)
    }
  }
  return current
}

// -- hooks ---------------------------------------------------------------------------------

function onHook(plugin: string | null, name: string, fn: HookHandler): () => void {
  if (!(CLIENT_HOOKS as readonly string[]).includes(name) || typeof fn !== 'function') {
    console.warn(`[storyloom extensions] ${plugin ?? 'a plugin'}: no client hook "${name}" (known: ${CLIENT_HOOKS.join(', ')})`)
    return () => {}
  }
  const hook = name as ClientHook
  const entry: HookEntry = { id: nextId++, plugin, fn }
  hookRegistry.set(hook, [...(hookRegistry.get(hook) ?? []), entry])
  return () => hookRegistry.set(hook, (hookRegistry.get(hook) ?? []).filter((e) => e.id !== entry.id))
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
    wrapComponent(componentId: string, wrapper: (original: Component) => Component): boolean
    overrideComponent(componentId: string, component: Component): boolean
  }
  hooks: { on(name: string, fn: (payload: never) => unknown): () => void }
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
    },
    hooks: { on: (name, fn) => onHook(who(), name, fn) },
    getConfig: (key) => getConfig(who(), key),
    onConfigChange: (key, fn) => onConfigChange(who(), key, fn),
    forPlugin: (name) => makeApi(name),
  }
}

export const extensionApi: ExtensionApi = makeApi(null)

declare global {
  interface Window {
    storyloom?: { extensionApi?: ExtensionApi; reloadExtensions?: () => Promise<void>; [key: string]: unknown }
  }
}

/** Put the API on `window.storyloom.extensionApi` (before any plugin script runs). */
export function initializeExtensionApi(target: Window = window): ExtensionApi {
  target.storyloom = { ...(target.storyloom ?? {}), extensionApi }
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
  for (const set of configListeners.values()) for (const l of [...set]) if (l.plugin === plugin) set.delete(l)
}

/** Forget every registration and value (tests). */
export function resetExtensionApi(): void {
  outletRegistry.clear()
  hookRegistry.clear()
  wrappers.clear()
  overrides.clear()
  extensions.clear()
  configValues.clear()
  configListeners.clear()
}
