import { describe, expect, it } from 'vitest'
import {
  buildChatUpdate,
  buildEmbeddingUpdate,
  CHAT_FIELDS,
  chatFormFromView,
  EMBEDDING_FIELDS,
  embeddingFormFromView,
  keyUpdate,
  parseNumber,
  splitProblems,
  templateChoices,
  usesTemplates,
} from '../src/lib/settingsForm'
import { chatView, embeddingView } from './fixtures'

describe('api key rules', () => {
  it('omits api_key when the field is empty (keep the stored key)', () => {
    expect(keyUpdate({ api_key: '', clear_key: false })).toEqual({})
    expect(keyUpdate({ api_key: '   ', clear_key: false })).toEqual({})
    const { update } = buildChatUpdate(chatView({ api_key_set: true }), chatFormFromView(chatView()))
    expect('api_key' in update).toBe(false)
  })

  it('sends "" to clear the stored key', () => {
    expect(keyUpdate({ api_key: '', clear_key: true })).toEqual({ api_key: '' })
    const form = { ...chatFormFromView(chatView({ api_key_set: true })), clear_key: true }
    expect(buildChatUpdate(chatView({ api_key_set: true }), form).update.api_key).toBe('')
  })

  it('sends a typed key, trimmed', () => {
    expect(keyUpdate({ api_key: ' sk-new \n', clear_key: false })).toEqual({ api_key: 'sk-new' })
  })

  it('never fills the key field from the server', () => {
    expect(chatFormFromView(chatView({ api_key_set: true })).api_key).toBe('')
    expect(embeddingFormFromView(embeddingView({ api_key_set: true })).api_key).toBe('')
  })
})

describe('parseNumber', () => {
  it('parses numbers and empty values', () => {
    expect(parseNumber(0.7)).toEqual({ ok: true, value: 0.7 })
    expect(parseNumber('12')).toEqual({ ok: true, value: 12 })
    expect(parseNumber('')).toEqual({ ok: true, value: null })
    expect(parseNumber(null)).toEqual({ ok: true, value: null })
    expect(parseNumber('', { required: true })).toEqual({ ok: false, error: 'settings.errors.required' })
    expect(parseNumber('abc')).toEqual({ ok: false, error: 'settings.errors.number' })
    expect(parseNumber(1.5, { integer: true })).toEqual({ ok: false, error: 'settings.errors.integer' })
  })
})

describe('buildChatUpdate', () => {
  it('round-trips a view unchanged, without api_key_set', () => {
    const view = chatView()
    const { update, errors } = buildChatUpdate(view, chatFormFromView(view))
    expect(errors).toEqual({})
    const { api_key_set: _ignored, ...expected } = view
    expect(update).toEqual(expected)
    expect('api_key_set' in update).toBe(false)
  })

  it('runs a local .gguf file when a path is given, and calls the base URL when it is cleared', () => {
    const view = chatView()
    const form = { ...chatFormFromView(view), local_path: ' /models/nemo.Q4_K_M.gguf ', local_context: 8192, local_threads: 4 }
    const { update, errors } = buildChatUpdate(view, form)
    expect(errors).toEqual({})
    expect(update.local_model).toEqual({ path: '/models/nemo.Q4_K_M.gguf', context_size: 8192, threads: 4, batch_size: 512, gpu_layers: 0 })
    const local = chatView({ local_model: { path: '/m.gguf', context_size: 2048, threads: 1, batch_size: 256, gpu_layers: -1 } })
    expect(chatFormFromView(local).local_gpu_layers).toBe(-1)
    expect(buildChatUpdate(local, { ...chatFormFromView(local), local_path: '' }).update.local_model).toBeNull()
    const bad = buildChatUpdate(view, { ...form, local_context: 0 })
    expect(bad.errors.local_context).toBe('settings.errors.positive')
  })

  it('applies edits and keeps fields the form does not show', () => {
    const view = chatView()
    const form = {
      ...chatFormFromView(view),
      base_url: '  http://127.0.0.1:8080/v1 ',
      model: ' llama ',
      temperature: '',
      max_tokens: 512,
      timeout_s: '30',
      max_retries: 0,
      token_encoding: 'o200k_base',
    }
    const { update, errors } = buildChatUpdate(view, form)
    expect(errors).toEqual({})
    expect(update.base_url).toBe('http://127.0.0.1:8080/v1')
    expect(update.model).toBe('llama')
    expect(update.parameters).toEqual({
      ...view.parameters,
      temperature: null,
      max_tokens: 512,
    })
    expect(update.parameters?.repetition_penalty).toBe(1.1)
    expect(update.timeout_s).toBe(30)
    expect(update.max_retries).toBe(0)
    expect(update.token_encoding).toBe('o200k_base')
    expect(update.connect_timeout_s).toBe(10)
    expect(update.context_window).toBe(32768)
  })

  it('edits the context window: a whole number above zero, or empty for unset', () => {
    const view = chatView()
    expect(chatFormFromView(view).context_window).toBe(32768)
    expect(buildChatUpdate(view, { ...chatFormFromView(view), context_window: 128000 }).update.context_window).toBe(128000)
    expect(buildChatUpdate(view, { ...chatFormFromView(view), context_window: '' }).update.context_window).toBeNull()
    expect(chatFormFromView(chatView({ context_window: null })).context_window).toBe('')
    expect(buildChatUpdate(view, { ...chatFormFromView(view), context_window: 0 }).errors).toEqual({ context_window: 'settings.errors.positive' })
    expect(buildChatUpdate(view, { ...chatFormFromView(view), context_window: 8.5 }).errors).toEqual({ context_window: 'settings.errors.integer' })
  })

  it('maps "auto" encoding to null', () => {
    const view = chatView({ token_encoding: 'cl100k_base' })
    const form = { ...chatFormFromView(view), token_encoding: '' }
    expect(buildChatUpdate(view, form).update.token_encoding).toBeNull()
  })

  it('reports client-side problems by field', () => {
    const view = chatView()
    const form = { ...chatFormFromView(view), timeout_s: '', max_retries: 1.5, max_tokens: 'x' }
    const { errors } = buildChatUpdate(view, form)
    expect(errors).toEqual({
      timeout_s: 'settings.errors.required',
      max_retries: 'settings.errors.integer',
      max_tokens: 'settings.errors.number',
    })
  })
})

