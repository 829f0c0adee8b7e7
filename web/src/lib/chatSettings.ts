// A conversation's settings as the settings drawer edits them, without Vue: the form made
// from a conversation, and the settings a form saves. Settings the form does not show
// (keyframe_every, summaries, keys a newer server added) are kept as they were. The chat's
// own `user_name` and `persona` are among those: the persona picker is where the user
// says who they are (the persona's name and description take their place in a turn).
import { type Conversation, type ConversationSettings, DEFAULT_PIPELINE, type RagScope } from '../api/chat'

export type ScopeMode = RagScope['mode']

export interface SettingsForm {
  title: string
  authors_note: string
  authors_note_depth: number
  allow_regex_scripts: boolean
  allow_html_scripts: boolean
  /** The chat pipeline workflow's id. */
  pipeline: string
  director_enabled: boolean
  /** Replies without plot progress before the director steers firmly. */
  rag_fallback_threshold: number
  rag_mode: ScopeMode
  /** Ids of the conversations retrieval also searches (mode `related`). */
  related: string[]
  /** The agent profile whose tools the character may call ('' = none). */
  agent_profile: string
  /** Tell the model the Filament format and show it the state: auto, on or off. */
  format_guide: 'auto' | 'on' | 'off'
  /** Replaces the built-in format guide ('' = the built-in one). */
  format_guide_text: string
  /** The image behind the chat, a name of the backgrounds folder ('' = none). */
  background: string
  /** MVU's separate updater: the agent model writes the state updates. */
  mvu_updater: boolean
}

export function formFromConversation(c: Conversation): SettingsForm {
  const s = c.settings
  return {
    title: c.title,
    authors_note: s.authors_note ?? '',
    authors_note_depth: s.authors_note_depth ?? 4,
    allow_regex_scripts: Boolean(s.allow_regex_scripts),
    allow_html_scripts: Boolean(s.allow_html_scripts),
    pipeline: s.pipeline || DEFAULT_PIPELINE,
    director_enabled: s.director_enabled !== false,
    rag_fallback_threshold: s.rag_fallback_threshold ?? 3,
    rag_mode: s.rag_scope?.mode === 'related' ? 'related' : 'self_only',
    related: [...(s.rag_scope?.related_conversations ?? [])].sort(),
    agent_profile: typeof s.agent_profile === 'string' ? s.agent_profile : '',
    format_guide: s.format_guide === 'on' || s.format_guide === 'off' ? s.format_guide : 'auto',
    format_guide_text: typeof s.format_guide_text === 'string' ? s.format_guide_text : '',
    background: s.background ?? '',
    mvu_updater: s.mvu_updater === true,
  }
}

/** The form as a string that is equal for equal forms (what "changed" compares). */
export function formKey(form: SettingsForm): string {
  return JSON.stringify({ ...form, related: [...form.related].sort() })
}

/** A whole number of at least `min`, or `fallback` for anything else (an emptied field). */
function whole(value: unknown, min: number, fallback: number): number {
  if (value === '' || value === null || value === undefined) return fallback
  const n = Number(value)
  return Number.isFinite(n) && n >= min ? Math.floor(n) : fallback
}

/** The settings the form saves, keeping what it does not show. */
export function settingsFromForm(form: SettingsForm, current: ConversationSettings): ConversationSettings {
  const { title: _title, rag_mode, related, agent_profile, background, ...rest } = form
  // No profile: null clears one the conversation had; one it never had stays unset.
  const profile = agent_profile ? { agent_profile } : current.agent_profile != null ? { agent_profile: null } : {}
  const image = background ? { background } : current.background != null ? { background: null } : {}
  return {
    ...current,
    ...rest,
    ...profile,
    ...image,
    pipeline: rest.pipeline || DEFAULT_PIPELINE,
    authors_note_depth: whole(rest.authors_note_depth, 0, 4),
    rag_fallback_threshold: whole(rest.rag_fallback_threshold, 1, current.rag_fallback_threshold ?? 3),
    rag_scope: { ...(current.rag_scope ?? {}), mode: rag_mode, related_conversations: [...related] },
  }
}
