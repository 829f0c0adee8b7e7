// Typed calls for /api/characters and /api/personas: the character library and the
// user's personas. The shapes are the generated schema's (src/api/schema.d.ts).
//
// Saves send the `version` the editor opened; the server answers 409 when another tab
// saved first (`isConflict()` from ./chat tells the editor to reload).
import { type Fetch, errorFromBody, fetchForm, postForm, requestJson } from './client'
import type { components } from './schema'

type Schemas = components['schemas']
export type CharacterItem = Schemas['CharacterItem']
export type CharacterDocument = Schemas['CharacterDocument']
export type CharacterTokens = Schemas['CharacterTokens']
export type CreatedCharacter = Schemas['CreatedCharacter']
export type PersonaView = Schemas['PersonaView']
export type PersonaList = Schemas['PersonaList']
export type PersonaImportReport = Schemas['PersonaImportReport']
export type CardImport = Schemas['CardImport']
export type CardConflict = Schemas['CardConflict']
export type CardScripts = Schemas['CardScripts']
export type CardPermissions = Schemas['CardPermissions']
export type CardRegexView = Schemas['CardRegexView']
export type HelperScriptView = Schemas['HelperScriptView']
export type ScriptStatus = CardRegexView['status']
/** What to do with a card that is a character here already: ask (the server answers
 * with the conflict and writes nothing), update it (a new version), or keep both. */
export type OnCardConflict = 'ask' | 'update' | 'keep_both'
export type CardAnswer<T> = { imported: T } | { conflict: CardConflict }
export type CardImportAnswer = CardAnswer<CardImport>
export type CardFormat = 'png' | 'json' | 'charx'
/** The image types an avatar upload accepts (the server checks the bytes). */
export const AVATAR_TYPES = 'image/png,image/jpeg,image/gif,image/webp'

/** The card fields the editor shows (a CharacterDefinition's JSON, loosely typed: a card
 * keeps whatever else it carries, and the editor sends it back untouched). */
export interface CharacterFields {
  name: string
  nickname?: string | null
  description: string
  personality: string
  scenario: string
  first_mes: string
  alternate_greetings: string[]
  mes_example: string
  creator_notes: string
  system_prompt: string
  post_history_instructions: string
  tags: string[]
  creator: string
  character_version: string
  fav: boolean
  talkativeness: number
  knowledge_bases: string[]
  extensions: Record<string, unknown>
  [extra: string]: unknown
}

export interface DepthPrompt {
  prompt: string
  depth: number
  role: 'system' | 'user' | 'assistant'
}

const CHARACTERS = '/api/characters'
const PERSONAS = '/api/personas'
const enc = encodeURIComponent

export async function listCharacterLibrary(fetchImpl?: Fetch): Promise<CharacterItem[]> {
  const data = await requestJson<Partial<Schemas['CharacterLibrary']> | null>('GET', CHARACTERS, undefined, fetchImpl)
  return Array.isArray(data?.characters) ? data.characters : []
}

export function getCharacter(id: string, fetchImpl?: Fetch): Promise<CharacterDocument> {
  return requestJson<CharacterDocument>('GET', `${CHARACTERS}/${enc(id)}`, undefined, fetchImpl)
}

export function createCharacter(character: Partial<CharacterFields>, fetchImpl?: Fetch): Promise<CreatedCharacter> {
  return requestJson<CreatedCharacter>('POST', CHARACTERS, { character }, fetchImpl)
}

export function saveCharacter(
  id: string,
  version: string | null,
  character: CharacterFields,
  fetchImpl?: Fetch,
): Promise<CharacterDocument> {
  return requestJson<CharacterDocument>('PUT', `${CHARACTERS}/${enc(id)}`, { version, character }, fetchImpl)
}

export function setFavourite(id: string, fav: boolean, fetchImpl?: Fetch): Promise<CharacterDocument> {
  return requestJson<CharacterDocument>('PUT', `${CHARACTERS}/${enc(id)}/fav`, { fav }, fetchImpl)
}

/** The user's answer to which agent profile the character answers with (null: none). */
export function answerCharacterAgent(id: string, profile: string | null, fetchImpl?: Fetch): Promise<CharacterDocument> {
  return requestJson<CharacterDocument>('PUT', `${CHARACTERS}/${enc(id)}/agent`, { profile }, fetchImpl)
}

/** What the character's card may run (saving it answers the import question). */
export function setCardPermissions(id: string, permissions: CardPermissions, fetchImpl?: Fetch): Promise<CharacterDocument> {
  return requestJson<CharacterDocument>('PUT', `${CHARACTERS}/${enc(id)}/permissions`, permissions, fetchImpl)
}

