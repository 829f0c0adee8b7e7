// Typed calls for /api/templates: the instruct and context templates text-completion
// connections format their prompt with (built in, or imported from SillyTavern).
import { type Fetch, postForm, requestJson } from './client'
import type { TemplateImported, TemplateKind, TemplateList } from './types'

export function listTemplates(fetchImpl?: Fetch): Promise<TemplateList> {
  return requestJson<TemplateList>('GET', '/api/templates', undefined, fetchImpl)
}

/** Upload a SillyTavern instruct/*.json or context/*.json (which one it is, the file says). */
export function importTemplate(file: Blob, fetchImpl?: Fetch): Promise<TemplateImported> {
  return postForm<TemplateImported>('/api/templates/import', { file }, fetchImpl)
}

export function deleteTemplate(kind: TemplateKind, name: string, fetchImpl?: Fetch): Promise<void> {
  return requestJson<void>('DELETE', `/api/templates/${kind}/${encodeURIComponent(name)}`, undefined, fetchImpl)
}
