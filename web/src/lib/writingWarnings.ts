// Role C's warnings as the list shows them: the ones marked intentional stay out of sight
// unless asked for, newest chapter first.
import type { WarningView } from '../api/writing'

export function visibleWarnings(warnings: readonly WarningView[], showIntentional: boolean): WarningView[] {
  return warnings
    .filter((w) => showIntentional || !w.intentional)
    .sort((a, b) => b.chapter - a.chapter || a.id - b.id)
}

export function intentionalCount(warnings: readonly WarningView[]): number {
  return warnings.filter((w) => w.intentional).length
}

type Translate = (key: string, values?: Record<string, unknown>) => string

/** What a warning says, in the page's language: its frame (another value, a lost body
 * part used, the dead acting) with the book's values quoted; a warning kept before
 * warnings had a frame shows the English words the server kept. The sentences behind it
 * are shown apart (the fact's and the text's). */
export function warningText(w: WarningView, t: Translate, tag: string): string {
  if (!w.kind) return w.detail
  const quoted = (text: string) => t('writing.warnings.quoted', { text })
  const since = new Intl.NumberFormat(tag).format(w.sinceChapter)
  const name = w.subjectName || w.subject.split('/').pop() || w.subject
  const values = { name, attribute: w.attribute, expected: quoted(w.expected), found: quoted(w.found), since }
  let text = t(`writing.warnings.frame.${w.kind}`, values)
  if (w.earlierValue != null && w.earlierUntil != null) {
    text += t('writing.warnings.frame.earlier', { value: quoted(w.earlierValue), until: new Intl.NumberFormat(tag).format(w.earlierUntil), expected: quoted(w.expected) })
  }
  return text
}
