// Typed calls for /api/writing (the long-form writing studio) and the shapes they carry:
// the camelCase JSON of storyloom/server/writing_api.py. Those marked below are generated
// from the server's models; the rest were written by hand from the contract.
import { type Fetch, postForm, requestJson } from './client'
import type { components } from './schema'

export type Level = 'L0' | 'L1' | 'L2'
export const LEVELS: readonly Level[] = ['L0', 'L1', 'L2']

export type FactCategory = FactView['category']

export interface BookSummary {
  id: string
  title: string
  language: string
  stateVersion: number
  chapters: number
  words: number
}

export interface SceneNode {
  path: string
  title: string
  words: number
}

export interface ChapterNode {
  path: string
  ordinal: number
  title: string
  words: number
  scenes: SceneNode[]
}

export interface ArcNode {
  path: string
  title: string
  words: number
  chapters: ChapterNode[]
}

export interface ResNode {
  path: string
  uri: string
  kind: string
  title: string
}

export interface BookTree {
  manuscript: ArcNode[]
  meta: ResNode[]
  entities: ResNode[]
  summaries: ResNode[]
  profiles: ResNode[]
}

// Generated from the server's models: a resource at a chapter (its levels, their versions,
// its relations, the facts it holds with the sentence and source of each, and the ones the
// author rejected).
export type LevelView = components['schemas']['LevelView']
export type HistoryRow = components['schemas']['LevelVersion']
export type RelationView = components['schemas']['RelationView']
export type FactView = components['schemas']['FactView']
export type ResourceView = components['schemas']['ResourceView']

export interface GraphNode {
  path: string
  title: string
  kind: string
}

export interface GraphEdge {
  from: string
  to: string
  kind: string
  reason: string
  chapter: number
}

export interface BookGraph {
  nodes: GraphNode[]
  edges: GraphEdge[]
}

// Generated from the server's models: what a context address names (a chapter's number
// and title, an entity's name), and which model plans, checks and curates.
export type SourceLabel = components['schemas']['SourceLabel']
export type WritingModelView = components['schemas']['WritingModelView']

export interface ContextPieceView {
  uri: string
  path: string
  label: SourceLabel
  level: Level
  version: number
  reason: string
  tokens: number
  text: string
}

export interface AssembledContextView {
  text: string
  tokens: number
  budgetTokens: number
  stateVersion: number
  pieces: ContextPieceView[]
}

export interface ContextRequestBody {
  chapter: number
  prompt?: string
  outline?: string
  sceneType?: 'any' | 'dialogue' | 'action' | 'emotional' | 'exposition'
  budgetTokens?: number
}

/** A piece of a node's context as `node:completed.contextSources` names it. */
export interface ContextSourceRef {
  uri: string
  level: string
  version?: number | null
  reason?: string
}

// Generated from the server's model: a new curation state or field reaches the page as is.
export type OutputStatus = components['schemas']['OutputView']
export type StepState = OutputStatus['steps'][string]
export type StepReason = components['schemas']['StepReason']

// Generated from the server's model: what the book established (value, chapter, the
// sentence that said so) beside what the checked text says.
export type WarningView = components['schemas']['ConsistencyWarning']

export interface ThreadView {
  path: string
  title: string
  planted: number | null
  due: number | null
  paidOff: number | null
  overdue: boolean
}

export interface ImportChapter {
  title: string
  text: string
  words: number
}

export interface ImportPreview {
  format: string
  title: string
  chapters: ImportChapter[]
}

export type ExportFormat = 'markdown' | 'docx' | 'epub'

const BASE = '/api/writing'
const enc = encodeURIComponent
const book = (id: string) => `${BASE}/books/${enc(id)}`

export function listBooks(fetchImpl?: Fetch): Promise<BookSummary[]> {
  return requestJson<BookSummary[]>('GET', `${BASE}/books`, undefined, fetchImpl)
}

