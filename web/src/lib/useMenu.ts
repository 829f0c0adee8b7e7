// A button that opens a list of choices (on a phone: the app's pages, the chat's panels).
// Escape closes it and gives the focus back to the button; a press outside the button and
// the list closes it too. The button says whether it is open with aria-expanded.
import { onBeforeUnmount, onMounted, type Ref, ref } from 'vue'

export interface Menu {
  /** The list is shown. */
  open: Ref<boolean>
  toggle: () => void
  /** Close; `refocus` gives the focus back to the button (after a key, not a click). */
  close: (refocus?: boolean) => void
}

export function useMenu(button: Ref<HTMLElement | null>, list: Ref<HTMLElement | null>): Menu {
  const open = ref(false)

  function close(refocus = false): void {
    if (!open.value) return
    open.value = false
    if (refocus) button.value?.focus()
  }

  function toggle(): void {
    open.value = !open.value
  }

  function onKeydown(event: KeyboardEvent): void {
    if (!open.value || event.key !== 'Escape') return
    event.preventDefault()
    close(true)
  }

  function onPointerdown(event: PointerEvent): void {
    const target = event.target
    if (!open.value || !(target instanceof Node)) return
    if (button.value?.contains(target) || list.value?.contains(target)) return
    close()
  }

  onMounted(() => {
    document.addEventListener('keydown', onKeydown)
    document.addEventListener('pointerdown', onPointerdown)
  })
  onBeforeUnmount(() => {
    document.removeEventListener('keydown', onKeydown)
    document.removeEventListener('pointerdown', onPointerdown)
  })

  return { open, toggle, close }
}
