// What the canvas's node components read from the page that owns the graph: node type
// info, each node's slots, its run state, its validation problems and whether it is frozen.
import type { InjectionKey } from 'vue'
import type { WorkflowProblem } from '../api/workflows'
import type { ShownNodeType } from './builtinCatalogue'
import type { ResolvedSlots } from './workflowGraph'
import type { NodeRunView } from './workflowRun'

export interface WorkflowEditorContext {
  typeInfo(type: string): ShownNodeType | undefined
  slots(nodeId: string): ResolvedSlots
  run(nodeId: string): NodeRunView | undefined
  problems(nodeId: string): WorkflowProblem[]
  frozen(nodeId: string): boolean
}

export const WORKFLOW_EDITOR: InjectionKey<WorkflowEditorContext> = Symbol('storyloom-workflow-editor')

/** The MIME type a palette item carries while dragged onto the canvas. */
export const NODE_TYPE_DRAG = 'application/x-storyloom-node-type'

/** Values typed in the run form, as the run's `inputs` (by the slot's dataFlowType). */
export function parseRunInput(raw: string | boolean, type: string): { value?: unknown; error?: 'number' | 'json' } {
  if (typeof raw === 'boolean') return { value: raw }
  if (type === 'STRING' || type === 'ANY') return { value: raw }
  const text = raw.trim()
  if (text === '') return {}
  if (type === 'INTEGER' || type === 'FLOAT') {
    const n = Number(text)
    if (!Number.isFinite(n) || (type === 'INTEGER' && !Number.isInteger(n))) return { error: 'number' }
    return { value: n }
  }
  try {
    return { value: JSON.parse(text) }
  } catch {
    return { error: 'json' }
  }
}
