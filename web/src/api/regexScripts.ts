// Typed calls for /api/regex-scripts: the user's global regex scripts (SillyTavern's
// global scope), which run in every chat before the character's own. The list is saved
// whole; a bad script is a 422 whose problems name `[index].field`.
import { type Fetch, postForm, requestJson } from './client'
import type { components } from './schema'

type Schemas = components['schemas']
export type RegexScript = Schemas['RegexScript']
export type RegexScriptList = Schemas['RegexScriptList']
export type RegexImportReport = Schemas['RegexImportReport']

const PATH = '/api/regex-scripts'

export function listRegexScripts(fetchImpl?: Fetch): Promise<RegexScriptList> {
  return requestJson<RegexScriptList>('GET', PATH, undefined, fetchImpl)
}

/** Replace the whole list (in the order the scripts run); answers it as saved. */
export function saveRegexScripts(scripts: readonly RegexScript[], fetchImpl?: Fetch): Promise<RegexScriptList> {
  return requestJson<RegexScriptList>('PUT', PATH, scripts, fetchImpl)
}

/** A file exported from SillyTavern's regex panel (one script or a list), added at the end. */
export function importRegexScripts(file: File, fetchImpl?: Fetch): Promise<RegexImportReport> {
  return postForm<RegexImportReport>(`${PATH}/import`, { file }, fetchImpl)
}
