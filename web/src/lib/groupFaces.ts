// The face of a group chat's message: each reply records its speaker (`extra.speaker`,
// with the character preset it came from), so a message shows its own speaker's avatar
// (a generated one when the preset has no picture) rather than the first character's.
import type { ChatMessage } from '../api/chat'
import { characterAvatarRoute } from './chatPeople'

/** The avatar to show for `message`: its speaker's in a group chat (null: none, show the
 * initials), else `fallback` (the conversation's character or persona). */
export function speakerFace(message: ChatMessage, fallback: string | null): string | null {
  const speaker = message.extra?.speaker
  if (message.role !== 'assistant' || typeof speaker !== 'object' || speaker === null) return fallback
  const preset = (speaker as { preset?: unknown }).preset
  return typeof preset === 'string' && preset ? characterAvatarRoute(preset) : null
}
