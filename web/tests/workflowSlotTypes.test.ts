import { describe, expect, it } from 'vitest'
import { ALL_TYPES, canConnect, slotColor } from '../src/lib/slotTypes'
import table from './workflowSlotPairs.json'

describe('slot type compatibility', () => {
  it('knows the same types as storyloom/workflow/slot_types.py', () => {
    expect([...ALL_TYPES].sort()).toEqual([...table.types].sort())
  })

  it('answers every pair as can_connect does', () => {
    const wrong = (table.pairs as [string, string, boolean][])
      .filter(([source, target, allowed]) => canConnect(source, target) !== allowed)
      .map(([source, target, allowed]) => `${source} → ${target}: expected ${allowed}`)
    expect(wrong).toEqual([])
    expect(table.pairs.length).toBeGreaterThan(ALL_TYPES.length ** 2 - 1)
  })

  it('converts only one way', () => {
    expect(canConnect('INTEGER', 'FLOAT')).toBe(true)
    expect(canConnect('FLOAT', 'INTEGER')).toBe(false)
    expect(canConnect('MESSAGES', 'ARRAY')).toBe(true)
    expect(canConnect('ARRAY', 'MESSAGES')).toBe(false)
    expect(canConnect('STRING', 'INTEGER')).toBe(false)
  })

  it('gives every type a colour, plugin types a stable one', () => {
    for (const type of ALL_TYPES) expect(slotColor(type)).toMatch(/^#[0-9a-f]{6}$/)
    expect(slotColor('PLUGIN_T')).toBe(slotColor('PLUGIN_T'))
    expect(slotColor('PLUGIN_T')).toMatch(/^hsl\(/)
  })
})
