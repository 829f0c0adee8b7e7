// Typed calls for group chats (storyloom/server/group_api.py): make a group, read and
// change its members, ask a member to speak, import a SillyTavern group chat.
import { type Fetch, requestJson } from './client'
import type { ChatMessage, Conversation } from './chat'
import type { components } from './schema'
import { type CardAnswer, type OnCardConflict, postCardForm } from './characters'

export type ActivationStrategy = 'natural' | 'list' | 'manual'
export type GenerationMode = 'swap' | 'append' | 'append_disabled'

export const ACTIVATION_STRATEGIES: readonly ActivationStrategy[] = ['natural', 'list', 'manual']
export const GENERATION_MODES: readonly GenerationMode[] = ['swap', 'append', 'append_disabled']

// Generated from the server's model: the member, whether it may speak, and the named
// connection that writes its replies (null: the chat's); unknown keys kept.
export type GroupMember = components['schemas']['GroupMember']

export interface GroupSettings {
  members: GroupMember[]
  activation_strategy: ActivationStrategy
  allow_self_responses: boolean
  auto_mode: boolean
  auto_mode_delay: number
  generation_mode: GenerationMode
  join_prefix: string
  join_suffix: string
  [extra: string]: unknown
}

export interface MemberView {
  character_id: string
  name: string
  muted: boolean
  talkativeness: number
  avatar_url: string | null
}

export interface GroupView {
  conversation_id: string
  version: number
  group: GroupSettings
  members: MemberView[]
}

export interface NextAccepted {
  message: ChatMessage
  version: number
}

export interface ImportedGroup {
  conversation: Conversation
  messages: number
  siblings: number
  members: Record<string, string | null>
  warnings: string[]
}

const enc = encodeURIComponent

export function createGroup(
  body: { members: string[]; title?: string; group?: Partial<GroupSettings> },
  fetchImpl?: Fetch,
): Promise<Conversation> {
  return requestJson<Conversation>('POST', '/api/groups', body, fetchImpl)
}

export function getGroup(id: string, fetchImpl?: Fetch): Promise<GroupView> {
  return requestJson<GroupView>('GET', `/api/chats/${enc(id)}/group`, undefined, fetchImpl)
}

export function putGroup(id: string, group: GroupSettings, expectedVersion: number, fetchImpl?: Fetch): Promise<GroupView> {
  return requestJson<GroupView>('PUT', `/api/chats/${enc(id)}/group`, { group, expected_version: expectedVersion }, fetchImpl)
}

/** The next reply: by `speaker`, or (null) by the group's order. */
export function generateNext(
  id: string,
  body: { speaker: string | null; parent_id?: string | null; expected_version: number },
  fetchImpl?: Fetch,
): Promise<NextAccepted> {
  return requestJson<NextAccepted>('POST', `/api/chats/${enc(id)}/group/generate`, body, fetchImpl)
}

/** SillyTavern's group file, its chat and (optionally) the members' cards. A member card
 * that is a character here already answers its conflict unless `onConflict` says what to
 * do with the cards here (as on the Characters page); nothing is written before. */
export function importGroup(
  group: File,
  chat: File,
  cards: File[],
  onConflict: OnCardConflict = 'ask',
  fetchImpl?: Fetch,
): Promise<CardAnswer<ImportedGroup>> {
  return postCardForm<ImportedGroup>('/api/groups/import', { group, chat, cards, on_conflict: onConflict }, fetchImpl)
}
