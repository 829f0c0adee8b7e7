// The chat page's half of the frame bridge: what a card's HTML (a status bar, a front-end
// card) and its allowed Tavern Helper scripts may ask of the chat, over postMessage.
//
// Each frame runs with `sandbox="allow-scripts"` and nothing else (an opaque origin: no
// cookies, no storage of this page, no DOM of it) and a CSP that allows no network unless
// the character's card was allowed it. The frame's first script is the prelude
// (framePrelude.js) with the frame's config: its id, a random nonce, and the data it may
// read (the chat's messages, the variables of its message and of the chat). The page
// answers a request only when it comes from that frame's own window with that frame's id
// and nonce, and answers writes only where the character's `frame_writes` is on. Nothing
// else is offered: no token, no fetch, no storage of the app.
import prelude from './framePrelude.js?raw'

export const FRAME_CALL = 'storyloom:call'
export const FRAME_REPLY = 'storyloom:reply'
export const FRAME_SYNC = 'storyloom:sync'
export const FRAME_EVENT = 'storyloom:event'
export const FRAME_HEIGHT = 'storyloom:height'
/** A frame's own document finished loading (framePrelude.js sends it on `load`). */
export const FRAME_LOADED = 'storyloom:loaded'

/** A message as Tavern Helper's `getChatMessages` gives it (its id is its index). */
export interface FrameMessage {
  message_id: number
  name: string
  role: 'system' | 'assistant' | 'user'
  is_hidden: boolean
  message: string
  extra: Record<string, unknown>
}

export type Variables = Record<string, unknown>

/** What the prelude gets: who the frame is, and what it may read. */
export interface FrameConfig {
  frame: string
  nonce: string
  /** The message the frame belongs to (null: a script frame, which follows the newest). */
  messageId: number | null
  lastMessageId: number
  messages: FrameMessage[]
  /** Message index (as text) → that message's variables with MVU's views. */
  data: Record<string, Variables>
  chat: Variables
  global: Variables
  character: Variables
  card: Record<string, unknown>
  charName: string
  userName: string
}

/** A request from a frame. */
export interface FrameCall {
  fn: string
  args: Record<string, unknown>
}

/** What the page does for a frame's allowed requests. */
export interface FrameHandlers {
  writes: () => boolean
  /** Replace a message's variables; answers what was saved. */
  replaceVariables: (messageIndex: number, variables: Variables) => Promise<Variables>
  sendMessage: (text: string) => Promise<void>
}

export class FrameDenied extends Error {}

/** Answer one request (a rejected promise says why, in words the card's author reads). */
export async function answerCall(call: FrameCall, handlers: FrameHandlers): Promise<unknown> {
  switch (call.fn) {
    case 'replaceVariables': {
      if (!handlers.writes()) throw new FrameDenied('storyloom: this character may not change variables (allow it on the character page)')
      const type = call.args.type
      if (type !== 'message' && type !== 'chat') throw new FrameDenied(`storyloom: ${String(type)} variables cannot be changed from a frame`)
      const index = call.args.message_id
      const variables = call.args.variables
      if (typeof index !== 'number' || !isObject(variables)) throw new FrameDenied('storyloom: replaceVariables needs an object of variables')
      return handlers.replaceVariables(index, variables)
    }
    case 'sendMessage': {
      if (!handlers.writes()) throw new FrameDenied('storyloom: this character may not send messages (allow it on the character page)')
      const text = call.args.text
      if (typeof text !== 'string' || !text.trim()) throw new FrameDenied('storyloom: nothing to send')
      await handlers.sendMessage(text)
      return null
    }
    default:
      throw new FrameDenied(`storyloom: ${call.fn} is not offered to frames`)
  }
}

