// Typed calls for /api/connections: named connections (an endpoint like the user model's)
// that chats, characters, group members, agent profiles and writing roles pick. Keys are
// write-only here as on the Settings page: a view says `api_key_set`, an update without
// `api_key` keeps the stored key and "" clears it.
import { type Fetch, postForm, requestJson } from './client'
import type { ChatEndpointUpdate, ConnectionImportResult, ConnectionReport, ConnectionsView } from './types'

const BASE = '/api/connections'
const path = (name: string) => `${BASE}/${encodeURIComponent(name)}`

export function listConnections(fetchImpl?: Fetch): Promise<ConnectionsView> {
  return requestJson<ConnectionsView>('GET', BASE, undefined, fetchImpl)
}

export function putConnection(name: string, endpoint: ChatEndpointUpdate, fetchImpl?: Fetch): Promise<ConnectionsView> {
  return requestJson<ConnectionsView>('PUT', path(name), endpoint, fetchImpl)
}

export function deleteConnection(name: string, fetchImpl?: Fetch): Promise<ConnectionsView> {
  return requestJson<ConnectionsView>('DELETE', path(name), undefined, fetchImpl)
}

/** Test a connection; with `endpoint` the unsaved form values (stored key unless a new one). */
export function testNamedConnection(name: string, endpoint?: ChatEndpointUpdate, fetchImpl?: Fetch): Promise<ConnectionReport> {
  return requestJson<ConnectionReport>('POST', `${path(name)}/test`, endpoint, fetchImpl)
}

/** SillyTavern's settings.json: its connection profiles become connections. */
export function importSillyTavernConnections(file: File, replace = false, fetchImpl?: Fetch): Promise<ConnectionImportResult> {
  return postForm<ConnectionImportResult>(`${BASE}/import`, { file, replace: replace ? 'true' : undefined }, fetchImpl)
}
