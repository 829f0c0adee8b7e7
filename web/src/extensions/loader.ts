// Loads the frontends of the enabled plugins (seed 003 §15.2.1): GET /api/plugins, then a
// <link rel=stylesheet> per style and a <script type=module> per entry, each marked with
// its plugin. Unlike the seed's sample, one plugin that fails (a bad URL, a script error)
// is reported and the others still load; the app never waits for plugins.
//
// reloadExtensions() follows enable/disable without a page reload: a disabled plugin's
// tags and registrations go; a newly enabled one loads. A module script runs once per URL,
// so a plugin enabled again loads under a new `?v=` and runs again.
import { requestJson } from '../api/client'
import { emitAuthLogin, type ExtensionInfo, forgetPlugin, initializeExtensionApi, setConfigValues, setExtensions, setStoryloomGlobal } from './extensionApi'

export interface LoadedExtension {
  info: ExtensionInfo
  /** The script failed to load (network, 404, a syntax error). */
  failed: boolean
}

export interface LoaderOptions {
  fetchPlugins?: () => Promise<ExtensionInfo[]>
  fetchConfig?: () => Promise<Record<string, unknown>>
  doc?: Document
}

const loaded = new Map<string, LoadedExtension>()
let generation = 0

const ATTR = 'data-storyloom-plugin'

function listPlugins(): Promise<ExtensionInfo[]> {
  return requestJson<ExtensionInfo[]>('GET', '/api/plugins')
}

interface ConfigOptionInfo {
  key: string
  value?: unknown
  isSet?: boolean
}

/** The option values by key (GET /api/config; secret values are never sent). */
async function configValues(): Promise<Record<string, unknown>> {
  const list = await requestJson<ConfigOptionInfo[]>('GET', '/api/config')
  const out: Record<string, unknown> = {}
  for (const o of Array.isArray(list) ? list : []) if (o && typeof o.key === 'string') out[o.key] = o.value
  return out
}

function withVersion(url: string, v: number): string {
  if (v <= 1) return url
  return `${url}${url.includes('?') ? '&' : '?'}v=${v}`
}

function addTags(doc: Document, info: ExtensionInfo, v: number): LoadedExtension {
  const entry: LoadedExtension = { info, failed: false }
  const frontend = info.frontend
  if (!frontend) return entry
  for (const href of frontend.styleUrls ?? []) {
    const link = doc.createElement('link')
    link.rel = 'stylesheet'
    link.href = href
    link.setAttribute(ATTR, info.name)
    doc.head.appendChild(link)
  }
  if (frontend.entryUrl) {
    const script = doc.createElement('script')
    script.type = 'module'
    script.src = withVersion(frontend.entryUrl, v)
    script.setAttribute(ATTR, info.name)
    script.onerror = () => {
      entry.failed = true
      console.error(`[storyloom extensions] ${info.name}: its script ${frontend.entryUrl} did not load`)
    }
    doc.body.appendChild(script)
  }
  return entry
}

function removeTags(doc: Document, name: string): void {
  for (const el of [...doc.querySelectorAll(`[${ATTR}]`)]) if (el.getAttribute(ATTR) === name) el.remove()
}

/** How many times each plugin was loaded in this page (the `?v=` of its next load). */
const loads = new Map<string, number>()

/**
 * Load what GET /api/plugins lists that is not loaded yet, and unload what it no longer
 * lists. Failures to reach the server are logged: the app works without plugins.
 */
export async function reloadExtensions(options: LoaderOptions = {}): Promise<LoadedExtension[]> {
  const doc = options.doc ?? document
  const token = ++generation
  let list: ExtensionInfo[]
  try {
    list = await (options.fetchPlugins ?? listPlugins)()
  } catch (exc) {
    console.warn('[storyloom extensions] could not list the plugins:', exc)
    return [...loaded.values()]
  }
  if (token !== generation) return [...loaded.values()]
  list = Array.isArray(list) ? list.filter((i) => i && typeof i.name === 'string') : []
  setExtensions(list)
  // The list needs the server's access: the page is in (auth:login, once per page).
  emitAuthLogin()
  try {
    setConfigValues(await (options.fetchConfig ?? configValues)())
  } catch (exc) {
    console.warn('[storyloom extensions] could not read the plugins’ options:', exc)
  }
  const wanted = new Set(list.map((i) => i.name))
  for (const name of [...loaded.keys()]) {
    if (wanted.has(name)) continue
    removeTags(doc, name)
    forgetPlugin(name)
    loaded.delete(name)
  }
  for (const info of list) {
    const before = loaded.get(info.name)
    if (before && JSON.stringify(before.info.frontend ?? null) === JSON.stringify(info.frontend ?? null)) {
      before.info = info
      continue
    }
    if (before) {
      // Its frontend changed (a new version): load the new one in place of the old.
      removeTags(doc, info.name)
      forgetPlugin(info.name)
    }
    const v = (loads.get(info.name) ?? 0) + 1
    loads.set(info.name, v)
    loaded.set(info.name, addTags(doc, info, v))
  }
  return [...loaded.values()]
}

/** The first load, at start-up: the API goes on `window` before any plugin script runs. */
export function loadExtensions(options: LoaderOptions = {}): Promise<LoadedExtension[]> {
  const api = initializeExtensionApi()
  setStoryloomGlobal({ ...(window.storyloom ?? {}), extensionApi: api, reloadExtensions: async () => void (await reloadExtensions(options)) })
  return reloadExtensions(options)
}

export function loadedExtensions(): LoadedExtension[] {
  return [...loaded.values()]
}

/** Forget what was loaded (tests). */
export function resetLoader(doc: Document = document): void {
  for (const name of loaded.keys()) removeTags(doc, name)
  loaded.clear()
  loads.clear()
  generation = 0
}