function isObject(value: unknown): value is Variables {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** A random nonce for one frame. */
export function frameNonce(): string {
  const bytes = new Uint8Array(16)
  crypto.getRandomValues(bytes)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

// -- MVU's views of a message's variables -----------------------------------------------------

function leafAt(root: unknown, path: string[]): unknown {
  let at = root
  for (const key of path) {
    if (at === null || typeof at !== 'object') return undefined
    at = (at as Record<string, unknown>)[key]
  }
  return at
}

function setAt(root: Variables, path: string[], value: unknown): void {
  let at: Record<string, unknown> = root
  for (const key of path.slice(0, -1)) {
    const next = at[key]
    if (next === null || typeof next !== 'object') at[key] = {}
    at = at[key] as Record<string, unknown>
  }
  at[path[path.length - 1]!] = value
}

function pointer(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
}

function shown(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value)
}

/** MVU's ValueWithDescription: a scalar value and the text that tells the model about it. */
function isValuePair(value: unknown): value is [unknown, string] {
  return Array.isArray(value) && value.length === 2 && typeof value[1] === 'string' && (value[0] === null || typeof value[0] !== 'object')
}

function valueOf(leaf: unknown): unknown {
  return isValuePair(leaf) ? leaf[0] : leaf
}

const EXTENSIBLE_MARKER = '$__META_EXTENSIBLE__$'
const MVU_STRUCTURE = '$mvu_schema'

/** `value` without MVU's `$meta` keys and `$__META_EXTENSIBLE__$` array elements. */
export function withoutMvuMetadata(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((item) => item !== EXTENSIBLE_MARKER).map(withoutMvuMetadata)
  if (!isObject(value)) return value
  return Object.fromEntries(Object.entries(value).filter(([key]) => key !== '$meta').map(([key, item]) => [key, withoutMvuMetadata(item)]))
}

/** A message's variables as MVU keeps them on the message: `stat_data` as it is,
 * `display_data` (stat_data with each changed variable shown "old->new", a
 * [value, description] pair replaced by that text) and `delta_data` (only the changed
 * variables, shown the same way), from the RFC 6902 `delta` of the state
 * (parent → this message) and the parent's variables. */
export function messageVariables(variables: Variables, parent: Variables, delta: readonly Record<string, unknown>[]): Variables {
  const out: Variables = structuredClone(variables)
  // storyloom's own record of an MVU chat's structure rules (MVU's `schema`): not the
  // card's to read, and kept by the server when a frame replaces the variables
  delete out[MVU_STRUCTURE]
  if (!isObject(out.stat_data)) return out
  // MVU takes `$meta` and its array marker out of stat_data once read; a chat started
  // before storyloom did the same may still hold them: a frame never sees them
  const stat = withoutMvuMetadata(out.stat_data) as Variables
  out.stat_data = stat
  const display: Variables = structuredClone(stat)
  const changed: Variables = {}
  for (const op of delta) {
    if (typeof op.path !== 'string' || !op.path.startsWith('/variables/stat_data/')) continue
    let path = pointer(op.path).slice(2)
    if (!path.length) continue
    // MVU's [value, description] pair is one variable: a change to its value (the pair
    // or its first element) shows at the pair's path, as MVU's own display does
    const holder = path.slice(0, -1)
    if (holder.length && path[path.length - 1] === '0' && (isValuePair(leafAt(stat, holder)) || isValuePair(leafAt(parent.stat_data, holder)))) path = holder
    const before = valueOf(leafAt(parent.stat_data, path))
    const after = valueOf(leafAt(stat, path))
    if (after !== null && typeof after === 'object') continue // a new branch: shown as it is
    const text = op.op === 'remove' ? `${shown(before)}->` : before === undefined ? shown(after) : `${shown(before)}->${shown(after)}`
    setAt(changed, path, text)
    if (op.op !== 'remove') setAt(display, path, text)
  }
  out.display_data = display
  out.delta_data = changed
  return out
}

// -- the frame's document ---------------------------------------------------------------------

/** The CSP of a frame: no network at all unless the character's card was allowed it
 * (then https for images, styles, fonts, scripts and requests). */
export function framePolicy(scripts: boolean, network: boolean): string {
  const net = network ? ' https:' : ''
  return [
    "default-src 'none'",
    scripts ? `script-src 'unsafe-inline' 'unsafe-eval'${net}` : "script-src 'none'",
    `style-src 'unsafe-inline'${net}`,
    `img-src data: blob:${net}`,
    `font-src data:${net}`,
    `media-src data: blob:${net}`,
    `connect-src${network ? net : " 'none'"}`,
    "form-action 'none'",
  ].join('; ')
}

function inlineJson(value: unknown): string {
  // Inside <script>: no "</script>" nor "<!--" can close or bend it.
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

/** The scripts every scripted frame starts with: the libraries cards assume (`_`, `$`)
 * when loaded, then the bridge's prelude with the frame's config. */
export function bridgeScripts(config: FrameConfig, libraries: string): string {
  return `${libraries}<script>${prelude}(${inlineJson(config)})</script>`
}
