// What the chat tells the user about its card and its newest reply, so that nothing is
// silently inactive: the card's scripts that do not run in this chat (regex switched off
// here, scripts in its pages off, Tavern Helper scripts not allowed for the character),
// and the lore entries the budget cut from the newest reply's prompt (`extra.lore_cut`,
// put there by the server: storyloom/chat/store/snapshot.py LoreCut).
import type { CardScripts } from '../api/characters'
import type { ChatMessage, ConversationSettings } from '../api/chat'

export interface ScriptsOff {
  /** Regex scripts the card ships switched on, while the chat's regex switch is off. */
  regexOff: number
  /** Regex scripts that draw a page with scripts, while the chat's page scripts are off. */
  framesOff: number
  /** Tavern Helper scripts: those storyloom serves itself, and those not allowed. */
  helperNative: number
  helperNotAllowed: number
  /** The names of the Tavern Helper scripts not allowed, so the user knows which. */
  helperNotAllowedNames: string[]
}

/** What of the card does not run in a chat with `settings`; null when everything runs. */
export function scriptsOff(scripts: CardScripts, settings: Pick<ConversationSettings, 'allow_regex_scripts' | 'allow_html_scripts'>): ScriptsOff | null {
  const live = (scripts.regex ?? []).filter((s) => s.status !== 'off_in_card')
  const helper = scripts.helper ?? []
  const off: ScriptsOff = {
    regexOff: settings.allow_regex_scripts ? 0 : live.length,
    framesOff: settings.allow_html_scripts ? 0 : live.filter((s) => s.frame_scripts).length,
    helperNative: helper.filter((s) => s.status === 'native').length,
    helperNotAllowed: helper.filter((s) => s.status === 'not_allowed').length,
    helperNotAllowedNames: helper.filter((s) => s.status === 'not_allowed').map((s) => s.name || s.id),
  }
  return off.regexOff || off.framesOff || off.helperNotAllowed ? off : null
}

/** A notice's identity: dismissing it hides it until what it says changes. */
export function scriptsOffKey(conversationId: string, off: ScriptsOff): string {
  return `${conversationId}:scripts:${off.regexOff}:${off.framesOff}:${off.helperNative}:${off.helperNotAllowed}`
}

export interface LoreCut {
  count: number
  constant: string[]
  budget: number
}

/** What the lore budget cut from `message`'s prompt (`extra.lore_cut`); null: nothing. */
export function loreCut(message: Pick<ChatMessage, 'extra'> | null | undefined): LoreCut | null {
  const raw = message?.extra?.lore_cut
  if (!raw || typeof raw !== 'object') return null
  const { count, constant, budget } = raw as Record<string, unknown>
  if (typeof count !== 'number' || count < 1) return null
  return {
    count,
    constant: Array.isArray(constant) ? constant.filter((c): c is string => typeof c === 'string') : [],
    budget: typeof budget === 'number' ? budget : 0,
  }
}

const DISMISSED_KEY = 'storyloom.chat.dismissedNotices'

function store(): Pick<Storage, 'getItem' | 'setItem'> | null {
  try {
    return globalThis.localStorage ?? null
  } catch {
    return null
  }
}

/** The notices dismissed in this browser (a storage that cannot be read: none). */
export function readDismissed(): Set<string> {
  try {
    const parsed: unknown = JSON.parse(store()?.getItem(DISMISSED_KEY) ?? '[]')
    return new Set(Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [])
  } catch {
    return new Set()
  }
}

export function writeDismissed(keys: Set<string>): void {
  try {
    // The newest few hundred are enough: an old chat's notice may come back.
    store()?.setItem(DISMISSED_KEY, JSON.stringify([...keys].slice(-300)))
  } catch {
    // A refused storage only means the notice shows again next time.
  }
}
