// Typed calls for /api/plugins: the installed plugins (enabled or not) with what they
// declare and their risk, broken plugins' problems, enabling and disabling, and the
// enabled plugins' frontends (ExtensionInfo, seed §15.1.1).
import { type Fetch, requestJson } from './client'
import type { ConfigOption } from './config'

export type Risk = 'low' | 'medium' | 'high'

export interface PluginDeclares {
  nodes: string[]
  tools: string[]
  workflows: string[]
  hooks: string[]
  ui: { wrap: string[]; inject: string[]; override: string[] }
  /** Its script tools ask to connect to other machines (`permissions.network`). */
  network?: boolean
}

export interface PluginInfo {
  name: string
  displayName: string
  version: string
  description: string
  folder: string
  origin: 'project' | 'user'
  enabled: boolean
  risk: Risk
  riskReasons: string[]
  declares: PluginDeclares
  /** Permissions (override strings) the user granted. */
  granted: string[]
  /** It declares network access and the user granted it when enabling. */
  networkGranted?: boolean
}

export interface PluginProblem {
  folder: string
  file: string
  field: string
  reason: string
}

export interface InstalledPlugins {
  plugins: PluginInfo[]
  problems: PluginProblem[]
}

export interface ExtensionInfo {
  name: string
  displayName: string
  version: string
  description: string
  frontend: { entryUrl: string; styleUrls: string[] } | null
  configOptions: ConfigOption[]
}

export function listInstalledPlugins(fetchImpl?: Fetch): Promise<InstalledPlugins> {
  return requestJson<InstalledPlugins>('GET', '/api/plugins/installed', undefined, fetchImpl)
}

export function listExtensions(fetchImpl?: Fetch): Promise<ExtensionInfo[]> {
  return requestJson<ExtensionInfo[]>('GET', '/api/plugins', undefined, fetchImpl)
}

export interface EnableOptions {
  /** Let its script tools use the network (only for a plugin that declares it); left out,
   * nothing is sent and the server withdraws any earlier grant. */
  grantNetwork?: boolean
  /** The risk the user accepted by name: a high-risk plugin is enabled only with 'high'. */
  acceptRisk?: 'low' | 'medium' | 'high'
}

/** Enable a plugin; its UI and service overrides apply only with `grantOverrides`, and its
 * script tools get the network only with `grantNetwork`. */
export function enablePlugin(name: string, grantOverrides: boolean, options: EnableOptions = {}, fetchImpl?: Fetch): Promise<PluginInfo> {
  const body = {
    grantOverrides,
    ...(options.grantNetwork === undefined ? {} : { grantNetwork: options.grantNetwork }),
    ...(options.acceptRisk === undefined ? {} : { acceptRisk: options.acceptRisk }),
  }
  return requestJson<PluginInfo>('POST', `/api/plugins/${encodeURIComponent(name)}/enable`, body, fetchImpl)
}

export function disablePlugin(name: string, fetchImpl?: Fetch): Promise<PluginInfo> {
  return requestJson<PluginInfo>('POST', `/api/plugins/${encodeURIComponent(name)}/disable`, undefined, fetchImpl)
}
