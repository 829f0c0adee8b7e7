// What a knowledge node's `knowledge_bases` config holds, read against the project's KBs.
//
// A value is looked up as the server's KnowledgeCatalog.find looks up a KB name: reference
// id, then kb_id, then the project's aliases, then display names, stopping at the first tier
// that matches anything. A value that matches nothing (or several KBs) is kept as it is, so
// a hand-written id is never dropped by the picker.
import type { KnowledgeBaseSummary } from '../api/types'

export type ValueStatus = 'ok' | 'missing' | 'ambiguous'

export interface ResolvedValue {
  value: string
  kb: KnowledgeBaseSummary | null
  status: ValueStatus
}

/** The config value as a list of names, trimmed, blanks left out (as the node reads it). */
export function readValues(value: unknown): string[] {
  const items = Array.isArray(value) ? value : typeof value === 'string' ? [value] : []
  return items.map((v) => (typeof v === 'string' ? v : JSON.stringify(v)).trim()).filter((v) => v !== '')
}

/** The KBs `key` names: the first non-empty tier of the lookup order. */
export function findBases(bases: readonly KnowledgeBaseSummary[], key: string): KnowledgeBaseSummary[] {
  const tiers = [
    bases.filter((b) => b.reference_ids.includes(key)),
    bases.filter((b) => b.kb_id === key),
    bases.filter((b) => b.aliases.includes(key)),
    bases.filter((b) => b.displayName === key),
  ]
  return tiers.find((tier) => tier.length > 0) ?? []
}

export function resolveValues(values: readonly string[], bases: readonly KnowledgeBaseSummary[]): ResolvedValue[] {
  return values.map((value) => {
    const found = findBases(bases, value)
    if (found.length === 1) return { value, kb: found[0]!, status: 'ok' }
    return { value, kb: null, status: found.length ? 'ambiguous' : 'missing' }
  })
}

/** What the picker stores for a KB: its first reference id when the project has one. */
export function storedValue(kb: KnowledgeBaseSummary): string {
  return kb.reference_ids[0] ?? kb.kb_id
}

/** The project's own KBs: local ones and the globals it references, in the server's order. */
export function projectBases(bases: readonly KnowledgeBaseSummary[]): KnowledgeBaseSummary[] {
  return bases.filter((b) => b.scope === 'local' || b.referenced)
}

/** Global KBs the project does not reference yet: picking one adds a reference. */
export function browseBases(bases: readonly KnowledgeBaseSummary[]): KnowledgeBaseSummary[] {
  return bases.filter((b) => b.scope === 'global' && !b.referenced)
}

/** The values with every value naming `kbId` left out. */
export function withoutBase(resolved: readonly ResolvedValue[], kbId: string): string[] {
  return resolved.filter((r) => r.kb?.kb_id !== kbId).map((r) => r.value)
}
