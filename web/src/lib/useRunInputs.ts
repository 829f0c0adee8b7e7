// The values a workflow run starts with: one per interface input, typed as its slot says.
import { reactive, ref } from 'vue'
import type { InterfaceSlot } from '../api/workflows'
import { parseRunInput } from './workflowEditor'

export function useRunInputs(slots: () => Record<string, InterfaceSlot>, t: (key: string) => string) {
  const values = reactive<Record<string, string | boolean>>({})
  const errors = ref<Record<string, string>>({})

  /** Fill in each slot's default; `clear`: forget what was typed (another workflow). */
  function reset(clear = true): void {
    if (clear) for (const key of Object.keys(values)) delete values[key]
    for (const [name, slot] of Object.entries(slots())) {
      if (name in values) continue
      const value = slot.config?.default
      if (slot.dataFlowType === 'BOOLEAN') values[name] = value === true
      else values[name] = value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value)
    }
  }

  /** The run's `inputs`, or null (and `errors` say why) when one does not parse. */
  function collect(): Record<string, unknown> | null {
    const inputs: Record<string, unknown> = {}
    const found: Record<string, string> = {}
    for (const [name, slot] of Object.entries(slots())) {
      const raw = values[name] ?? ''
      const parsed = parseRunInput(raw, slot.dataFlowType ?? 'STRING')
      if (parsed.error) found[name] = t(`workflows.run.inputError.${parsed.error}`)
      else if (parsed.value !== undefined && !(slot.required !== true && parsed.value === '')) inputs[name] = parsed.value
      else if (slot.required) found[name] = t('workflows.run.inputError.required')
    }
    errors.value = found
    return Object.keys(found).length ? null : inputs
  }

  return { values, errors, reset, collect }
}
