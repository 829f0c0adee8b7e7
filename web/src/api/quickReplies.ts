// Typed calls for /api/quick-replies (SillyTavern's quick reply sets), /api/backgrounds
// (images behind a chat) and a character's expression sprites. The shapes are the
// generated schema's (src/api/schema.d.ts).
import { type Fetch, postForm, requestJson } from './client'
import type { components } from './schema'

type Schemas = components['schemas']
export type QuickReplySetView = Schemas['QuickReplySetView']
export type QuickReplySetList = Schemas['QuickReplySetList']
export type QuickReplyButton = Schemas['QuickReplyButton']
export type BackgroundImageList = Schemas['BackgroundImageList']
export type BackgroundImage = Schemas['BackgroundImage']
export type ExpressionList = Schemas['ExpressionList']

export function listQuickReplies(fetchImpl?: Fetch): Promise<QuickReplySetList> {
  return requestJson<QuickReplySetList>('GET', '/api/quick-replies', undefined, fetchImpl)
}

export function importQuickReplies(file: File, fetchImpl?: Fetch): Promise<QuickReplySetView> {
  return postForm<QuickReplySetView>('/api/quick-replies/import', { file }, fetchImpl)
}

export function listBackgrounds(fetchImpl?: Fetch): Promise<BackgroundImageList> {
  return requestJson<BackgroundImageList>('GET', '/api/backgrounds', undefined, fetchImpl)
}

export function listExpressions(characterId: string, fetchImpl?: Fetch): Promise<ExpressionList> {
  return requestJson<ExpressionList>('GET', `/api/characters/${encodeURIComponent(characterId)}/expressions`, undefined, fetchImpl)
}

export function saveQuickReplySet(
  name: string,
  set: QuickReplySetView['set'],
  visible: boolean | null,
  fetchImpl?: Fetch,
): Promise<QuickReplySetView> {
  return requestJson<QuickReplySetView>('PUT', `/api/quick-replies/${encodeURIComponent(name)}`, { set, visible }, fetchImpl)
}
