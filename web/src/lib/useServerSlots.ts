// Slots the server works out: SubWorkflow and Recursive nodes take the slots of the workflow
// they call (the node types' own slots()). They are asked on open, after a change to such a
// node's config (debounced) and with every save or validation. Edges on slots that go away
// stay, as they do on any slot change, and validation reports them.
import { computed, onBeforeUnmount, shallowRef, watch } from 'vue'
import { type NodeTypeInfo, validateWorkflow, type Workflow } from '../api/workflows'
import { type FlowNode, type ResolvedSlots, type ServerSlots, serverSlotsOf, serverSlotsRequestKey } from './workflowGraph'

export const SLOTS_DEBOUNCE_MS = 300

export interface ServerSlotsOptions {
  nodes: () => readonly FlowNode[]
  typeInfo: (type: string) => NodeTypeInfo | undefined
  /** The id of the workflow the page shows. */
  workflowId: () => string | null
  /** The workflow as edited now. */
  current: () => Workflow | null
}

export function useServerSlots(options: ServerSlotsOptions) {
  const serverSlots = shallowRef<Record<string, ServerSlots>>({})
  const key = computed(() => serverSlotsRequestKey(options.nodes() as FlowNode[], options.typeInfo))
  let asked = 0
  let applied = 0
  let keyAsked = ''
  let timer: ReturnType<typeof setTimeout> | undefined

  /** Another workflow opened: answers still on the way are for the one left. */
  function forget(): void {
    clearTimeout(timer)
    applied = ++asked
    keyAsked = ''
    serverSlots.value = {}
  }

  /** A number for a request about to be sent; its answer is kept unless a later one came. */
  function request(): number {
    keyAsked = key.value
    return ++asked
  }

  function apply(requestNumber: number, sent: Workflow, slots: Record<string, ResolvedSlots>): void {
    if (requestNumber <= applied || sent.id !== options.workflowId()) return
    applied = requestNumber
    serverSlots.value = serverSlotsOf(sent, slots, options.typeInfo)
  }

  async function ask(workflow: Workflow | null = options.current()): Promise<void> {
    clearTimeout(timer)
    if (!workflow) return
    const requestNumber = request()
    if (key.value === '[]') {
      apply(requestNumber, workflow, {})
      return
    }
    try {
      const report = await validateWorkflow(workflow)
      apply(requestNumber, workflow, report.slots)
    } catch {
      // The node keeps its static slots; Validate shows what went wrong.
    }
  }

  watch(key, (k) => {
    clearTimeout(timer)
    if (!options.workflowId() || k === keyAsked) return
    timer = setTimeout(() => void ask(), SLOTS_DEBOUNCE_MS)
  })
  onBeforeUnmount(() => clearTimeout(timer))

  return { serverSlots, forget, request, apply, ask }
}
