// Typed calls for /api/chats and /api/presets, and the shapes they carry (the snake_case
// fields of storyloom/chat/*.py models). Hand-written; tests/chatApiTypes.test.ts holds them
// against the schema generated from the server's OpenAPI (src/api/schema.d.ts).
// The chat's WebSocket messages are not hand-written: they are the generated types of the
// server's models (storyloom/server/chat_ws.py, added to the OpenAPI document's components).
//
// Every write that changes a conversation sends `expected_version`; the server answers 409
// when another tab (or a turn) changed it first: `isConflict()` tells the page to reload.
import { ApiError, type Fetch, fetchJson, errorFromBody, requestJson } from './client'
import type { TextPromptView } from './types'
import { type CardAnswer, type OnCardConflict, postCardForm } from './characters'
import type { components } from './schema'
import { listWorkflows } from './workflows'

export type Role = 'user' | 'assistant' | 'system'
export type MessageStatus = 'complete' | 'streaming' | 'partial' | 'error'
export type GenerateKind = 'reply' | 'swipe' | 'continue'

/** A message as the chat view carries it: the stored message plus what the page shows. */
export interface ChatMessage {
  id: string
  conversation_id: string
  parent_id: string | null
  role: Role
  name: string
  content: string
  original?: string | null
  thought?: string | null
  status: MessageStatus
  error?: string | null
  sibling_index: number
  depth: number
  created_at: number
  extra?: Record<string, unknown>
  /** How many siblings (swipes) this message has, itself included. */
  sibling_count: number
  /** The text after display-only regex scripts, when it differs from `content`. */
  display?: string | null
}

export interface RagScope {
  mode: 'self_only' | 'related'
  related_conversations?: string[]
  [extra: string]: unknown
}

export interface ConversationSettings {
  pipeline: string
  user_name: string
  persona: string
  authors_note: string
  authors_note_depth: number
  allow_regex_scripts: boolean
  allow_html_scripts: boolean
  director_enabled: boolean
  rag_fallback_threshold: number
  rag_scope?: RagScope
  summaries?: string[]
  /** The image behind the chat: a file name of the data directory's backgrounds/ (null: none). */
  background?: string | null
  /** The expression sprite picked for this chat (null: the character's default). */
  expression?: string | null
  /** MVU's separate updater: [mvu_update] lore goes to the agent model with the reply. */
  mvu_updater?: boolean
  keyframe_every?: number
  [extra: string]: unknown
}

export interface CharacterSnapshot {
  source_preset?: string | null
  snapshot_created_at?: string
  base_persona?: string
  evolved_persona?: string
  card?: Record<string, unknown>
  [extra: string]: unknown
}

export interface BackgroundSnapshot {
  source_preset?: string | null
  name?: string
  world_setting?: string
  /** `[{index, content}]`, 1-based; the server declares plain objects. */
  story_outline?: Record<string, unknown>[]
  [extra: string]: unknown
}

export interface Conversation {
  id: string
  project_id: string
  title: string
  created_at: number
  updated_at: number
  pointer: string | null
  version: number
  character: CharacterSnapshot
  background?: BackgroundSnapshot | null
  settings: ConversationSettings
  metadata?: Record<string, unknown>
}

export interface ConversationSummary {
  id: string
  project_id: string
  title: string
  character_name: string
  /** The character preset the chat began from: its avatar is `/api/characters/{id}/avatar`. */
  character_id?: string | null
  /** Members of a group chat (0: one character). */
  group_size?: number
  updated_at: number
  message_count: number
  last_message: string
}

/** GET /api/chats/{id}: the conversation, root → pointer, and what lies after the pointer. */
export interface ChatView {
  conversation: Conversation
  messages: ChatMessage[]
  continuation: ChatMessage[]
  running: boolean
  /** With `?tail=N`: how many messages of the path come before the first one sent (a
   * server that ignores `tail` sends the whole path and leaves this out). */
  earlier?: number
  /** The chat plays an MVU card (its state has stat_data, or its card carries MVU's scripts). */
  mvu?: boolean
}

