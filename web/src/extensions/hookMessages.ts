// The words for a client hook's refusal, as the page shows them.
import { HookRefused } from './extensionApi'

type Translate = (key: string, values?: Record<string, unknown>) => string

/** A HookRefused as a sentence naming the plugin; null for any other error. */
export function refusalMessage(exc: unknown, t: Translate): string | null {
  if (!(exc instanceof HookRefused)) return null
  return exc.plugin ? t('extensions.refused', { plugin: exc.plugin, message: exc.message }) : t('extensions.refusedUnknown', { message: exc.message })
}
