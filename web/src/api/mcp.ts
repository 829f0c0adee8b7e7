// Typed calls for /api/mcp/servers: external MCP servers storyloom connects to, their
// status and tools (`mcp.<server>.<tool>`). Env values are write-only: only their names
// (`envKeys`) come back.
import { type Fetch, requestJson } from './client'

export type McpTransport = 'stdio' | 'http'
export type McpStatus = 'connected' | 'connecting' | 'failed' | 'disabled'

/** A server's settings, as listed and as sent. */
interface McpServerSettings {
  name: string
  scope: 'project' | 'user'
  transport: McpTransport
  command: string | null
  args: string[]
  url: string | null
  timeoutS: number
  enabled: boolean
}

export interface McpServerInfo extends McpServerSettings {
  envKeys: string[]
  status: McpStatus
  error: string | null
  tools: string[]
}

/** The body of PUT: the server's settings plus env values; a key left out keeps its stored value. */
export interface McpServerUpdate extends McpServerSettings {
  env: Record<string, string | null>
}

export function listMcpServers(fetchImpl?: Fetch): Promise<McpServerInfo[]> {
  return requestJson<McpServerInfo[]>('GET', '/api/mcp/servers', undefined, fetchImpl)
}

export function putMcpServer(update: McpServerUpdate, fetchImpl?: Fetch): Promise<McpServerInfo> {
  return requestJson<McpServerInfo>('PUT', `/api/mcp/servers/${encodeURIComponent(update.name)}`, update, fetchImpl)
}

export async function deleteMcpServer(name: string, fetchImpl?: Fetch): Promise<void> {
  await requestJson<null>('DELETE', `/api/mcp/servers/${encodeURIComponent(name)}`, undefined, fetchImpl)
}

export function reconnectMcpServer(name: string, fetchImpl?: Fetch): Promise<McpServerInfo> {
  return requestJson<McpServerInfo>('POST', `/api/mcp/servers/${encodeURIComponent(name)}/reconnect`, undefined, fetchImpl)
}
