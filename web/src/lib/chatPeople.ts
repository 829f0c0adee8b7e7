// Who speaks in a conversation, by name and face: the character (its card's name, its
// preset's avatar) and the user (the chat's persona, else the project's default persona,
// else the "Your name" setting). The message list, the tree and the prompt inspector name
// speakers with these instead of "Character" and "You".
import type { Conversation, Role } from '../api/chat'

/** A persona as the persona API lists it (only what the chat needs). */
export interface PersonaFace {
  id: string
  name: string
  avatar_url?: string | null
  is_default?: boolean
}

export interface Speakers {
  names: Partial<Record<Role, string>>
  avatars: Partial<Record<Role, string | null>>
}

function text(value: unknown): string {
  return typeof value === 'string' ? value.trim() : ''
}

/** A character's avatar route (a character without a picture answers its generated
 * face, the initials on its colour). */
export function characterAvatarRoute(characterId: string): string {
  return `/api/characters/${encodeURIComponent(characterId)}/avatar`
}

/** The character's avatar: its character's image route, whether or not the chat's own
 * copy of the card named one (a card imported without an image can get one later). */
export function characterAvatarUrl(conversation: Conversation): string | null {
  const preset = text(conversation.character.source_preset)
  return preset ? characterAvatarRoute(preset) : null
}

/** The persona this chat speaks as: its own, else the project's default (null: none). */
export function chatPersona(conversation: Conversation, personas: readonly PersonaFace[]): PersonaFace | null {
  const chosen = (conversation.settings as { persona_id?: string | null }).persona_id
  if (chosen) return personas.find((p) => p.id === chosen) ?? null
  return personas.find((p) => p.is_default) ?? null
}

export function speakersOf(conversation: Conversation, personas: readonly PersonaFace[] = []): Speakers {
  const persona = chatPersona(conversation, personas)
  const character = text(conversation.character.card?.name)
  const user = persona?.name || text(conversation.settings.user_name)
  const names: Partial<Record<Role, string>> = {}
  if (character) names.assistant = character
  if (user) names.user = user
  return { names, avatars: { assistant: characterAvatarUrl(conversation), user: persona?.avatar_url ?? null } }
}

/** The two letters a speaker without an avatar shows in its place. */
export function initials(name: string): string {
  const words = name.trim().split(/\s+/).filter(Boolean)
  if (!words.length) return '?'
  const first = Array.from(words[0]!)[0] ?? ''
  const second = words.length > 1 ? (Array.from(words[words.length - 1]!)[0] ?? '') : ''
  return (first + second).toUpperCase()
}
