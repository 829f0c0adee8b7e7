// The author's corrections of a book's memory as the Writing page makes them: a fact typed
// in a form (new or an edit), the fact a rejection names, and the entities another one
// can be merged into.
import type { FactCategory, FactEditBody, FactRefBody, FactView, NewFactBody, ResNode } from '../api/writing'
import { chapterNumber, isEntityKind } from './writingEntities'

export const FACT_CATEGORIES: readonly FactCategory[] = ['characterization', 'factual', 'narrative', 'timeline', 'world']

/** What the fact form holds: text fields as typed. */
export interface FactDraft {
  attribute: string
  value: string
  chapter: string | number
  category: FactCategory
  evidence: string
}

/** The field a draft is wrong in (the form says which). */
export type FactDraftError = 'attribute' | 'value' | 'chapter'

export function emptyDraft(): FactDraft {
  return { attribute: '', value: '', chapter: '', category: 'factual', evidence: '' }
}

export function draftOf(fact: FactView): FactDraft {
  return { attribute: fact.attribute, value: fact.value, chapter: fact.chapter, category: fact.category, evidence: fact.evidence ?? '' }
}

/** A chapter typed in the form: a whole number ≥ 0 (0: from the start of the book). */
function chapterOf(raw: string | number): number | null {
  const n = chapterNumber(raw, 0)
  return typeof n === 'number' ? n : null
}

function checkDraft(draft: FactDraft): FactDraftError | null {
  if (!draft.attribute.trim()) return 'attribute'
  if (!draft.value.trim()) return 'value'
  if (chapterOf(draft.chapter) === null) return 'chapter'
  return null
}

/** The body that adds the draft as the author's fact about `subject`. */
export function newFactBody(subject: string, draft: FactDraft): NewFactBody | FactDraftError {
  const error = checkDraft(draft)
  if (error) return error
  return {
    subject,
    attribute: draft.attribute.trim(),
    value: draft.value.trim(),
    chapter: chapterOf(draft.chapter) as number,
    category: draft.category,
    evidence: draft.evidence.trim(),
  }
}

/** The body that edits `original` to the draft: a moved attribute or chapter is said
 * only when it moved, the rest is the new version's. */
export function editFactBody(original: FactView, draft: FactDraft): FactEditBody | FactDraftError {
  const error = checkDraft(draft)
  if (error) return error
  const attribute = draft.attribute.trim()
  const chapter = chapterOf(draft.chapter) as number
  return {
    subject: original.subject,
    attribute: original.attribute,
    chapter: original.chapter,
    value: draft.value.trim(),
    category: draft.category,
    evidence: draft.evidence.trim(),
    ...(attribute !== original.attribute ? { newAttribute: attribute } : {}),
    ...(chapter !== original.chapter ? { newChapter: chapter } : {}),
  }
}

/** A fact as a rejection (or its undoing) names it. */
export function factRef(fact: FactView): FactRefBody {
  return { subject: fact.subject, attribute: fact.attribute, value: fact.value, chapter: fact.chapter }
}

export function factKey(fact: FactView): string {
  return `${fact.subject}\u0000${fact.attribute}\u0000${fact.chapter}\u0000${fact.value}`
}

/** The entities `path` can be merged into: the book's other characters, places and plot
 * threads, by name. */
export function mergeTargets(items: readonly ResNode[], path: string): ResNode[] {
  return items.filter((i) => i.path !== path && isEntityKind(i.kind)).sort((a, b) => (a.title || a.path).localeCompare(b.title || b.path))
}