export interface TreeNode {
  id: string
  parent_id: string | null
  role: Role
  name: string
  preview: string
  status: MessageStatus
  sibling_index: number
  depth: number
  on_path: boolean
  /** Hidden from the prompt (SillyTavern's ghost). */
  hidden?: boolean
}

/** An RFC 6902 operation (the delta of one turn). */
export interface PatchOp {
  op: string
  path: string
  value?: unknown
  from?: string
}

export interface MessageState {
  state: Record<string, unknown>
  delta: PatchOp[]
}

export interface BlockSource {
  kind: string
  id?: string | null
  field?: string | null
  /** In English words; the web app says `what` + `values` in the page's language. */
  label?: string
  /** The label's kind (storyloom/chat/prompt/source_label.py SourceWhat). */
  what?: string | null
  values?: Record<string, string | number> | null
  [extra: string]: unknown
}

/** A Skein block as the inspector shows it. */
export interface PromptBlock {
  id: string
  kind: string
  /** A block a custom pipeline made may come without one. */
  role?: string | null
  content: string
  tokens?: number | null
  priority?: number
  depth?: number | null
  message_id?: string | null
  enabled?: boolean
  /** Where the block came from; a block a custom pipeline made may have none. */
  source?: BlockSource | null
  /** The chat:Script runs that changed this block, in order. */
  edited_by?: string[] | null
  [extra: string]: unknown
}

export interface LoreReason {
  rule?: string
  detail?: string
  outcome?: string
  /** The detail's pattern and values, for the page's language (Reason.term); a list is
   * of keys. */
  term?: string
  values?: Record<string, string | number | string[]> | null
  [extra: string]: unknown
}

export interface LoreRecord {
  kb_id: string
  entry_id: string
  title?: string
  activated?: boolean
  placement?: string | null
  tokens?: number
  reasons?: LoreReason[]
  /** Its content is an EJS template (ST-Prompt-Template), rendered for this turn. */
  template?: boolean
  /** Why the template was left as written (TemplateProblem). */
  template_problem?: TemplateProblem | null
  [extra: string]: unknown
}

/** An EJS template left as written: where it is (origin, label), its line, the engine's
 * message, the limit that stopped it. */
export type TemplateProblem = components['schemas']['TemplateProblem']

export interface CutBlock {
  id: string
  kind: string
  tokens: number
  reason: string
  term?: string | null
  values?: Record<string, string | number> | null
}

export interface PromptMessage {
  role: string
  content: string
  name?: string
}

/** What one chat:Script run did to the prompt (storyloom/chat/prompt/skein.py ScriptRun). */
export interface ScriptRunRecord {
  name: string
  language: string
  duration_ms: number
  /** Ids of the blocks it added, removed and changed. */
  added?: string[]
  removed?: string[]
  edited?: string[]
  reordered?: boolean
  /** Variables it set (a removed one: null). */
  variables?: Record<string, unknown>
  /** What it printed. */
  output?: string
}

/** GET .../prompt: what the turn's prompt was made of (the prompt inspector). */
export interface PromptInspection {
  blocks: PromptBlock[]
  lore: LoreRecord[]
  cut: CutBlock[]
  budget?: number | null
  warnings?: string[]
  messages: PromptMessage[]
  /** The chat:Script runs that shaped this prompt, in order. */
  scripts?: ScriptRunRecord[]
  /** The turn's EJS templates left as written, and why. */
  templates?: TemplateProblem[]
  /** On a text-completion API: the one string sent, each piece with its source. */
  text_prompt?: TextPromptView | null
  [extra: string]: unknown
}

export interface CharacterListing {
  id: string
  name: string
  description?: string
  avatar?: string | null
  /** Set when the preset's file could not be read. */
  error?: string | null
}

export interface BackgroundListing {
  background_id: string
  name: string
  description?: string
  [extra: string]: unknown
}

export interface NewChat {
  character_id?: string
  background_id?: string
  title?: string
  user_name?: string
  persona?: string
  /** The persona the chat speaks as (none: the project's default). */
  persona_id?: string
}

