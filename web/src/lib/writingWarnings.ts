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
