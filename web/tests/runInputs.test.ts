import { describe, expect, it } from 'vitest'
import type { InterfaceSlot } from '../src/api/workflows'
import { useRunInputs } from '../src/lib/useRunInputs'

const SLOTS: Record<string, InterfaceSlot> = {
  topic: { dataFlowType: 'STRING', required: true },
  count: { dataFlowType: 'INTEGER', config: { default: 3 } },
  loud: { dataFlowType: 'BOOLEAN', config: { default: true } },
  pages: { dataFlowType: 'INTEGER', required: true },
}

describe('the run form', () => {
  it('starts from each slot default, as text or a tick', () => {
    const form = useRunInputs(() => SLOTS, (key) => key)
    form.reset()
    expect({ ...form.values }).toEqual({ topic: '', count: '3', loud: true, pages: '' })
  })

  it('refuses a missing required number and a number that is not one, then sends typed values', () => {
    const form = useRunInputs(() => SLOTS, (key) => key)
    form.reset()
    expect(form.collect()).toBeNull()
    expect(form.errors.value).toEqual({ pages: 'workflows.run.inputError.required' })
    form.values.pages = '2'
    form.values.count = 'three'
    expect(form.collect()).toBeNull()
    expect(form.errors.value).toEqual({ count: 'workflows.run.inputError.number' })
    form.values.count = '4'
    // An empty required text is a value (the empty string); an empty optional one is left out.
    expect(form.collect()).toEqual({ topic: '', count: 4, loud: true, pages: 2 })
    expect(form.errors.value).toEqual({})
  })

  it('keeps what was typed when the interface gains a slot, and forgets it for another workflow', () => {
    let slots: Record<string, InterfaceSlot> = { topic: { dataFlowType: 'STRING' } }
    const form = useRunInputs(() => slots, (key) => key)
    form.reset()
    form.values.topic = 'looms'
    slots = { ...slots, mood: { dataFlowType: 'STRING', config: { default: 'calm' } } }
    form.reset(false)
    expect({ ...form.values }).toEqual({ topic: 'looms', mood: 'calm' })
    form.reset()
    expect({ ...form.values }).toEqual({ topic: '', mood: 'calm' })
  })
})
