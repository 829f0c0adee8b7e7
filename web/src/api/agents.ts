// Typed calls for /api/agents: agent profiles (<project>/agents/<id>.json). Field names are
// the file's (snake_case, as the seed's `tool_ids_inventory`).
import { type Fetch, requestJson } from './client'
import type { PolicyAction, ToolPolicy } from './tools'

export type AgentProtocol = 'tam' | 'native' | 'auto'
export const AGENT_PROTOCOLS: readonly AgentProtocol[] = ['auto', 'tam', 'native']
export type ModelRole = 'user' | 'agent'
export const MODEL_ROLES: readonly ModelRole[] = ['agent', 'user']

export interface KbAccess {
  read: string[]
  write: string[]
}

export interface AgentProfile {
  id: string
  name: string
  description: string
  tool_ids_inventory: string[]
  /** The system prompt; may hold {{{system:available_tools}}}. */
  prompt: string
  /** A deliberation workflow's id, instead of the built-in loop's prompt. */
  workflow: string | null
  model_role: ModelRole
  /** A named connection (Settings → Connections) that answers instead of model_role's. */
  connection?: string | null
  protocol: AgentProtocol
  max_steps: number
  policy: ToolPolicy
  kb_access: KbAccess
  stealth_tools: string[]
  call_timeout_s: number
}

/** A new profile as the server's defaults make it: its policy adds nothing to the global
 * one (default allow); the inventory already limits what the agent may call. */
export function newAgentProfile(id = '', defaultAction: PolicyAction = 'allow'): AgentProfile {
  return {
    id,
    name: '',
    description: '',
    tool_ids_inventory: [],
    prompt: '',
    workflow: null,
    model_role: 'agent',
    connection: null,
    protocol: 'auto',
    max_steps: 8,
    policy: { rules: [], default: defaultAction },
    kb_access: { read: ['*'], write: [] },
    stealth_tools: [],
    call_timeout_s: 30,
  }
}

export function listAgents(fetchImpl?: Fetch): Promise<AgentProfile[]> {
  return requestJson<AgentProfile[]>('GET', '/api/agents', undefined, fetchImpl)
}

export function getAgent(id: string, fetchImpl?: Fetch): Promise<AgentProfile> {
  return requestJson<AgentProfile>('GET', `/api/agents/${encodeURIComponent(id)}`, undefined, fetchImpl)
}

export function createAgent(profile: AgentProfile, fetchImpl?: Fetch): Promise<AgentProfile> {
  return requestJson<AgentProfile>('POST', '/api/agents', profile, fetchImpl)
}

export function saveAgent(profile: AgentProfile, fetchImpl?: Fetch): Promise<AgentProfile> {
  return requestJson<AgentProfile>('PUT', `/api/agents/${encodeURIComponent(profile.id)}`, profile, fetchImpl)
}

export async function deleteAgent(id: string, fetchImpl?: Fetch): Promise<void> {
  await requestJson<null>('DELETE', `/api/agents/${encodeURIComponent(id)}`, undefined, fetchImpl)
}