export function duplicateCharacter(id: string, fetchImpl?: Fetch): Promise<CreatedCharacter> {
  return requestJson<CreatedCharacter>('POST', `${CHARACTERS}/${enc(id)}/duplicate`, undefined, fetchImpl)
}

export function deleteCharacter(id: string, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('DELETE', `${CHARACTERS}/${enc(id)}`, undefined, fetchImpl)
}

export function uploadCharacterAvatar(id: string, file: File, fetchImpl?: Fetch): Promise<CharacterDocument> {
  return postForm<CharacterDocument>(`${CHARACTERS}/${enc(id)}/avatar`, { file }, fetchImpl)
}

/** Import a SillyTavern card (PNG, JSON, CHARX). A card that is a character here already
 * answers its conflict (a 409 whose body names the character) unless `onConflict` says
 * what to do; every other failure is an ApiError. */
export function importCharacterCard(
  file: File,
  onConflict: OnCardConflict = 'ask',
  fetchImpl: Fetch = globalThis.fetch.bind(globalThis),
): Promise<CardImportAnswer> {
  return postCardForm<CardImport>(`${CHARACTERS}/import`, { file, on_conflict: onConflict }, fetchImpl)
}

/** A multipart upload that may carry a card (every door a card comes in by: the
 * Characters and Knowledge pages, a chat's or a group's import): the server's answer, or the conflict
 * of a card that is a character here already (a 409 naming it; nothing was written). */
export async function postCardForm<T>(
  path: string,
  fields: Record<string, string | Blob | Blob[] | undefined>,
  fetchImpl?: Fetch,
): Promise<CardAnswer<T>> {
  const { res, data } = await fetchForm(path, fields, fetchImpl)
  return cardAnswer<T>(res, data)
}

/** The answer of a card upload: what was imported, a 409 conflict to ask about, or the error. */
export function cardAnswer<T>(res: Response, data: unknown): CardAnswer<T> {
  if (res.ok) return { imported: data as T }
  const conflict = res.status === 409 && typeof data === 'object' && data !== null ? (data as Partial<Schemas['CardConflictBody']>).conflict : undefined
  if (conflict) return { conflict }
  throw errorFromBody(res.status, res.statusText, data)
}

/** Tokens of texts being edited, counted as the prompt budget counts them. */
export async function countTokens(texts: Record<string, string>, fetchImpl?: Fetch): Promise<Record<string, number>> {
  const data = await requestJson<Schemas['TokenAnswer']>('POST', `${CHARACTERS}/tokens`, { texts }, fetchImpl)
  return data.tokens
}

/** Where the browser downloads a card from (a plain link: the server names the file). */
export function characterExportUrl(id: string, format: CardFormat): string {
  return `${CHARACTERS}/${enc(id)}/export?format=${format}`
}

// -- personas -----------------------------------------------------------------------------

export interface PersonaFields {
  name: string
  description: string
  knowledge_base: string | null
}

export async function listPersonas(fetchImpl?: Fetch): Promise<PersonaList> {
  const data = await requestJson<Partial<PersonaList> | null>('GET', PERSONAS, undefined, fetchImpl)
  return {
    personas: Array.isArray(data?.personas) ? data.personas : [],
    default_id: data?.default_id ?? null,
    problems: Array.isArray(data?.problems) ? data.problems : [],
  }
}

export function createPersona(persona: PersonaFields, fetchImpl?: Fetch): Promise<PersonaView> {
  return requestJson<PersonaView>('POST', PERSONAS, persona, fetchImpl)
}

export function savePersona(id: string, version: string | null, persona: PersonaFields, fetchImpl?: Fetch): Promise<PersonaView> {
  return requestJson<PersonaView>('PUT', `${PERSONAS}/${enc(id)}`, { version, persona }, fetchImpl)
}

export function deletePersona(id: string, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('DELETE', `${PERSONAS}/${enc(id)}`, undefined, fetchImpl)
}

export function setDefaultPersona(id: string, isDefault: boolean, fetchImpl?: Fetch): Promise<PersonaList> {
  return requestJson<PersonaList>(isDefault ? 'POST' : 'DELETE', `${PERSONAS}/${enc(id)}/default`, undefined, fetchImpl)
}

export function uploadPersonaAvatar(id: string, file: File, fetchImpl?: Fetch): Promise<PersonaView> {
  return postForm<PersonaView>(`${PERSONAS}/${enc(id)}/avatar`, { file }, fetchImpl)
}

/** A persona file: storyloom's, or SillyTavern's persona backup (every persona in it). */
export function importPersona(file: File, fetchImpl?: Fetch): Promise<PersonaImportReport> {
  return postForm<PersonaImportReport>(`${PERSONAS}/import`, { file }, fetchImpl)
}
