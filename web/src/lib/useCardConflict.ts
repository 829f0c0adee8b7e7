// A card coming in by any door (the Characters page, a chat's, a group's or the Knowledge
// page's import) that is a character here already waits for the user's choice in
// CardConflictDialog. Every door keeps the same state: what came in (a file, or a group's
// files) and the server's conflict; the choice closes it or imports the same files again
// with `on_conflict` set. Only the import itself and what "open it" does differ per door.
import { type ComputedRef, computed, ref } from 'vue'
import type { CardAnswer, CardConflict } from '../api/characters'

/** The dialog's buttons: open the character here (the very same card), update it (a
 * changed card), keep both, or cancel. */
export type CardChoice = 'open' | 'update' | 'keep_both' | 'cancel'

/** What the dialog shows and answers: the conflict waiting (null: none) and the name of
 * the file it came in. */
export interface CardConflictQuestion {
  readonly asking: ComputedRef<{ conflict: CardConflict; fileName: string } | null>
  choose(choice: CardChoice): void
}

export interface CardConflictFlow<F> extends CardConflictQuestion {
  /** The import's answer: what was imported, or null when it is a conflict, which now
   * waits for the user's choice. */
  receive<T>(files: F, answer: CardAnswer<T>): T | null
  /** Nothing waits any more (the import failed). */
  close(): void
}

export interface CardConflictOptions<F> {
  /** Import the same files again with the user's choice. */
  reimport: (files: F, onConflict: 'update' | 'keep_both') => unknown
  /** What "open it" does for the very same card: go to the character here (the dialog
   * closes first), or 'update': import again as an update, which changes nothing and
   * makes the import use the character here (a group's member). */
  open: ((conflict: CardConflict) => unknown) | 'update'
  /** The file the dialog names (a group's import brings several). */
  fileName: (files: F, conflict: CardConflict) => string
}

export function useCardConflict(options: Omit<CardConflictOptions<File>, 'fileName'>): CardConflictFlow<File>
export function useCardConflict<F>(options: CardConflictOptions<F>): CardConflictFlow<F>
export function useCardConflict<F>(options: Omit<CardConflictOptions<F>, 'fileName'> & Partial<CardConflictOptions<F>>): CardConflictFlow<F> {
  const pending = ref<{ files: F; conflict: CardConflict } | null>(null)
  const fileName = options.fileName ?? ((files: F) => (files as File).name)
  // `pending.value` is read through Vue's reactive unwrap; `files` is the caller's own value.
  const asking = computed(() => {
    const waiting = pending.value
    return waiting ? { conflict: waiting.conflict, fileName: fileName(waiting.files as F, waiting.conflict) } : null
  })

  function close(): void {
    pending.value = null
  }

  function receive<T>(files: F, answer: CardAnswer<T>): T | null {
    if ('conflict' in answer) {
      pending.value = { files, conflict: answer.conflict } as typeof pending.value
      return null
    }
    close()
    return answer.imported
  }

  function choose(choice: CardChoice): void {
    const waiting = pending.value
    if (!waiting) return
    const files = waiting.files as F
    switch (choice) {
      case 'cancel':
        close()
        return
      case 'open':
        if (options.open === 'update') {
          void options.reimport(files, 'update')
        } else {
          close()
          void options.open(waiting.conflict)
        }
        return
      case 'update':
      case 'keep_both':
        void options.reimport(files, choice)
        return
    }
  }

  return { asking, choose, receive, close }
}