export function createBook(title: string, language?: string, fetchImpl?: Fetch): Promise<BookSummary> {
  return requestJson<BookSummary>('POST', `${BASE}/books`, language ? { title, language } : { title }, fetchImpl)
}

export function deleteBook(bookId: string, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('DELETE', book(bookId), undefined, fetchImpl)
}

export function getTree(bookId: string, fetchImpl?: Fetch): Promise<BookTree> {
  return requestJson<BookTree>('GET', `${book(bookId)}/tree`, undefined, fetchImpl)
}

export function getResource(bookId: string, path: string, asOf?: number | null, fetchImpl?: Fetch): Promise<ResourceView> {
  const params = new URLSearchParams({ path })
  if (asOf !== undefined && asOf !== null) params.set('asOf', String(asOf))
  return requestJson<ResourceView>('GET', `${book(bookId)}/resource?${params}`, undefined, fetchImpl)
}

/** What saving a chapter answers: the chapter, and the output its curation follows. */
export interface ChapterSaved {
  chapter: ChapterNode
  outputId: string
  created: boolean
}

export function saveChapter(bookId: string, ordinal: number, text: string, fetchImpl?: Fetch): Promise<ChapterSaved> {
  return requestJson<ChapterSaved>('PUT', `${book(bookId)}/chapters/${ordinal}`, { text }, fetchImpl)
}

export function getGraph(bookId: string, asOf?: number | null, fetchImpl?: Fetch): Promise<BookGraph> {
  const query = asOf !== undefined && asOf !== null ? `?asOf=${asOf}` : ''
  return requestJson<BookGraph>('GET', `${book(bookId)}/graph${query}`, undefined, fetchImpl)
}

export function assembleContext(bookId: string, body: ContextRequestBody, fetchImpl?: Fetch): Promise<AssembledContextView> {
  return requestJson<AssembledContextView>('POST', `${book(bookId)}/context`, body, fetchImpl)
}

export function rebuildContext(
  bookId: string,
  sources: { uri: string; level: string; version?: number | null }[],
  fetchImpl?: Fetch,
): Promise<{ text: string }> {
  return requestJson<{ text: string }>('POST', `${book(bookId)}/context/rebuild`, { sources }, fetchImpl)
}

export function contextLabels(bookId: string, uris: string[], fetchImpl?: Fetch): Promise<SourceLabel[]> {
  return requestJson<SourceLabel[]>('POST', `${book(bookId)}/context/labels`, { uris }, fetchImpl)
}

export function getAgentModel(fetchImpl?: Fetch): Promise<WritingModelView> {
  return requestJson<WritingModelView>('GET', `${BASE}/agent-model`, undefined, fetchImpl)
}

export function listOutputs(bookId: string, fetchImpl?: Fetch): Promise<OutputStatus[]> {
  return requestJson<OutputStatus[]>('GET', `${book(bookId)}/outputs`, undefined, fetchImpl)
}

export function retryOutput(outputId: string, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('POST', `${BASE}/outputs/${enc(outputId)}/retry`, undefined, fetchImpl)
}

export function listWarnings(bookId: string, chapter?: number, fetchImpl?: Fetch): Promise<WarningView[]> {
  const query = chapter !== undefined ? `?chapter=${chapter}` : ''
  return requestJson<WarningView[]>('GET', `${book(bookId)}/warnings${query}`, undefined, fetchImpl)
}

export function markIntentional(warningId: number, intentional: boolean, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('POST', `${BASE}/warnings/${warningId}/intentional`, { intentional }, fetchImpl)
}

export function listThreads(bookId: string, fetchImpl?: Fetch): Promise<ThreadView[]> {
  return requestJson<ThreadView[]>('GET', `${book(bookId)}/threads`, undefined, fetchImpl)
}

export function previewImport(file: File, fetchImpl?: Fetch): Promise<ImportPreview> {
  return postForm<ImportPreview>(`${BASE}/import/preview`, { file }, fetchImpl)
}