export interface SendResult {
  user_message: ChatMessage
  /** The reply, status streaming (its text arrives over the WebSocket); null when none
   * was started (a group chat waiting for the user to pick who speaks). */
  assistant_message?: ChatMessage | null
  version: number
}

/** A message a write made (a reply started, an edit saved) and the version after it. */
export interface TurnResult {
  message: ChatMessage
  version: number
}

export interface StopResult {
  /** The reply as kept (partial); null when none was running. */
  message: ChatMessage | null
  version: number
}

export interface ImportedChat {
  conversation: Conversation
  kind: 'chat' | 'character'
  messages?: number
  siblings?: number
  character_id?: string | null
  warnings?: string[]
}

export interface ContinueFromSummary {
  summary_id?: string
  order?: 'summary_first' | 'last_n_first'
  last_n_turns?: number
  title?: string
}

export interface MemoryProposal {
  evolved_persona: string
  previous: string
  diff: string[]
}

export type ExportFormat = 'sillytavern' | 'personalab'

/** The built-in chat pipeline's workflow id (`ConversationSettings.pipeline` default). */
export const DEFAULT_PIPELINE = 'chat-default'

/** A workflow a conversation can be run with (an entry of `GET /api/workflows`). */
export interface PipelineChoice {
  id: string
  name: string
  /** Shipped with storyloom; the project has no file of its own for it. */
  builtin: boolean
}

// -- the WebSocket's chat messages (generated) ------------------------------------------

type Schemas = components['schemas']

/** Browser → server: `chat:subscribe` / `chat:unsubscribe` one conversation's turns. */
export type ChatSubscribeMessage = Schemas['ChatSubscribe']
/** Server → browser: a message added or finalised (`message` as the chat view has it). */
export type ChatMessageEvent = Schemas['ChatMessageMessage']
/** Server → browser: visible reply text (and thought text) as it arrives. */
export type ChatStreamEvent = Schemas['ChatStreamMessage']
/** Server → browser: the reply ended: complete, or partial/error with why. */
export type ChatDoneEvent = Schemas['ChatDoneMessage']
/** Server → browser: anything else changed the conversation, or the list (`listed`). */
export type ChatChangedEvent = Schemas['ChatChangedMessage']
/** Every `chat:*` message the server sends. */
export type ChatServerMessage = Schemas['ChatServerMessage']

const BASE = '/api/chats'
const PRESETS = '/api/presets'
const enc = encodeURIComponent
const defaultFetch: Fetch = (...args) => globalThis.fetch(...args)

