// What answers the agent role when no agent model is set up: the user's chat model (the
// server's Settings.agent_model). The page names it where the agent's model is chosen.
import type { ChatEndpointView, SettingsView } from '../api/types'

/** The user's chat model by name: its model, else its local file's name ('' for the
 * embedded demo model, or none). */
export function chatModelName(user: ChatEndpointView): string {
  if (user.model) return user.model
  const path = user.local_model?.path ?? ''
  return path.split(/[\\/]/).at(-1) ?? ''
}

/** The name of the chat model the agent role falls back to, or null when an agent model
 * is set up (it answers). '' when the chat model has no name to show. */
export function agentFallbackName(settings: SettingsView): string | null {
  return settings.agent_uses_user_model ? chatModelName(settings.user_llm) : null
}
