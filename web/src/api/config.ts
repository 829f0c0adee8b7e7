// Typed calls for /api/config: the options plugins declare (`configOptions`, keys
// `extensions.<plugin>.<option>`) and tools' `configSchema`, with their current values.
// Secret values never come back: only `isSet` says whether one is stored.
import { type Fetch, requestJson } from './client'

export type ConfigOptionType = 'boolean' | 'number' | 'integer' | 'string' | 'textarea' | 'select' | 'secret'

export interface ConfigChoice {
  value: unknown
  label: string
}

/** An option as a plugin manifest or a *.tool.json declares it (seed §17). */
export interface ConfigOption {
  key: string
  type: ConfigOptionType
  label: string
  description?: string
  defaultValue?: unknown
  min?: number | null
  max?: number | null
  step?: number | null
  options?: ConfigChoice[]
  categoryKey?: string | null
  category?: string | null
  secret?: boolean
}

/** An option with its current value, as GET /api/config lists it. */
export interface ConfigOptionInfo extends ConfigOption {
  /** The stored value, else the default; always null for secrets. */
  value: unknown
  /** Secrets only: whether a value is stored. */
  isSet?: boolean
  /** The plugin that declared it (for tool options, the tool's plugin, if any). */
  plugin?: string | null
  /** Set for a tool's `configSchema` option: the tool's id. */
  tool?: string | null
}

export function getConfig(fetchImpl?: Fetch): Promise<ConfigOptionInfo[]> {
  return requestJson<ConfigOptionInfo[]>('GET', '/api/config', undefined, fetchImpl)
}

/** Save values by key; a null secret clears it. A bad value is a 422 naming the key. */
export function putConfig(values: Record<string, unknown>, fetchImpl?: Fetch): Promise<ConfigOptionInfo[]> {
  return requestJson<ConfigOptionInfo[]>('PUT', '/api/config', { values }, fetchImpl)
}
