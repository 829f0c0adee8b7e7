// Typed calls for /api/workflows and /api/workflow-runs, and the shapes they carry
// (the camelCase aliases of storyloom/workflow/*.py models).
import type { JsonSchema } from '../lib/jsonSchema'
import { ApiError, errorFromBody, type Fetch, fetchJson, postForm, requestJson } from './client'

export interface Position {
  x: number
  y: number
}

export interface WorkflowNode {
  id: string
  type: string
  label?: string | null
  config: Record<string, unknown>
  position: Position
  [extra: string]: unknown
}

export interface WorkflowEdge {
  id?: string | null
  source: string
  sourceSlot: string
  target: string
  targetSlot: string
  [extra: string]: unknown
}

export interface Suggestion {
  value: unknown
  label?: string | null
}

export interface InterfaceSlot {
  description?: string
  dataFlowType?: string
  required?: boolean
  matchCategories?: string[]
  config?: { default?: unknown; suggestions?: Suggestion[]; [extra: string]: unknown }
  [extra: string]: unknown
}

export interface Workflow {
  id: string
  name?: string
  description?: string
  formatVersion?: number
  nodes: WorkflowNode[]
  edges: WorkflowEdge[]
  interfaceInputs?: Record<string, InterfaceSlot>
  interfaceOutputs?: Record<string, InterfaceSlot>
  [extra: string]: unknown
}

export interface WorkflowSummary {
  id: string
  name: string
  description: string
  nodeCount: number
  /** Shipped with storyloom (e.g. `chat-default`), no file in the project yet: saving it
   * writes the project's own copy; deleting it is refused (400). */
  builtin: boolean
}

export interface BrokenWorkflowFile {
  file: string
  problems: { field: string; reason: string }[]
}

export interface WorkflowList {
  workflows: WorkflowSummary[]
  broken: BrokenWorkflowFile[]
}

export interface SlotInfo {
  name: string
  type: string
  description?: string
  required?: boolean
  lazy?: boolean
  default?: unknown
}

export interface NodeTypeInfo {
  type: string
  displayName: string
  category: string
  description: string
  version: number
  idempotent: boolean
  streaming: boolean
  dynamicSlots: boolean
  inputs: SlotInfo[]
  outputs: SlotInfo[]
  /** The node's config as a JSON Schema object (`$ref`s inlined), with `x-widget`,
   * `x-suggestions` and `x-match-categories` as editor hints; rendered by SchemaField. */
  configSchema: JsonSchema
}

export interface WorkflowProblem {
  nodeId?: string | null
  slot?: string | null
  field?: string | null
  code: string
  message: string
}

/** A node's slots as the server works them out (a sub-workflow's interface). */
export interface NodeSlotList {
  inputs: SlotInfo[]
  outputs: SlotInfo[]
}

export interface ValidationReport {
  problems: WorkflowProblem[]
  /** By node id, the slots of each dynamic-slot node whose slots could be worked out. */
  slots: Record<string, NodeSlotList>
}

export interface SaveResult extends ValidationReport {
  workflow: Workflow
}

export interface HistoryEntry {
  id: number
  workflowId: string
  nodeId: string
  runId: string
  createdAt: string
  outputs: Record<string, unknown>
  preview: string
  frozen: boolean
}

export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled'

export interface RunSummary {
  runId: string
  workflowId: string
  status: RunStatus
  startedAt: string
  waitingFor: string[]
}

/** One run event as the server sends it; see lib/workflowRun.ts for the fields read. */
export interface RunEventMessage {
  type: string
  runId: string
  seq: number
  [field: string]: unknown
}

export interface RunEvents {
  runId: string
  workflowId: string
  status: RunStatus
  events: RunEventMessage[]
}

export type DecisionKind = 'approve' | 'retry' | 'edit'

export interface Decision {
  nodeId: string
  decision: DecisionKind
  editedOutput?: string
  choice?: number
}

/** A refused run: the graph has problems, each naming its node and slot. */
export class WorkflowInvalidError extends ApiError {
  readonly workflowProblems: WorkflowProblem[]

  constructor(status: number, message: string, problems: WorkflowProblem[]) {
    super(status, message)
    this.name = 'WorkflowInvalidError'
    this.workflowProblems = problems
  }
}

const BASE = '/api/workflows'
const RUNS = '/api/workflow-runs'
const enc = encodeURIComponent

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** WorkflowProblem items found in a body: top level `problems` or inside `error`. */
export function workflowProblemsFrom(body: unknown): WorkflowProblem[] {
  const lists: unknown[] = []
  if (isRecord(body)) {
    lists.push(body.problems)
    if (isRecord(body.error)) lists.push(body.error.problems)
  }
  for (const list of lists) {
    if (!Array.isArray(list)) continue
    const out = list.filter((p): p is WorkflowProblem => isRecord(p) && typeof p.code === 'string' && typeof p.message === 'string')
    if (out.length) return out
  }
  return []
}


const defaultFetch: Fetch = (...args) => globalThis.fetch(...args)

export function listWorkflows(fetchImpl?: Fetch): Promise<WorkflowList> {
  return requestJson<WorkflowList>('GET', BASE, undefined, fetchImpl)
}

