import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import TabList from '../src/components/TabList.vue'
import { makeI18n } from '../src/i18n'

function tabs(props: Record<string, unknown>) {
  return mount(TabList, {
    props: { tabs: ['node', 'history'], label: 'Inspector', textKey: 'workflows.inspector', testidPrefix: 'wf-tab-', modelValue: 'node', ...props },
    global: { plugins: [makeI18n('en')] },
  })
}

describe('a tab list', () => {
  it('marks the bound tab selected and names each tab from its message', () => {
    const w = tabs({})
    const buttons = w.findAll('[role="tab"]')
    expect(buttons.map((b) => b.attributes('data-testid'))).toEqual(['wf-tab-node', 'wf-tab-history'])
    expect(buttons.map((b) => b.attributes('aria-selected'))).toEqual(['true', 'false'])
    expect(buttons.map((b) => b.text())).toEqual(['Settings', 'History'])
    expect(w.get('[role="tablist"]').attributes('aria-label')).toBe('Inspector')
  })

  it('asks for the clicked tab through v-model', async () => {
    const w = tabs({})
    await w.get('[data-testid="wf-tab-history"]').trigger('click')
    expect(w.emitted('update:modelValue')).toEqual([['history']])
  })

  it('links tabs to their panels only when given the prefixes', () => {
    const bare = tabs({}).get('[data-testid="wf-tab-node"]')
    expect(bare.attributes('id')).toBeUndefined()
    expect(bare.attributes('aria-controls')).toBeUndefined()
    const linked = tabs({ idPrefix: 'wf-tab-', panelPrefix: 'wf-panel-' }).get('[data-testid="wf-tab-node"]')
    expect(linked.attributes('id')).toBe('wf-tab-node')
    expect(linked.attributes('aria-controls')).toBe('wf-panel-node')
  })
})