describe('the API and its templates', () => {
  it('sends the chosen API and template names, and keeps them through a round trip', () => {
    const view = chatView({ api: 'llamacpp', instruct_template: 'Llama 3 Instruct', context_template: '' })
    const form = chatFormFromView(view)
    expect([form.api, form.instruct_template, form.context_template]).toEqual(['llamacpp', 'Llama 3 Instruct', ''])
    const { update, errors } = buildChatUpdate(view, { ...form, api: 'koboldcpp', context_template: 'ChatML' })
    expect(errors).toEqual({})
    expect(update.api).toBe('koboldcpp')
    expect(update.instruct_template).toBe('Llama 3 Instruct')
    expect(update.context_template).toBe('ChatML')
  })

  it('shows the template selects only for the text-completion APIs', () => {
    expect(usesTemplates('chat')).toBe(false)
    expect(['text', 'llamacpp', 'koboldcpp'].every((a) => usesTemplates(a as 'text'))).toBe(true)
  })

  it('offers auto first, then the library, and keeps a saved name the library lacks', () => {
    expect(templateChoices(['ChatML', 'Mistral'], '')).toEqual(['', 'ChatML', 'Mistral'])
    expect(templateChoices(['ChatML'], 'ChatML')).toEqual(['', 'ChatML'])
    expect(templateChoices(['ChatML'], 'Gone')).toEqual(['', 'ChatML', 'Gone'])
  })

  it('places a template problem next to its select', () => {
    const out = splitProblems([{ field: 'user_llm.instruct_template', reason: 'no such template' }], 'user_llm', CHAT_FIELDS)
    expect(out.fields).toEqual({ instruct_template: 'no such template' })
  })
})

describe('buildEmbeddingUpdate', () => {
  it('switches provider and keeps the key rules', () => {
    const view = embeddingView({ api_key_set: true })
    const form = {
      ...embeddingFormFromView(view),
      provider: 'openai' as const,
      base_url: 'https://api.openai.com/v1/',
      model: 'text-embedding-3-small',
      dimensions: 256,
    }
    const { update, errors } = buildEmbeddingUpdate(view, form)
    expect(errors).toEqual({})
    expect(update).toEqual({
      provider: 'openai',
      base_url: 'https://api.openai.com/v1/',
      model: 'text-embedding-3-small',
      dimensions: 256,
      timeout_s: 60,
      max_retries: 2,
    })
    const cleared = buildEmbeddingUpdate(view, { ...form, clear_key: true }).update
    expect(cleared.api_key).toBe('')
  })

  it('treats empty dimensions as unset', () => {
    const view = embeddingView({ dimensions: 384 })
    const form = { ...embeddingFormFromView(view), dimensions: '' }
    expect(buildEmbeddingUpdate(view, form).update.dimensions).toBeNull()
  })
})

describe('splitProblems', () => {
  it('places section problems next to their field', () => {
    const out = splitProblems(
      [
        { field: 'user_llm.base_url', reason: 'must be an http:// or https:// URL' },
        { field: 'user_llm.parameters.temperature', reason: 'less than or equal to 2' },
        { field: 'user_llm.connect_timeout_s', reason: 'greater than 0' },
        { field: '', reason: 'whole body' },
      ],
      'user_llm',
      CHAT_FIELDS,
    )
    expect(out.fields).toEqual({
      base_url: 'must be an http:// or https:// URL',
      temperature: 'less than or equal to 2',
    })
    expect(out.other).toEqual(['user_llm.connect_timeout_s: greater than 0', 'whole body'])
  })

  it('understands the test call prefix "endpoint."', () => {
    const out = splitProblems(
      [{ field: 'endpoint.model', reason: 'required' }],
      'embedding',
      EMBEDDING_FIELDS,
    )
    expect(out.fields).toEqual({ model: 'required' })
  })

  it("leaves another section's problems alone", () => {
    const out = splitProblems([{ field: 'agent_llm.model', reason: 'x' }], 'user_llm', CHAT_FIELDS)
    expect(out.fields).toEqual({})
    expect(out.other).toEqual(['agent_llm.model: x'])
  })

  it('joins two problems of one field', () => {
    const out = splitProblems(
      [
        { field: 'user_llm.model', reason: 'a' },
        { field: 'user_llm.model', reason: 'b' },
      ],
      'user_llm',
      CHAT_FIELDS,
    )
    expect(out.fields.model).toBe('a; b')
  })
})