export function listNodeTypes(fetchImpl?: Fetch): Promise<NodeTypeInfo[]> {
  return requestJson<NodeTypeInfo[]>('GET', `${BASE}/node-types`, undefined, fetchImpl)
}

/** A workflow as received: lists the file may leave out are filled in. */
export function completeWorkflow(workflow: Partial<Workflow> & { id: string }): Workflow {
  return { ...workflow, nodes: workflow.nodes ?? [], edges: workflow.edges ?? [] }
}

export async function getWorkflow(id: string, fetchImpl?: Fetch): Promise<Workflow> {
  return completeWorkflow(await requestJson<Workflow>('GET', `${BASE}/${enc(id)}`, undefined, fetchImpl))
}

export async function saveWorkflow(workflow: Workflow, fetchImpl?: Fetch): Promise<SaveResult> {
  const result = await requestJson<SaveResult>('PUT', `${BASE}/${enc(workflow.id)}`, workflow, fetchImpl)
  return { ...result, workflow: completeWorkflow(result.workflow) }
}

export async function deleteWorkflow(id: string, fetchImpl: Fetch = defaultFetch): Promise<void> {
  const { res, data } = await fetchJson('DELETE', `${BASE}/${enc(id)}`, undefined, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
}

export interface PresetImportOptions {
  /** Workflow id (default: `st-<file name>`). */
  id?: string
  /** Workflow name (default: the file name without `.json`). */
  name?: string
  /** Replace a workflow of that id; without it an existing id is a 409. */
  overwrite?: boolean
}

/** A SillyTavern chat-completion preset (.json) → a chat pipeline workflow saved in the
 * project (201, the workflow); a bad file is a 422 naming the file and each field. */
export async function importStPreset(
  file: File,
  options: PresetImportOptions = {},
  fetchImpl: Fetch = defaultFetch,
): Promise<Workflow> {
  const workflow = await postForm<Workflow>(
    `${BASE}/import-st-preset`,
    { file, id: options.id || undefined, name: options.name || undefined, overwrite: options.overwrite ? 'true' : undefined },
    fetchImpl,
  )
  return completeWorkflow(workflow)
}

/** The graph's problems and the slots of its dynamic-slot nodes, without saving. */
export function validateWorkflow(workflow: Workflow, fetchImpl?: Fetch): Promise<ValidationReport> {
  return requestJson<ValidationReport>('POST', `${BASE}/validate`, workflow, fetchImpl)
}

/** Start a run of `workflow` as it is on the canvas (saved or not). */
export async function startRun(
  workflow: Workflow,
  inputs: Record<string, unknown> = {},
  fetchImpl: Fetch = defaultFetch,
): Promise<{ runId: string; workflowId: string }> {
  const { res, data } = await fetchJson('POST', `${BASE}/${enc(workflow.id)}/runs`, { inputs, workflow }, fetchImpl)
  if (res.ok) return data as { runId: string; workflowId: string }
  const problems = workflowProblemsFrom(data)
  const base = errorFromBody(res.status, res.statusText, data)
  if (problems.length) throw new WorkflowInvalidError(res.status, base.message, problems)
  throw base
}

export function listRuns(fetchImpl?: Fetch): Promise<RunSummary[]> {
  return requestJson<RunSummary[]>('GET', RUNS, undefined, fetchImpl)
}

export function runEvents(runId: string, after = 0, fetchImpl?: Fetch): Promise<RunEvents> {
  return requestJson<RunEvents>('GET', `${RUNS}/${enc(runId)}?after=${after}`, undefined, fetchImpl)
}

export function cancelRun(runId: string, fetchImpl?: Fetch): Promise<{ runId: string }> {
  return requestJson<{ runId: string }>('POST', `${RUNS}/${enc(runId)}/cancel`, undefined, fetchImpl)
}

export function sendDecision(runId: string, decision: Decision, fetchImpl?: Fetch): Promise<{ accepted: boolean }> {
  return requestJson<{ accepted: boolean }>('POST', `${RUNS}/${enc(runId)}/decisions`, decision, fetchImpl)
}

export function nodeHistory(workflowId: string, nodeId: string, limit = 50, fetchImpl?: Fetch): Promise<HistoryEntry[]> {
  return requestJson<HistoryEntry[]>(
    'GET',
    `${BASE}/${enc(workflowId)}/nodes/${enc(nodeId)}/history?limit=${limit}`,
    undefined,
    fetchImpl,
  )
}

export function frozenOutputs(workflowId: string, fetchImpl?: Fetch): Promise<Record<string, HistoryEntry>> {
  return requestJson<Record<string, HistoryEntry>>('GET', `${BASE}/${enc(workflowId)}/frozen`, undefined, fetchImpl)
}

export function freezeNode(workflowId: string, nodeId: string, historyId: number, fetchImpl?: Fetch): Promise<HistoryEntry> {
  return requestJson<HistoryEntry>(
    'PUT',
    `${BASE}/${enc(workflowId)}/nodes/${enc(nodeId)}/freeze`,
    { historyId },
    fetchImpl,
  )
}

export async function unfreezeNode(workflowId: string, nodeId: string, fetchImpl: Fetch = defaultFetch): Promise<void> {
  const { res, data } = await fetchJson('DELETE', `${BASE}/${enc(workflowId)}/nodes/${enc(nodeId)}/freeze`, undefined, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
}
