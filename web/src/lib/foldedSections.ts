// Which sections of a long form the user folded, remembered in the browser per form (one
// storage key) and per section: folding "examples" once keeps it folded on every character
// and after a reload. A storage that is missing, full or holds something else is no error:
// every section is then simply open.
import { ref, type Ref } from 'vue'

type Store = Pick<Storage, 'getItem' | 'setItem'>

function storage(): Store | null {
  try {
    return globalThis.localStorage ?? null
  } catch {
    return null
  }
}

/** The folded section ids kept under `key` (none when nothing readable is there). */
export function readFolded(key: string, store: Store | null = storage()): Set<string> {
  try {
    const parsed: unknown = JSON.parse(store?.getItem(key) ?? '[]')
    return new Set(Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [])
  } catch {
    return new Set()
  }
}

/** Keep `folded` under `key`, sorted so that equal sets are stored alike. */
export function writeFolded(key: string, folded: Set<string>, store: Store | null = storage()): void {
  try {
    store?.setItem(key, JSON.stringify([...folded].sort()))
  } catch {
    // A full or refused storage only means the fold is not remembered.
  }
}

export interface FoldedSections {
  folded: Ref<Set<string>>
  isOpen: (id: string) => boolean
  setOpen: (id: string, open: boolean) => void
}

export function useFoldedSections(key: string, store: Store | null = storage()): FoldedSections {
  const folded = ref(readFolded(key, store))
  return {
    folded,
    isOpen: (id) => !folded.value.has(id),
    setOpen(id, open) {
      if (open === !folded.value.has(id)) return
      const next = new Set(folded.value)
      if (open) next.delete(id)
      else next.add(id)
      folded.value = next
      writeFolded(key, next, store)
    },
  }
}
