// The prompt inspector's lore, arranged for reading: the entries that went into the prompt
// first, then those left out, each part grouped by knowledge base (by its name; an older
// record without one by its id). An entry the token budget cut counts as left out, so the
// list agrees with "cut by the budget".
import type { CutBlock, LoreRecord } from '../api/chat'
import type { TextPromptView } from '../api/types'

export interface LoreEntryView {
  record: LoreRecord
  /** Matched but not in the prompt: dropped by the scan, or cut by the budget. */
  dropped: boolean
  /** Cut by the token budget (after it activated). */
  cutByBudget: boolean
}

export interface LoreGroup {
  /** The KB's name, else its id. */
  name: string
  kbId: string
  scope: string | null
  entries: LoreEntryView[]
}

export interface LoreSections {
  included: LoreGroup[]
  dropped: LoreGroup[]
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/** The id of the Skein block a lore entry becomes (`lore:<kb>/<entry>`). */
export function loreBlockId(record: Pick<LoreRecord, 'kb_id' | 'entry_id'>): string {
  return `lore:${record.kb_id}/${record.entry_id}`
}

function cutByBudget(record: LoreRecord, cutIds: ReadonlySet<string>): boolean {
  if (cutIds.has(loreBlockId(record))) return true
  return (record.reasons ?? []).some((r) => r.rule === 'token_budget' && r.outcome === 'dropped')
}

function grouped(entries: LoreEntryView[]): LoreGroup[] {
  const groups = new Map<string, LoreGroup>()
  for (const entry of entries) {
    const kbId = entry.record.kb_id
    let group = groups.get(kbId)
    if (!group) {
      const name = text(entry.record.kb_name).trim() || kbId
      const scope = text(entry.record.scope).trim() || null
      groups.set(kbId, (group = { name, kbId, scope, entries: [] }))
    }
    group.entries.push(entry)
  }
  return [...groups.values()]
}

export function loreSections(lore: readonly LoreRecord[], cut: readonly CutBlock[] = []): LoreSections {
  const cutIds = new Set(cut.map((c) => c.id))
  const views = lore.map((record) => {
    const budget = record.activated !== false && cutByBudget(record, cutIds)
    return { record, cutByBudget: budget, dropped: record.activated === false || budget }
  })
  return { included: grouped(views.filter((v) => !v.dropped)), dropped: grouped(views.filter((v) => v.dropped)) }
}

/** How many lore entries the budget cut (the number "cut by the budget" counts for lore). */
export function loreCutCount(sections: LoreSections): number {
  return sections.dropped.reduce((n, g) => n + g.entries.filter((e) => e.cutByBudget).length, 0)
}

/** One stretch of a text-completion prompt, as the inspector shows it. */
export interface TextSpan {
  text: string
  /** Where it came from: a block's label ('Card: description') or the template's part. */
  source: string
  /** The Skein block it is; null: the template's own text (sequences, chat start...). */
  block: string | null
  kind: string
}

/** The prompt's text cut at its pieces; what no piece covers (an older record) is one
 * span of its own, so the spans always join to the text. */
export function textPromptSpans(prompt: Pick<TextPromptView, 'text' | 'pieces'>): TextSpan[] {
  const spans: TextSpan[] = []
  let at = 0
  const pieces = [...(prompt.pieces ?? [])].sort((a, b) => a.start - b.start)
  for (const p of pieces) {
    if (p.start < at || p.end <= p.start || p.end > prompt.text.length) continue
    if (p.start > at) spans.push({ text: prompt.text.slice(at, p.start), source: '', block: null, kind: 'unknown' })
    spans.push({ text: prompt.text.slice(p.start, p.end), source: p.source, block: p.block ?? null, kind: p.kind })
    at = p.end
  }
  if (at < prompt.text.length) spans.push({ text: prompt.text.slice(at), source: '', block: null, kind: 'unknown' })
  return spans
}
