// A scrolled log that follows what is added at its end while the reader is at the bottom,
// and leaves them where they are when they scrolled up to read.
import { nextTick, type WatchSource, watch } from 'vue'

/** How close to the bottom (px) still counts as "at the bottom". */
export const NEAR_BOTTOM_PX = 80

export function useFollowScroll(el: () => HTMLElement | null, changes: WatchSource<unknown>) {
  /** Set by a send or a generation: follow the reply even when scrolled up. */
  let force = false
  let wasNearBottom = true

  function nearBottom(): boolean {
    const box = el()
    return !box || box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_BOTTOM_PX
  }

  function toBottom(): void {
    const box = el()
    if (box) box.scrollTop = box.scrollHeight
  }

  watch(changes, () => (wasNearBottom = nearBottom()), { flush: 'pre' })
  watch(
    changes,
    () => {
      if (force || wasNearBottom) toBottom()
      force = false
    },
    { flush: 'post' },
  )

  /** Follow the next change whatever the position. */
  function follow(): void {
    force = true
  }

  /** Run `grow` (which adds above what is shown) and keep the reader's place. */
  async function keepPlace(grow: () => Promise<void>): Promise<void> {
    const box = el()
    const before = box?.scrollHeight ?? 0
    await grow()
    await nextTick()
    if (box) box.scrollTop += box.scrollHeight - before
  }

  return { toBottom, follow, keepPlace }
}
