// The logic behind Settings → Connections and the connection selects, kept free of Vue so
// it can be unit-tested. A connection's form is the role form (settingsForm.ts: address,
// model, write-only key, API, templates, samplers, context, local model) plus its name.
import type { ChatEndpointUpdate, ChatEndpointView } from '../api/types'
import { type Built, buildChatUpdate, type ChatForm, chatFormFromView } from './settingsForm'

export const CONNECTION_NAME_MAX = 80

/** A connection as a new one starts: the server's defaults. */
export const NEW_CONNECTION: ChatEndpointView = {
  api: 'chat',
  api_key_set: false,
  base_url: '',
  model: '',
  connect_timeout_s: 10,
  timeout_s: 120,
  max_retries: 2,
  instruct_template: '',
  context_template: '',
  tokenizer: 'auto',
  parameters: {},
  local_model: null,
  context_window: null,
  reasoning_prefix: '<think>',
  reasoning_suffix: '</think>',
  token_encoding: null,
  tokenizer_model: null,
  vision: false,
}

export interface ConnectionForm extends ChatForm {
  name: string
}

export function connectionFormFromView(name: string, view: ChatEndpointView): ConnectionForm {
  return { ...chatFormFromView(view), name }
}

/** Why a name cannot be a connection's (an i18n key), or null when it can. */
export function connectionNameProblem(name: string, taken: readonly string[] = []): string | null {
  if (!name) return 'connections.errors.nameEmpty'
  if (name !== name.trim()) return 'connections.errors.nameSpaces'
  if (name.length > CONNECTION_NAME_MAX) return 'connections.errors.nameLong'
  // eslint-disable-next-line no-control-regex
  if (name.includes('/') || /[\u0000-\u001f\u007f]/.test(name)) return 'connections.errors.nameChars'
  if (taken.includes(name)) return 'connections.errors.nameTaken'
  return null
}

export interface BuiltConnection extends Built<ChatEndpointUpdate> {
  /** An i18n key when the name does not fit. */
  nameError: string | null
}

/** The update a form saves; `taken` are the other connections' names (a new one must not
 * reuse one). */
export function buildConnectionUpdate(
  base: ChatEndpointView,
  form: ConnectionForm,
  taken: readonly string[] = [],
): BuiltConnection {
  const built = buildChatUpdate(base, form)
  return {
    update: {
      ...built.update,
      // Typed here (the role form picks them from a list): a pasted name's spaces go.
      instruct_template: form.instruct_template.trim(),
      context_template: form.context_template.trim(),
    },
    errors: built.errors,
    nameError: connectionNameProblem(form.name, taken),
  }
}

export interface ConnectionChoice {
  name: string
  /** Chosen before, but no connection has that name now (deleted or renamed). */
  missing: boolean
}

/** What a connection select offers: every connection, and the current pick even when it
 * is gone (so the page shows what is chosen; a turn with it fails naming it). */
export function connectionChoices(names: readonly string[], current: string | null | undefined, loaded = true): ConnectionChoice[] {
  const list = [...names].sort((a, b) => a.localeCompare(b)).map((name) => ({ name, missing: false }))
  if (current && !names.includes(current)) list.push({ name: current, missing: loaded })
  return list
}

/** A card's `extensions` with `storyloom.connection` set to `name` (removed for null). */
export function withCardConnection(extensions: Record<string, unknown>, name: string | null): Record<string, unknown> {
  const ours = typeof extensions.storyloom === 'object' && extensions.storyloom !== null ? { ...(extensions.storyloom as Record<string, unknown>) } : {}
  if (name) ours.connection = name
  else delete ours.connection
  const next = { ...extensions }
  if (Object.keys(ours).length) next.storyloom = ours
  else delete next.storyloom
  return next
}

/** The connection a card names, or null. */
export function cardConnection(extensions: Record<string, unknown> | null | undefined): string | null {
  const ours = extensions?.storyloom
  const named = typeof ours === 'object' && ours !== null ? (ours as Record<string, unknown>).connection : null
  return typeof named === 'string' && named ? named : null
}