// Generated from the server's model: the curation an import started (one output per
// chapter with text), whose `curation:progress` the page follows. The tree is read as
// `getTree` reads it (the generated Tree marks its defaulted lists optional).
export type CurationStarted = components['schemas']['CurationStarted']
export type ImportedChapters = Omit<components['schemas']['ImportedChapters'], 'tree'> & { tree: BookTree }

export function importChapters(
  bookId: string,
  chapters: { title: string; text: string }[],
  arc?: string,
  fetchImpl?: Fetch,
): Promise<ImportedChapters> {
  return requestJson<ImportedChapters>('POST', `${book(bookId)}/import`, arc ? { chapters, arc } : { chapters }, fetchImpl)
}

export function chapterWorkflow(bookId: string, fetchImpl?: Fetch): Promise<{ workflowId: string }> {
  return requestJson<{ workflowId: string }>('POST', `${book(bookId)}/chapter-workflow`, undefined, fetchImpl)
}

/** The address of the book's export (a download the browser follows). */
export function exportUrl(bookId: string, format: ExportFormat): string {
  return `${book(bookId)}/export?format=${format}`
}

/** An author's edit of a resource (created when new); `level` and `text` go together and
 * make a new version of that level. */
export interface ResourceEditBody {
  path: string
  kind: string
  title: string
  aliases?: string[]
  attrs?: Record<string, unknown>
  level?: Level
  text?: string
}

export function putResource(bookId: string, body: ResourceEditBody, fetchImpl?: Fetch): Promise<ResourceView> {
  return requestJson<ResourceView>('PUT', `${book(bookId)}/resource`, body, fetchImpl)
}

export function addChapter(bookId: string, title: string, fetchImpl?: Fetch): Promise<ChapterNode> {
  return requestJson<ChapterNode>('POST', `${book(bookId)}/chapters`, { title }, fetchImpl)
}

export interface SearchHit {
  path: string
  uri: string
  level: Level
  score: number
  title: string
}

export interface SearchBody {
  query: string
  under?: string
  levels?: Level[]
  topK?: number
  asOf?: number
}

export function searchBook(bookId: string, body: SearchBody, fetchImpl?: Fetch): Promise<SearchHit[]> {
  return requestJson<SearchHit[]>('POST', `${book(bookId)}/search`, body, fetchImpl)
}

// -- the author's corrections of memory ---------------------------------------------------------

export type FactList = components['schemas']['FactList']
export type NewFactBody = components['schemas']['NewFact']
export type FactEditBody = components['schemas']['FactEdit']
export type FactRefBody = components['schemas']['FactRef']

export function addFact(bookId: string, body: NewFactBody, fetchImpl?: Fetch): Promise<FactList> {
  return requestJson<FactList>('POST', `${book(bookId)}/facts`, body, fetchImpl)
}

export function editFact(bookId: string, body: FactEditBody, fetchImpl?: Fetch): Promise<FactList> {
  return requestJson<FactList>('PUT', `${book(bookId)}/facts`, body, fetchImpl)
}

export function rejectFact(bookId: string, body: FactRefBody, fetchImpl?: Fetch): Promise<FactList> {
  return requestJson<FactList>('POST', `${book(bookId)}/facts/reject`, body, fetchImpl)
}

export function unrejectFact(bookId: string, body: FactRefBody, fetchImpl?: Fetch): Promise<FactList> {
  return requestJson<FactList>('POST', `${book(bookId)}/facts/unreject`, body, fetchImpl)
}

/** Two names for one entity: `from` goes, `into` keeps; answers `into`'s view. */
export function mergeEntities(bookId: string, from: string, into: string, fetchImpl?: Fetch): Promise<ResourceView> {
  return requestJson<ResourceView>('POST', `${book(bookId)}/entities/merge`, { from, into }, fetchImpl)
}