/** True for the server's "someone changed this conversation first" answer. */
export function isConflict(exc: unknown): boolean {
  return exc instanceof ApiError && exc.status === 409
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A list the server may send bare or wrapped in an object under `key`. */
export function listFrom<T>(data: unknown, key: string): T[] {
  if (Array.isArray(data)) return data as T[]
  if (isRecord(data) && Array.isArray(data[key])) return data[key] as T[]
  return []
}

/** The id of the conversation an answer names: a Conversation, a ChatView or an import report. */
export function conversationIdFrom(data: unknown): string | null {
  if (!isRecord(data)) return null
  if (typeof data.conversation_id === 'string') return data.conversation_id
  if (isRecord(data.conversation) && typeof data.conversation.id === 'string') return data.conversation.id
  if (typeof data.id === 'string') return data.id
  return null
}

// -- conversations ----------------------------------------------------------------------

export async function listChats(fetchImpl?: Fetch): Promise<ConversationSummary[]> {
  return listFrom<ConversationSummary>(await requestJson<unknown>('GET', BASE, undefined, fetchImpl), 'conversations')
}

export function createChat(body: NewChat, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>('POST', BASE, body, fetchImpl)
}

/** A SillyTavern .jsonl chat or a character card (PNG/JSON/CHARX) → a new conversation. A
 * card that is a character here already answers its conflict unless `onConflict` says
 * what to do (as on the Characters page). */
export function importChat(file: File, onConflict: OnCardConflict = 'ask', fetchImpl: Fetch = defaultFetch): Promise<CardAnswer<ImportedChat>> {
  return postCardForm<ImportedChat>(`${BASE}/import`, { file, on_conflict: onConflict }, fetchImpl)
}

/** The conversation; `tail` asks for only the last messages of the path (see ChatView). */
export function getChat(id: string, tail?: number, fetchImpl?: Fetch): Promise<ChatView> {
  const query = tail ? `?tail=${tail}` : ''
  return requestJson<ChatView>('GET', `${BASE}/${enc(id)}${query}`, undefined, fetchImpl)
}

export function patchChat(
  id: string,
  body: { expected_version: number; title?: string; settings?: ConversationSettings },
  fetchImpl?: Fetch,
): Promise<Conversation> {
  return requestJson<Conversation>('PATCH', `${BASE}/${enc(id)}`, body, fetchImpl)
}

export async function deleteChat(id: string, fetchImpl: Fetch = defaultFetch): Promise<void> {
  const { res, data } = await fetchJson('DELETE', `${BASE}/${enc(id)}`, undefined, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
}

// -- turns ------------------------------------------------------------------------------

export function sendMessage(id: string, text: string, expectedVersion: number, fetchImpl?: Fetch): Promise<SendResult> {
  return requestJson<SendResult>('POST', `${BASE}/${enc(id)}/messages`, { text, expected_version: expectedVersion }, fetchImpl)
}

/**
 * Start a reply. `reply`: under `parent_id` (default: the pointer). `swipe` (and retry): a
 * new sibling of the assistant message `message_id`. `continue`: more of `message_id`.
 */
export function generate(
  id: string,
  body: { kind: GenerateKind; parent_id?: string | null; message_id?: string | null; expected_version: number },
  fetchImpl?: Fetch,
): Promise<TurnResult> {
  return requestJson<TurnResult>('POST', `${BASE}/${enc(id)}/generate`, body, fetchImpl)
}

export function stopGeneration(id: string, fetchImpl?: Fetch): Promise<StopResult> {
  return requestJson<StopResult>('POST', `${BASE}/${enc(id)}/stop`, undefined, fetchImpl)
}

export function setPointer(id: string, messageId: string | null, expectedVersion: number, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>('POST', `${BASE}/${enc(id)}/pointer`, { message_id: messageId, expected_version: expectedVersion }, fetchImpl)
}

export function swipe(id: string, messageId: string, toIndex: number, expectedVersion: number, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>(
    'POST',
    `${BASE}/${enc(id)}/swipe`,
    { message_id: messageId, to_index: toIndex, expected_version: expectedVersion },
    fetchImpl,
  )
}

/** `in_place`: rewrite the message and keep what follows (the old text becomes a version);
 * `branch`: a new sibling with the new text. */
export type EditMode = 'in_place' | 'branch'

export function editMessage(
  id: string,
  messageId: string,
  content: string,
  expectedVersion: number,
  mode: EditMode = 'branch',
  fetchImpl?: Fetch,
): Promise<TurnResult> {
  return requestJson<TurnResult>(
    'POST',
    `${BASE}/${enc(id)}/messages/${enc(messageId)}/edit`,
    { content, mode, expected_version: expectedVersion },
    fetchImpl,
  )
}

/** An earlier version of a message's text (0 = the oldest) becomes its text again. */
export function restoreVersion(id: string, messageId: string, index: number, expectedVersion: number, fetchImpl?: Fetch): Promise<TurnResult> {
  return requestJson<TurnResult>(
    'POST',
    `${BASE}/${enc(id)}/messages/${enc(messageId)}/restore`,
    { index, expected_version: expectedVersion },
    fetchImpl,
  )
}

/** Hide a message from the prompt (SillyTavern's ghost) or show it to the model again. */
export function setHidden(id: string, messageId: string, hidden: boolean, expectedVersion: number, fetchImpl?: Fetch): Promise<TurnResult> {
  return requestJson<TurnResult>(
    'POST',
    `${BASE}/${enc(id)}/messages/${enc(messageId)}/hidden`,
    { hidden, expected_version: expectedVersion },
    fetchImpl,
  )
}

// -- MVU's actions (storyloom/chat/service/mvu_actions.py) ---------------------------------

/** Re-parse a reply: its update blocks applied again to its parent's state. */
export function mvuReparse(id: string, messageId: string, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>('POST', `${BASE}/${enc(id)}/messages/${enc(messageId)}/mvu/reparse`, {}, fetchImpl)
}

/** Replay: every reply from this message to the pointer re-parsed in order. */
export function mvuReplay(id: string, messageId: string, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>('POST', `${BASE}/${enc(id)}/messages/${enc(messageId)}/mvu/replay`, {}, fetchImpl)
}

export type MvuChatAction = 'reinitialise' | 'snapshot' | 'clear-old'

/** Re-initialise, snapshot, or clear the variables of messages older than `keep`. */
export function mvuChatAction(id: string, action: MvuChatAction, keep = 10, fetchImpl?: Fetch): Promise<unknown> {
  const body = action === 'clear-old' ? { keep } : {}
  return requestJson<unknown>('POST', `${BASE}/${enc(id)}/mvu/${action}`, body, fetchImpl)
}

export interface TokenCounts {
  counts: Record<string, number>
  tokenizer: string
}

/** Tokens of each message's text, counted for the user model. */
export function tokenCounts(id: string, messageIds: string[], fetchImpl?: Fetch): Promise<TokenCounts> {
  return requestJson<TokenCounts>('POST', `${BASE}/${enc(id)}/token-counts`, { message_ids: messageIds }, fetchImpl)
}

export async function deleteMessage(id: string, messageId: string, expectedVersion: number, fetchImpl: Fetch = defaultFetch): Promise<void> {
  const path = `${BASE}/${enc(id)}/messages/${enc(messageId)}?expected_version=${expectedVersion}`
  const { res, data } = await fetchJson('DELETE', path, undefined, fetchImpl)
  if (!res.ok) throw errorFromBody(res.status, res.statusText, data)
}

// -- inspection -------------------------------------------------------------------------

export async function getTree(id: string, fetchImpl?: Fetch): Promise<TreeNode[]> {
  return listFrom<TreeNode>(await requestJson<unknown>('GET', `${BASE}/${enc(id)}/tree`, undefined, fetchImpl), 'nodes')
}

export function getMessageState(id: string, messageId: string, fetchImpl?: Fetch): Promise<MessageState> {
  return requestJson<MessageState>('GET', `${BASE}/${enc(id)}/messages/${enc(messageId)}/state`, undefined, fetchImpl)
}

/** The prompt inspector of a reply. */
export function getMessagePrompt(id: string, messageId: string, fetchImpl?: Fetch): Promise<PromptInspection> {
  return requestJson<PromptInspection>('GET', `${BASE}/${enc(id)}/messages/${enc(messageId)}/prompt`, undefined, fetchImpl)
}

/** Where the browser downloads a branch from (a plain link: the server names the file). */
export function exportUrl(id: string, format: ExportFormat): string {
  return `${BASE}/${enc(id)}/export?format=${format}`
}

// -- PersonaLab -------------------------------------------------------------------------

export function proposeMemory(id: string, fetchImpl?: Fetch): Promise<MemoryProposal> {
  return requestJson<MemoryProposal>('POST', `${BASE}/${enc(id)}/memory`, undefined, fetchImpl)
}

export function acceptMemory(id: string, evolvedPersona: string, expectedVersion: number, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>(
    'POST',
    `${BASE}/${enc(id)}/memory/accept`,
    { evolved_persona: evolvedPersona, expected_version: expectedVersion },
    fetchImpl,
  )
}

export function summarise(id: string, fetchImpl?: Fetch): Promise<unknown> {
  return requestJson<unknown>('POST', `${BASE}/${enc(id)}/summarise`, undefined, fetchImpl)
}

export function continueFromSummary(id: string, body: ContinueFromSummary = {}, fetchImpl?: Fetch): Promise<Conversation> {
  return requestJson<Conversation>('POST', `${BASE}/${enc(id)}/continue-from-summary`, body, fetchImpl)
}

// -- presets ----------------------------------------------------------------------------

export async function listCharacters(fetchImpl?: Fetch): Promise<CharacterListing[]> {
  return listFrom<CharacterListing>(await requestJson<unknown>('GET', `${PRESETS}/characters`, undefined, fetchImpl), 'characters')
}

export async function listBackgrounds(fetchImpl?: Fetch): Promise<BackgroundListing[]> {
  return listFrom<BackgroundListing>(await requestJson<unknown>('GET', `${PRESETS}/backgrounds`, undefined, fetchImpl), 'backgrounds')
}

// -- chat pipelines (workflows) ---------------------------------------------------------

/**
 * The workflows a conversation's `settings.pipeline` may name: the built-in chat pipeline
 * first (added when the server does not list it), then the project's. A SillyTavern
 * chat-completion preset becomes one with `importStPreset` (api/workflows.ts).
 */
export async function listPipelines(fetchImpl?: Fetch): Promise<PipelineChoice[]> {
  const { workflows } = await listWorkflows(fetchImpl)
  const out: PipelineChoice[] = []
  for (const entry of workflows ?? []) {
    if (typeof entry.id !== 'string' || out.some((p) => p.id === entry.id)) continue
    out.push({ id: entry.id, name: entry.name || entry.id, builtin: entry.builtin === true })
  }
  const builtin = out.filter((p) => p.builtin)
  const own = out.filter((p) => !p.builtin)
  if (!out.some((p) => p.id === DEFAULT_PIPELINE)) builtin.unshift({ id: DEFAULT_PIPELINE, name: DEFAULT_PIPELINE, builtin: true })
  return [...builtin, ...own]
}

// -- the prompt manager ------------------------------------------------------------------

export type PromptRole = 'system' | 'user' | 'assistant'

/** One prompt of a chat-completion preset (`prompts[]`); other fields ride along. */
export interface PresetPrompt {
  identifier: string
  name?: string
  role?: PromptRole
  content?: string
  system_prompt?: boolean
  marker?: boolean
  /** 0: in the prompt's order; 1: in the chat, at `injection_depth`. */
  injection_position?: 0 | 1
  injection_depth?: number
  injection_order?: number
  [extra: string]: unknown
}

export interface PromptOrderEntry {
  identifier: string
  enabled?: boolean
  [extra: string]: unknown
}

export interface PromptDefaults {
  prompts: PresetPrompt[]
  prompt_order: PromptOrderEntry[]
}

/** SillyTavern's default prompts and order: what the chat pipeline uses where its Skein
 * Builder's config leaves them out. */
export function getPromptDefaults(fetchImpl?: Fetch): Promise<PromptDefaults> {
  return requestJson<PromptDefaults>('GET', '/api/presets/prompt-defaults', undefined, fetchImpl)
}

// -- sandboxed frames ---------------------------------------------------------------------

/** What the chat's frames may do: the character's answers and its allowed scripts. */
export type FrameAccess = Schemas['FrameAccess']

export function getFrameAccess(id: string, fetchImpl?: Fetch): Promise<FrameAccess> {
  return requestJson<FrameAccess>('GET', `${BASE}/${enc(id)}/frame`, undefined, fetchImpl)
}

export type MessageVariables = Schemas['MessageVariables']

/** A message's variables, its parent's and the change between them (what a frame reads). */
export function getMessageVariables(id: string, messageId: string, fetchImpl?: Fetch): Promise<MessageVariables> {
  return requestJson<MessageVariables>('GET', `${BASE}/${enc(id)}/messages/${enc(messageId)}/variables`, undefined, fetchImpl)
}

/** Replace the chat variables after a message (a frame's write, where allowed). */
export function setMessageVariables(id: string, messageId: string, variables: Record<string, unknown>, fetchImpl?: Fetch): Promise<MessageState> {
  return requestJson<MessageState>('PUT', `${BASE}/${enc(id)}/messages/${enc(messageId)}/variables`, { variables }, fetchImpl)
}
