// The model field: the endpoint's models in a dropdown, a typed name kept with a warning
// when the endpoint does not list it.
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import ModelField from '../src/components/ModelField.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

function mountField(model: string, load = async () => ({ models: ['llama3:latest', 'qwen2.5'] })) {
  return mount(ModelField, {
    props: { role: 'user_llm', models: [], modelValue: model, load, canLoad: true, 'onUpdate:modelValue': () => undefined },
    global: { plugins: [makeI18n('en')] },
  })
}

describe('the model field', () => {
  it('lists the models the server got from the endpoint and picks one', async () => {
    const w = mountField('')
    await flushPromises()
    const options = w.findAll(`${q('settings-user_llm-model-list')} option`).map((o) => o.text())
    expect(options).toEqual(['Pick a listed model…', 'llama3:latest', 'qwen2.5'])
    await w.find(q('settings-user_llm-model-list')).setValue('qwen2.5')
    expect(w.emitted('update:modelValue')).toEqual([['qwen2.5']])
    expect(w.find(q('settings-user_llm-model-note')).text()).toBe('The endpoint lists 2 models.')
  })

  it('keeps a model the endpoint does not list, with a warning (Ollama tags aside)', async () => {
    const w = mountField('gpt-router-special')
    await flushPromises()
    expect(w.find(q('settings-user_llm-model-warning')).text()).toContain('gpt-router-special')
    expect((w.find(q('settings-user_llm-model')).element as HTMLInputElement).value).toBe('gpt-router-special')
    const tagged = mountField('llama3')
    await flushPromises()
    expect(tagged.find(q('settings-user_llm-model-warning')).exists()).toBe(false)
  })

  it('says why the list is empty', async () => {
    const w = mountField('x', async () => ({ models: [], message: 'The base URL is empty.' }))
    await flushPromises()
    expect(w.find(q('settings-user_llm-model-list')).exists()).toBe(false)
    expect(w.find(q('settings-user_llm-model-note')).text()).toBe('The base URL is empty.')
    expect(w.find(q('settings-user_llm-model-warning')).exists()).toBe(false)
  })
})
