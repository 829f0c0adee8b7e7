// The server's /api/health report, shared by the header banner and the pages.
import { ref } from 'vue'
import { getHealth } from '../api/settings'
import type { HealthReport } from '../api/types'

export const health = ref<HealthReport | null>(null)
export const healthError = ref<string>('')

export async function refreshHealth(): Promise<void> {
  try {
    health.value = await getHealth()
    healthError.value = ''
  } catch (exc) {
    healthError.value = exc instanceof Error ? exc.message : String(exc)
  }
}
