// Typed calls for lore scopes: which knowledge bases go into which chat (the project's
// global list, a chat's own books, why each is active) and the knowledge bases' own
// operations (on/off, rename, duplicate, delete with what names them).
import { type Fetch, requestJson } from './client'
import type { components } from './schema'
import type { KnowledgeBaseSummary } from './types'

type Schemas = components['schemas']

export type LoreSettings = Schemas['LoreSettings']
export type InsertionStrategy = LoreSettings['insertion_strategy']
export type ChatLore = Schemas['ChatLore']
export type ScopedKnowledgeBase = Schemas['ScopedKnowledgeBase']
export type LoreScope = ScopedKnowledgeBase['scope']
export type ReferrerList = Schemas['ReferrerList']
export type Referrer = Schemas['ReferrerOut']
export type DuplicateOut = Schemas['DuplicateOut']
export type BindableBook = Schemas['BindableKnowledgeBase']

export const INSERTION_STRATEGIES: readonly InsertionStrategy[] = ['evenly', 'character_first', 'global_first']

const enc = encodeURIComponent
const KB = '/api/knowledge/bases'

export function getLoreSettings(fetchImpl?: Fetch): Promise<LoreSettings> {
  return requestJson<LoreSettings>('GET', '/api/lore/project', undefined, fetchImpl)
}

export function putLoreSettings(body: LoreSettings, fetchImpl?: Fetch): Promise<LoreSettings> {
  return requestJson<LoreSettings>('PUT', '/api/lore/project', body, fetchImpl)
}

/** Put a KB in the project's global list, or take it out. */
export async function setGlobalLore(kbId: string, on: boolean, fetchImpl?: Fetch): Promise<LoreSettings> {
  const current = await getLoreSettings(fetchImpl)
  const ids = current.global_knowledge_bases.filter((id) => id !== kbId)
  if (on) ids.push(kbId)
  return putLoreSettings({ ...current, global_knowledge_bases: ids }, fetchImpl)
}

/** What every "Bind a book…" list offers: each book once, no card's own book. */
export async function listBindableBooks(fetchImpl?: Fetch): Promise<BindableBook[]> {
  const data = await requestJson<Partial<Schemas['BookList']> | null>('GET', '/api/lore/books', undefined, fetchImpl)
  return Array.isArray(data?.books) ? data.books : []
}

export function getChatLore(conversationId: string, fetchImpl?: Fetch): Promise<ChatLore> {
  return requestJson<ChatLore>('GET', `/api/chats/${enc(conversationId)}/lore`, undefined, fetchImpl)
}

export function putChatLore(conversationId: string, kbIds: string[], fetchImpl?: Fetch): Promise<ChatLore> {
  return requestJson<ChatLore>('PUT', `/api/chats/${enc(conversationId)}/lore`, { knowledge_bases: kbIds }, fetchImpl)
}

export function patchKnowledgeBase(
  kbId: string,
  change: { displayName?: string; enabled?: boolean },
  fetchImpl?: Fetch,
): Promise<KnowledgeBaseSummary> {
  return requestJson<KnowledgeBaseSummary>('PATCH', `${KB}/${enc(kbId)}`, change, fetchImpl)
}

export function duplicateKnowledgeBase(kbId: string, fetchImpl?: Fetch): Promise<KnowledgeBaseSummary> {
  return requestJson<KnowledgeBaseSummary>('POST', `${KB}/${enc(kbId)}/duplicate`, {}, fetchImpl)
}

export function knowledgeBaseReferrers(kbId: string, fetchImpl?: Fetch): Promise<ReferrerList> {
  return requestJson<ReferrerList>('GET', `${KB}/${enc(kbId)}/referrers`, undefined, fetchImpl)
}

/** Delete a KB; `confirm` is needed while something names it (else a 409 says what). */
export function deleteKnowledgeBase(kbId: string, confirm: boolean, fetchImpl?: Fetch): Promise<ReferrerList> {
  return requestJson<ReferrerList>('DELETE', `${KB}/${enc(kbId)}?confirm=${confirm}`, undefined, fetchImpl)
}
