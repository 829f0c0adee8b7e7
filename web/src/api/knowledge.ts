// Typed calls for /api/knowledge: knowledge bases, references, activation test, search,
// import and export.
import { type Fetch, fetchForm, postForm, requestJson } from './client'
import type {
  ActivationTestRequest,
  ActivationTestResponse,
  CreateKnowledgeBase,
  EmbeddingChoice,
  EmbeddingChoiceBody,
  EmbeddingProgress,
  ImportReport,
  KnowledgeBase,
  KnowledgeBaseDocument,
  KnowledgeBaseList,
  KnowledgeBaseSummary,
  ReferenceCheckResponse,
  ReferenceTargetList,
  SearchResponse,
} from './types'
import type { JsonSchema } from '../lib/jsonSchema'
import { type CardAnswer, type OnCardConflict, cardAnswer } from './characters'

const BASE = '/api/knowledge'
const enc = encodeURIComponent

export function listKnowledgeBases(fetchImpl?: Fetch): Promise<KnowledgeBaseList> {
  return requestJson<KnowledgeBaseList>('GET', `${BASE}/bases`, undefined, fetchImpl)
}

export function createKnowledgeBase(body: CreateKnowledgeBase, fetchImpl?: Fetch): Promise<KnowledgeBaseSummary> {
  return requestJson<KnowledgeBaseSummary>('POST', `${BASE}/bases`, body, fetchImpl)
}

/** Add a global KB to the project's knowledgeBaseReferences (a no-op when it is there);
 * answers the KB with its reference id. */
export function referenceKnowledgeBase(kbId: string, fetchImpl?: Fetch): Promise<KnowledgeBaseSummary> {
  return requestJson<KnowledgeBaseSummary>('POST', `${BASE}/bases/${enc(kbId)}/reference`, undefined, fetchImpl)
}

export function getKnowledgeBase(kbId: string, fetchImpl?: Fetch): Promise<KnowledgeBaseDocument> {
  return requestJson<KnowledgeBaseDocument>('GET', `${BASE}/bases/${enc(kbId)}`, undefined, fetchImpl)
}

export function putKnowledgeBase(kb: KnowledgeBase, fetchImpl?: Fetch): Promise<KnowledgeBaseDocument> {
  return requestJson<KnowledgeBaseDocument>('PUT', `${BASE}/bases/${enc(kb.kb_id ?? '')}`, kb, fetchImpl)
}

export function getKnowledgeSchema(fetchImpl?: Fetch): Promise<JsonSchema> {
  return requestJson<JsonSchema>('GET', `${BASE}/schema`, undefined, fetchImpl)
}

export function checkReferences(
  kbId: string | null,
  text: string,
  entryId: string | null,
  fetchImpl?: Fetch,
): Promise<ReferenceCheckResponse> {
  return requestJson<ReferenceCheckResponse>(
    'POST',
    `${BASE}/references/check`,
    { kb_id: kbId, text, entry_id: entryId },
    fetchImpl,
  )
}

export function referenceTargets(kbId: string | null, q: string, fetchImpl?: Fetch): Promise<ReferenceTargetList> {
  const params = new URLSearchParams({ q })
  if (kbId) params.set('kb_id', kbId)
  return requestJson<ReferenceTargetList>('GET', `${BASE}/references/targets?${params}`, undefined, fetchImpl)
}

export function testActivation(body: ActivationTestRequest, fetchImpl?: Fetch): Promise<ActivationTestResponse> {
  return requestJson<ActivationTestResponse>('POST', `${BASE}/activation/test`, body, fetchImpl)
}

export function searchKnowledge(
  q: string,
  kbIds: readonly string[] = [],
  topK = 10,
  fetchImpl?: Fetch,
): Promise<SearchResponse> {
  const params = new URLSearchParams({ q, top_k: String(topK) })
  for (const id of kbIds) params.append('kb_id', id)
  return requestJson<SearchResponse>('GET', `${BASE}/search?${params}`, undefined, fetchImpl)
}

export function embeddingProgress(kbId: string, fetchImpl?: Fetch): Promise<EmbeddingProgress> {
  return requestJson<EmbeddingProgress>('GET', `${BASE}/bases/${enc(kbId)}/embedding`, undefined, fetchImpl)
}

export type ExportFormat = 'st-worldinfo' | 'ctkbz'

/** Where the browser downloads a KB from (a plain link: the server names the file). */
/** Where the browser shows entry `entryId`'s image from; `version` (its `content.path`,
 * which changes with every new image) keeps a replaced image out of the cache. */
export function entryMediaUrl(kbId: string, entryId: string, version = ''): string {
  const query = version ? `?v=${enc(version)}` : ''
  return `${BASE}/bases/${enc(kbId)}/entries/${enc(entryId)}/media${query}`
}

/** Attach an image (PNG, JPEG, GIF or WebP, at most 10 MB) to a saved entry: the server
 * stores it in the KB's media/ folder and answers the saved KB. */
export function attachEntryImage(kbId: string, entryId: string, file: File, fetchImpl?: Fetch): Promise<KnowledgeBaseDocument> {
  return postForm<KnowledgeBaseDocument>(`${BASE}/bases/${enc(kbId)}/entries/${enc(entryId)}/media`, { file }, fetchImpl)
}

/** Take an entry's image away: the server saves the entry naming none (its text stays)
 * and deletes the image it stored; answers the saved KB. */
export function removeEntryImage(kbId: string, entryId: string, fetchImpl?: Fetch): Promise<KnowledgeBaseDocument> {
  return requestJson<KnowledgeBaseDocument>('DELETE', `${BASE}/bases/${enc(kbId)}/entries/${enc(entryId)}/media`, undefined, fetchImpl)
}

export function exportUrl(kbId: string, format: ExportFormat): string {
  return `${BASE}/bases/${enc(kbId)}/export?format=${format}`
}

/** Upload a SillyTavern file or a .ctkbz package (multipart, field `file`). A book whose
 * entries a KB here already has is kept once (the report lists it) unless `keep_both`; a
 * card that is a character here already answers its conflict unless `onConflict` says what
 * to do (as on the Characters page). */
/** A package whose vectors came from a model missing here: nothing was written, and the
 * user picks one of `choice.available` to embed it with (sent as `embeddingModel`). */
export class EmbeddingChoiceNeeded extends Error {
  readonly choice: EmbeddingChoice

  constructor(choice: EmbeddingChoice) {
    super(choice.kind)
    this.name = 'EmbeddingChoiceNeeded'
    this.choice = choice
  }
}

export async function importKnowledgeFile(
  file: File,
  scope: 'local' | 'global' = 'local',
  fetchImpl: Fetch = globalThis.fetch.bind(globalThis),
  onDuplicate: 'keep_existing' | 'keep_both' = 'keep_existing',
  onConflict: OnCardConflict = 'ask',
  embeddingModel?: string,
): Promise<CardAnswer<ImportReport>> {
  const fields = { file, scope, on_duplicate: onDuplicate, on_conflict: onConflict, embedding_model: embeddingModel }
  const { res, data } = await fetchForm(`${BASE}/import`, fields, fetchImpl)
  const choice = res.status === 422 && typeof data === 'object' && data !== null ? (data as Partial<EmbeddingChoiceBody>).embedding_choice : undefined
  if (choice) throw new EmbeddingChoiceNeeded(choice)
  return cardAnswer<ImportReport>(res, data)
}
