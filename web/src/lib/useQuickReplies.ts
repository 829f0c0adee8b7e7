// The project's quick reply sets, shared by the chat's button bar and the settings
// drawer that imports sets and shows or hides them: a change there shows in the bar.
import { ref } from 'vue'
import { listQuickReplies, type QuickReplySetView } from '../api/quickReplies'

const sets = ref<QuickReplySetView[]>([])

async function reload(): Promise<void> {
  try {
    sets.value = (await listQuickReplies()).sets
  } catch {
    // The bar is a convenience: the chat works without it.
    sets.value = []
  }
}

export function useQuickReplies(): { sets: typeof sets; reload: () => Promise<void> } {
  return { sets, reload }
}
