import { describe, expect, it } from 'vitest'
import type { ChatEndpointView, SettingsView } from '../src/api/types'
import { agentFallbackName, chatModelName } from '../src/lib/agentModel'

function endpoint(fields: Partial<ChatEndpointView>): ChatEndpointView {
  return { base_url: '', model: '', api_key_set: false, ...fields } as ChatEndpointView
}

function settings(agentUsesUserModel: boolean, user: Partial<ChatEndpointView>): SettingsView {
  return { agent_uses_user_model: agentUsesUserModel, user_llm: endpoint(user), agent_llm: endpoint({}) } as SettingsView
}

describe('the model the agent role falls back to', () => {
  it('names the chat model when no agent model is set up', () => {
    expect(agentFallbackName(settings(true, { base_url: 'http://x/v1', model: 'qwen2.5-7b' }))).toBe('qwen2.5-7b')
  })

  it('is null when an agent model is set up', () => {
    expect(agentFallbackName(settings(false, { model: 'qwen2.5-7b' }))).toBeNull()
  })

  it("names a local model by its file, and the embedded one by nothing ('')", () => {
    const local = { path: '/models/Mistral-7B.Q4_K_M.gguf' } as ChatEndpointView['local_model']
    expect(chatModelName(endpoint({ local_model: local }))).toBe('Mistral-7B.Q4_K_M.gguf')
    expect(chatModelName(endpoint({ local_model: { path: '' } as ChatEndpointView['local_model'] }))).toBe('')
  })
})
