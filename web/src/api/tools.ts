// Typed calls for /api/tools: the registry, calling a tool as the user, the audit log,
// the global policy and pending approvals (storyloom/server, camelCase JSON).
import type { JsonSchema } from '../lib/jsonSchema'
import { type Fetch, requestJson } from './client'
import type { ConfigOption } from './config'

export type Implementation = 'workflow' | 'node' | 'service' | 'script' | 'mcp'
export type PolicyAction = 'allow' | 'ask' | 'deny'
export const POLICY_ACTIONS: readonly PolicyAction[] = ['allow', 'ask', 'deny']

export interface ToolInfo {
  id: string
  displayName: string
  description: string
  /** JSON Schema of the arguments (an object schema). */
  parameters: JsonSchema
  implementation: Implementation
  /** "builtin", "plugin:<name>", "workflow", "node" or "mcp:<server>". */
  source: string
  plugin: string | null
  available: boolean
  unavailableReason: string | null
  configSchema: ConfigOption[]
}

/** What became of one call (storyloom/workflow/agent_host.py CallDecision): `invalid` is
 * arguments that failed the schema, `unknown` a tool id that names no tool. */
export type CallDecision = 'allowed' | 'approved' | 'denied' | 'invalid' | 'unknown' | 'skipped'

export interface ToolCallResult {
  tool: string
  arguments: Record<string, unknown>
  decision: CallDecision
  ok: boolean
  result: unknown
  error: string | null
  durationMs: number
  auditId: number | null
}

export interface AuditCaller {
  kind: string
  name: string
}

export interface AuditEntry {
  id: number
  at: string
  /** Who called: kind (agent, user, cli, mcp, api) and name. */
  caller: AuditCaller
  tool: string
  arguments: unknown
  decision: CallDecision
  ok: boolean
  result: unknown
  error: string | null
  durationMs: number
  runId: string | null
  conversationId: string | null
}

export interface AuditPage {
  entries: AuditEntry[]
  total: number
}

export interface PolicyRule {
  tool: string
  action: PolicyAction
}

export interface ToolPolicy {
  rules: PolicyRule[]
  default: PolicyAction
}

export interface PendingApproval {
  id: string
  tool: string
  arguments: Record<string, unknown>
  caller: unknown
  conversationId: string | null
  runId: string | null
  createdAt: string
}

export type ApprovalAnswer = 'allow_once' | 'always' | 'deny'

export function listTools(fetchImpl?: Fetch): Promise<ToolInfo[]> {
  return requestJson<ToolInfo[]>('GET', '/api/tools', undefined, fetchImpl)
}

/** Call a tool as the user: `ask` counts as allowed, `deny` comes back as decision "denied". */
export function callTool(tool: string, args: Record<string, unknown>, fetchImpl?: Fetch): Promise<ToolCallResult> {
  return requestJson<ToolCallResult>('POST', '/api/tools/call', { tool, arguments: args }, fetchImpl)
}

export function listAudit(
  query: { limit: number; offset: number; tool?: string },
  fetchImpl?: Fetch,
): Promise<AuditPage> {
  const params = new URLSearchParams({ limit: String(query.limit), offset: String(query.offset) })
  if (query.tool) params.set('tool', query.tool)
  return requestJson<AuditPage>('GET', `/api/tools/audit?${params.toString()}`, undefined, fetchImpl)
}

export function getPolicy(fetchImpl?: Fetch): Promise<ToolPolicy> {
  return requestJson<ToolPolicy>('GET', '/api/tools/policy', undefined, fetchImpl)
}

export function putPolicy(policy: ToolPolicy, fetchImpl?: Fetch): Promise<ToolPolicy> {
  return requestJson<ToolPolicy>('PUT', '/api/tools/policy', policy, fetchImpl)
}

export function listApprovals(fetchImpl?: Fetch): Promise<PendingApproval[]> {
  return requestJson<PendingApproval[]>('GET', '/api/tools/approvals', undefined, fetchImpl)
}

export async function answerApproval(id: string, decision: ApprovalAnswer, fetchImpl?: Fetch): Promise<void> {
  await requestJson<null>('POST', `/api/tools/approvals/${encodeURIComponent(id)}`, { decision }, fetchImpl)
}
