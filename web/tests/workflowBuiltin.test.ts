import { mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import type { WorkflowList } from '../src/api/workflows'
import WorkflowListView from '../src/components/workflow/WorkflowList.vue'
import WorkflowToolbar from '../src/components/workflow/WorkflowToolbar.vue'
import { makeI18n } from '../src/i18n'

const LIST: WorkflowList = {
  workflows: [
    { id: 'chat-default', name: 'Chat (default)', description: '', nodeCount: 11, builtin: true },
    { id: 'story', name: 'Story', description: '', nodeCount: 2, builtin: false },
  ],
  broken: [],
}

function toolbar(builtin: boolean) {
  return mount(WorkflowToolbar, {
    props: {
      meta: { id: 'chat-default', name: 'Chat (default)', description: '' },
      dirty: true,
      busy: { save: false, validate: false, run: false, cancel: false },
      run: null,
      waiting: 0,
      builtin,
      busyDuplicate: false,
      panelOpen: false,
    },
    global: { plugins: [makeI18n('en')] },
  })
}

describe('a built-in workflow', () => {
  it('is marked in the list and offers no delete; the project\'s own do', () => {
    const w = mount(WorkflowListView, { props: { list: LIST, current: null }, global: { plugins: [makeI18n('en')] } })
    const rows = w.findAll('.wf-list-row')
    expect(rows.map((r) => r.find('[data-testid="wf-builtin-tag"]').exists())).toEqual([true, false])
    expect(rows.map((r) => r.find('[data-testid="wf-delete"]').exists())).toEqual([false, true])
  })

  it('has no Save in the toolbar but Duplicate to change, and read-only fields', async () => {
    const w = toolbar(true)
    expect(w.find('[data-testid="wf-save"]').exists()).toBe(false)
    expect(w.find('[data-testid="wf-dirty"]').exists()).toBe(false)
    expect(w.get('[data-testid="wf-builtin-note"]').text()).toBe('Built in · read-only')
    const duplicate = w.get('[data-testid="wf-duplicate"]')
    expect(duplicate.text()).toBe('Duplicate to change')
    expect(w.get('[data-testid="wf-name"]').attributes('readonly')).toBeDefined()
    await duplicate.trigger('click')
    expect(w.emitted('duplicate')).toHaveLength(1)
  })

  it('differs from a project workflow, which saves and duplicates', () => {
    const w = toolbar(false)
    expect(w.find('[data-testid="wf-save"]').exists()).toBe(true)
    expect(w.find('[data-testid="wf-dirty"]').exists()).toBe(true)
    expect(w.get('[data-testid="wf-duplicate"]').text()).toBe('Duplicate')
    expect(w.find('[data-testid="wf-builtin-note"]').exists()).toBe(false)
  })
})
