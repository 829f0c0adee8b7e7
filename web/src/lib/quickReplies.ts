// What the chat's quick reply bar shows and what a click does, as SillyTavern's Quick
// Reply extension does it: the visible sets' buttons; a click puts the reply in the
// message box (joined to what is typed there when the set injects, before it with
// placeBeforeInput) and sends it unless the set says disableSend. A slash command is
// never sent: storyloom's chat does not run them (the button is disabled, its title says why).
import type { QuickReplyButton, QuickReplySetView } from '../api/quickReplies'

export interface QuickReplyBarSet {
  name: string
  send: boolean
  buttons: QuickReplyButton[]
}

/** The sets whose buttons the chat shows, in order; a set without buttons is left out. */
export function quickReplyBar(sets: readonly QuickReplySetView[]): QuickReplyBarSet[] {
  return sets.filter((s) => s.visible && s.buttons.length).map((s) => ({ name: s.name, send: s.send, buttons: s.buttons }))
}

export interface QuickReplyClick {
  /** What the message box holds after the click. */
  text: string
  /** Send it now (else it waits in the box for the user). */
  send: boolean
}

/** What clicking `button` of `set` does to a message box holding `draft`; null when the
 * button cannot run (a slash command). */
export function quickReplyClick(
  set: Pick<QuickReplySetView, 'send' | 'set'>,
  button: QuickReplyButton,
  draft: string,
): QuickReplyClick | null {
  if (!button.runnable) return null
  const inject = Boolean(set.set.injectInput) && draft.length > 0
  let text = button.message
  if (inject) text = set.set.placeBeforeInput ? `${button.message} ${draft}` : `${draft} ${button.message}`
  return { text, send: set.send && text.trim().length > 0 }
}

/** The CSS background of a chat that names an image (none: ''). */
export function chatBackgroundStyle(name: string | null | undefined): Record<string, string> {
  if (!name) return {}
  const url = `/api/backgrounds/${encodeURIComponent(name)}`
  return { backgroundImage: `url("${url}")`, backgroundSize: 'cover', backgroundPosition: 'center' }
}

/** The sprite a chat shows: the one picked for it when the character has it, else the
 * character's default; null for none. */
export function shownExpression(
  picked: string | null | undefined,
  available: readonly string[],
  fallback: string | null | undefined,
): string | null {
  if (picked && available.includes(picked)) return picked
  return fallback && available.includes(fallback) ? fallback : null
}
