// Typed calls for /api/scripts: the Lua and JavaScript files a chat:Script node runs. Project
// scripts (`mood.lua`) can be written and deleted; an enabled plugin's (`<plugin>:<file>`)
// are read-only.
import { type Fetch, requestJson } from './client'

export type ScriptFileLanguage = 'lua' | 'javascript'

/** A script as the list shows it. */
export interface ScriptInfo {
  name: string
  language: ScriptFileLanguage
  /** Bytes. */
  size: number
  /** The plugin it comes with; null for the project's own. */
  plugin?: string | null
}

/** A script with its code. */
export interface ScriptFile {
  name: string
  language: ScriptFileLanguage
  code: string
  /** A plugin's script: it cannot be changed here. */
  read_only: boolean
}

/** What a project script may be called: no folder, no leading dot, `.lua` or `.js`. */
export const SCRIPT_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*\.(lua|js)$/

const path = (name: string) => `/api/scripts/${encodeURIComponent(name)}`

export function listScripts(fetchImpl?: Fetch): Promise<ScriptInfo[]> {
  return requestJson<ScriptInfo[]>('GET', '/api/scripts', undefined, fetchImpl)
}

export function getScript(name: string, fetchImpl?: Fetch): Promise<ScriptFile> {
  return requestJson<ScriptFile>('GET', path(name), undefined, fetchImpl)
}

/** Write a project script (created when new); answers it as read back. */
export function putScript(name: string, code: string, fetchImpl?: Fetch): Promise<ScriptFile> {
  return requestJson<ScriptFile>('PUT', path(name), { code }, fetchImpl)
}

export async function deleteScript(name: string, fetchImpl?: Fetch): Promise<void> {
  await requestJson<null>('DELETE', path(name), undefined, fetchImpl)
}
