// The server's /api/health report, shared by the header banner and the pages.
import { ref } from 'vue'
import { getHealth } from '../api/settings'
import type { HealthReport } from '../api/types'

export const health = ref<HealthReport | null>(null)
export const healthError = ref<string>('')

const LOADING_POLL_MS = 2000
let loadingPoll: ReturnType<typeof setTimeout> | undefined

export async function refreshHealth(): Promise<void> {
  try {
    health.value = await getHealth()
    healthError.value = ''
  } catch (exc) {
    healthError.value = exc instanceof Error ? exc.message : String(exc)
  }
  // A local model loads in the background (a second for the demo model, minutes for a
  // big file): look again until each one runs or says why it does not.
  const loading = (health.value?.local_models ?? []).some((m) => !m.running && !m.problem)
  if (loadingPoll) clearTimeout(loadingPoll)
  loadingPoll = loading ? setTimeout(() => void refreshHealth(), LOADING_POLL_MS) : undefined
}
