// Tool registry and plugin rows as the server lists them, for the Tools tests.
import type { PluginInfo } from '../src/api/plugins'
import type { ToolInfo } from '../src/api/tools'

export function tool(id: string, over: Partial<ToolInfo> = {}): ToolInfo {
  return {
    id,
    displayName: '',
    description: '',
    parameters: { type: 'object', properties: {} },
    implementation: 'service',
    source: 'builtin',
    plugin: null,
    available: true,
    unavailableReason: null,
    configSchema: [],
    ...over,
  }
}

export function plugin(over: Partial<PluginInfo> = {}): PluginInfo {
  return {
    name: 'dice-plus',
    displayName: 'Dice Plus',
    version: '1.0.0',
    description: '',
    folder: '/p/plugins/dice-plus',
    origin: 'project',
    enabled: false,
    risk: 'medium',
    riskReasons: ['runs Python in the server'],
    declares: { nodes: [], tools: [], workflows: [], hooks: [], ui: { wrap: [], inject: [], override: [] } },
    granted: [],
    ...over,
  }
}
