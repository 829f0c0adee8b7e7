// The MCP server form's logic, kept free of Vue so it can be unit-tested: a form from a
// server's settings, its checks, and the PUT body. Env values are write-only: a stored one
// is shown by name only, a typed value replaces it, "remove" sends null, and a key left
// alone is not sent (the server keeps it).
import type { McpServerInfo, McpServerUpdate, McpTransport } from '../api/mcp'

export interface EnvRow {
  key: string
  value: string
  /** The key has a stored value (its value is never shown). */
  stored: boolean
  remove: boolean
}

export interface McpForm {
  name: string
  scope: 'project' | 'user'
  transport: McpTransport
  command: string
  /** One argument per line (arguments may hold spaces). */
  args: string
  url: string
  env: EnvRow[]
  timeoutS: number | string
  enabled: boolean
}

/** Server names become part of tool ids (`mcp.<server>.<tool>`): keep them plain. */
export const MCP_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/

export function emptyMcpForm(): McpForm {
  return { name: '', scope: 'project', transport: 'stdio', command: '', args: '', url: '', env: [], timeoutS: 30, enabled: true }
}

export function mcpFormFrom(server: McpServerInfo): McpForm {
  return {
    name: server.name,
    scope: server.scope,
    transport: server.transport,
    command: server.command ?? '',
    args: server.args.join('\n'),
    url: server.url ?? '',
    env: server.envKeys.map((key) => ({ key, value: '', stored: true, remove: false })),
    timeoutS: server.timeoutS,
    enabled: server.enabled,
  }
}

export type McpFormError = 'required' | 'namePattern' | 'nameTaken' | 'url' | 'positive' | 'envKey' | 'envDuplicate'

/** Errors by field (`name`, `command`, `url`, `timeoutS`, `env[2]`). */
export function mcpFormErrors(form: McpForm, takenNames: readonly string[] = []): Record<string, McpFormError> {
  const out: Record<string, McpFormError> = {}
  if (!form.name) out.name = 'required'
  else if (!MCP_NAME_PATTERN.test(form.name)) out.name = 'namePattern'
  else if (takenNames.includes(form.name)) out.name = 'nameTaken'
  if (form.transport === 'stdio' && !form.command.trim()) out.command = 'required'
  if (form.transport === 'http') {
    if (!form.url.trim()) out.url = 'required'
    else if (!/^https?:\/\/\S+$/.test(form.url.trim())) out.url = 'url'
  }
  const timeout = typeof form.timeoutS === 'number' ? form.timeoutS : Number(form.timeoutS)
  if (form.timeoutS === '' || !Number.isFinite(timeout) || timeout <= 0) out.timeoutS = 'positive'
  const seen = new Set<string>()
  form.env.forEach((row, i) => {
    const key = row.key.trim()
    if (!key && (row.value || row.stored)) out[`env[${i}]`] = 'envKey'
    else if (key && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out[`env[${i}]`] = 'envKey'
    else if (key && seen.has(key)) out[`env[${i}]`] = 'envDuplicate'
    if (key) seen.add(key)
  })
  return out
}

export function mcpUpdate(form: McpForm): McpServerUpdate {
  const env: Record<string, string | null> = {}
  for (const row of form.env) {
    const key = row.key.trim()
    if (!key) continue
    if (row.remove) {
      if (row.stored) env[key] = null
    } else if (row.value !== '') env[key] = row.value
  }
  const stdio = form.transport === 'stdio'
  return {
    name: form.name,
    scope: form.scope,
    transport: form.transport,
    command: stdio ? form.command.trim() : null,
    args: stdio ? form.args.split('\n').map((a) => a.trim()).filter(Boolean) : [],
    url: stdio ? null : form.url.trim(),
    env,
    timeoutS: Number(form.timeoutS),
    enabled: form.enabled,
  }
}
