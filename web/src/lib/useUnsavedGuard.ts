// Asks before unsaved edits are lost: leaving for another page or another item of the same
// page through the router (the user's answer decides), and closing or reloading the tab
// (the browser's own question). A page's own tabs ask through `mayLeave`. `skip` lets a deliberate departure (after a delete) pass.
import { onBeforeUnmount, onMounted, type Ref } from 'vue'
import { onBeforeRouteLeave, onBeforeRouteUpdate } from 'vue-router'

export interface UnsavedGuard {
  /** Let the next navigation pass without asking (the edits are gone on purpose). */
  skip: () => void
  /** True when there is nothing unsaved or the user agrees to lose it (for a departure
   * the router does not see, such as another tab of the same page). */
  mayLeave: () => boolean
}

export function useUnsavedGuard(dirty: Ref<boolean>, question: () => string): UnsavedGuard {
  let skipping = false

  function mayLeave(): boolean {
    if (skipping || !dirty.value) return true
    return window.confirm(question())
  }

  function onBeforeUnload(event: BeforeUnloadEvent): void {
    if (skipping || !dirty.value) return
    event.preventDefault()
    // Older browsers show their question only when returnValue is set.
    event.returnValue = ''
  }

  onBeforeRouteLeave(() => mayLeave())
  onBeforeRouteUpdate(() => mayLeave())
  onMounted(() => window.addEventListener('beforeunload', onBeforeUnload))
  onBeforeUnmount(() => window.removeEventListener('beforeunload', onBeforeUnload))
  return {
    skip() {
      skipping = true
    },
    mayLeave,
  }
}
