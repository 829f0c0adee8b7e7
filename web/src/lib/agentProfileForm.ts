// The agent profile editor's checks, kept free of Vue so they can be unit-tested. They
// mirror the server's model (tools/agent_profile.py); the server checks again on save and
// its 422 problems are shown by their fields.
import type { AgentProfile } from '../api/agents'
import { POLICY_ACTIONS } from '../api/tools'

/** A profile id is its file name (`agents/<id>.json`): letters, digits, `-` and `_`. */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

export interface ProfileError {
  /** The field as the server names it (`policy.rules[1].tool`). */
  field: string
  code: 'required' | 'idPattern' | 'idTaken' | 'minSteps' | 'integer' | 'positive' | 'action'
}

export function profileErrors(profile: AgentProfile, takenIds: readonly string[] = []): ProfileError[] {
  const errors: ProfileError[] = []
  if (!profile.id) errors.push({ field: 'id', code: 'required' })
  else if (!AGENT_ID_PATTERN.test(profile.id)) errors.push({ field: 'id', code: 'idPattern' })
  else if (takenIds.includes(profile.id)) errors.push({ field: 'id', code: 'idTaken' })
  if (!profile.name.trim()) errors.push({ field: 'name', code: 'required' })
  if (!Number.isInteger(profile.max_steps)) errors.push({ field: 'max_steps', code: 'integer' })
  else if (profile.max_steps < 1) errors.push({ field: 'max_steps', code: 'minSteps' })
  if (!(Number.isFinite(profile.call_timeout_s) && profile.call_timeout_s > 0)) {
    errors.push({ field: 'call_timeout_s', code: 'positive' })
  }
  profile.policy.rules.forEach((rule, i) => {
    if (!rule.tool.trim()) errors.push({ field: `policy.rules[${i}].tool`, code: 'required' })
    if (!POLICY_ACTIONS.includes(rule.action)) errors.push({ field: `policy.rules[${i}].action`, code: 'action' })
  })
  return errors
}

/** The inventory with `id` added or removed, keeping the user's order. */
export function toggleInventory(inventory: readonly string[], id: string, on: boolean): string[] {
  if (on) return inventory.includes(id) ? [...inventory] : [...inventory, id]
  return inventory.filter((x) => x !== id)
}

/** Inventory ids the registry does not know (a removed plugin, a renamed workflow). */
export function unknownInventory(inventory: readonly string[], known: readonly string[]): string[] {
  const set = new Set(known)
  return inventory.filter((id) => !set.has(id))
}

/** The marker the prompt uses for the tool documentation (seed §7.2). */
export const AVAILABLE_TOOLS_MARKER = '{{{system:available_tools}}}'

/** A TAM profile needs the tool documentation in its prompt to call anything. */
export function promptLacksToolDocs(profile: AgentProfile): boolean {
  return (
    profile.protocol !== 'native' &&
    !profile.workflow &&
    profile.tool_ids_inventory.length > 0 &&
    !profile.prompt.includes(AVAILABLE_TOOLS_MARKER)
  )
}
