// Names for the server's types, generated from openapi.json into schema.d.ts (`npm run gen:api`).
import type { components } from './schema'

type Schemas = components['schemas']

export type SettingsView = Schemas['SettingsView']
export type SettingsUpdate = Schemas['SettingsUpdate']
export type ChatEndpointView = Schemas['ChatEndpointView']
export type ChatEndpointUpdate = Schemas['ChatEndpointUpdate']
export type EmbeddingEndpointView = Schemas['EmbeddingEndpointView']
export type EmbeddingEndpointUpdate = Schemas['EmbeddingEndpointUpdate']
export type ModelParameters = Schemas['ModelParameters']
export type ConnectionReport = Schemas['ConnectionReport']
export type HealthReport = Schemas['HealthReport']
export type ErrorBody = Schemas['ErrorBody']
export type ErrorDetail = Schemas['ErrorDetail']
export type Problem = Schemas['Problem']
export type SettingsTestRequest = Schemas['SettingsTestRequest']

export type Role = SettingsTestRequest['role']
export type ChatRole = Exclude<Role, 'embedding'>
export const ROLES: readonly Role[] = ['user_llm', 'agent_llm', 'embedding']
