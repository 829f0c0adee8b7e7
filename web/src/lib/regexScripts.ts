// The global regex scripts list of Settings: what each row says about a script, and the
// list after a toggle or a delete (sent whole to PUT /api/regex-scripts).
import type { RegexScript } from '../api/regexScripts'

/** SillyTavern's `regex_placement` values the list names (0 and 4 are retired there). */
export const PLACEMENTS: Readonly<Record<number, string>> = {
  1: 'userInput',
  2: 'aiOutput',
  3: 'slashCommand',
  5: 'worldInfo',
  6: 'reasoning',
}

/** The row's title: the script's name, else its id, else the start of its pattern. */
export function scriptTitle(script: RegexScript): string {
  return script.scriptName || script.id || script.findRegex.slice(0, 40)
}

/** The placement keys (`PLACEMENTS`' values) a script acts on, in SillyTavern's order;
 * retired or unknown placements are left out. */
export function placementKeys(script: RegexScript): string[] {
  return [...new Set(script.placement ?? [])]
    .sort((a, b) => a - b)
    .flatMap((p) => (PLACEMENTS[p] ? [PLACEMENTS[p]] : []))
}

/** Where the script's change shows: only in what the model is sent, only on screen, or
 * in the stored text (both). */
export function scriptPhase(script: RegexScript): 'prompt' | 'display' | 'stored' {
  if (script.markdownOnly) return 'display'
  if (script.promptOnly) return 'prompt'
  return 'stored'
}

/** The list with script `index` switched on or off. */
export function withToggled(scripts: readonly RegexScript[], index: number): RegexScript[] {
  return scripts.map((s, i) => (i === index ? { ...s, disabled: !s.disabled } : s))
}

/** The list without script `index`. */
export function withoutScript(scripts: readonly RegexScript[], index: number): RegexScript[] {
  return scripts.filter((_, i) => i !== index)
}

/** The index of the script a problem field (`[2].findRegex`) names, or null. */
export function problemIndex(field: string): number | null {
  const found = /^\[(\d+)\]/.exec(field)
  return found ? Number(found[1]) : null
}
