// Typed calls for /api/health and /api/settings.
import { type Fetch, requestJson } from './client'
import type {
  ChatEndpointUpdate,
  ConnectionReport,
  EmbeddingEndpointUpdate,
  HealthReport,
  Role,
  SettingsTestRequest,
  SettingsUpdate,
  SettingsView,
} from './types'

export function getHealth(fetchImpl?: Fetch): Promise<HealthReport> {
  return requestJson<HealthReport>('GET', '/api/health', undefined, fetchImpl)
}

export function getSettings(fetchImpl?: Fetch): Promise<SettingsView> {
  return requestJson<SettingsView>('GET', '/api/settings', undefined, fetchImpl)
}

export function putSettings(update: SettingsUpdate, fetchImpl?: Fetch): Promise<SettingsView> {
  return requestJson<SettingsView>('PUT', '/api/settings', update, fetchImpl)
}

/** Test a role's endpoint; with `endpoint` the unsaved form values are tested. */
export function testConnection(
  role: Role,
  endpoint?: ChatEndpointUpdate | EmbeddingEndpointUpdate,
  fetchImpl?: Fetch,
): Promise<ConnectionReport> {
  const body: SettingsTestRequest = { role }
  if (endpoint) body.endpoint = endpoint
  return requestJson<ConnectionReport>('POST', '/api/settings/test', body, fetchImpl)
}

export interface ModelList {
  models: string[]
  /** Why the list is empty (no base URL, the endpoint failed). */
  message?: string | null
}

/** The models a chat role's endpoint lists (asked by the server with the stored key). */
export function listModels(role: Role, endpoint?: ChatEndpointUpdate, fetchImpl?: Fetch): Promise<ModelList> {
  const body: SettingsTestRequest = { role }
  if (endpoint) body.endpoint = endpoint
  return requestJson<ModelList>('POST', '/api/settings/models', body, fetchImpl)
}
