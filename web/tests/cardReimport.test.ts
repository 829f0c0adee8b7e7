// Importing a card that is a character here already: the API call answers the conflict
// (not an error) and the dialog offers what fits it: open for the very same card, update
// for a changed one, keep both and cancel for either.
import { mount } from '@vue/test-utils'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { computed } from 'vue'
import { importCharacterCard } from '../src/api/characters'
import { importChat } from '../src/api/chat'
import { ApiError } from '../src/api/client'
import { importGroup } from '../src/api/groups'
import { importKnowledgeFile } from '../src/api/knowledge'
import CardConflictDialog from '../src/components/characters/CardConflictDialog.vue'
import { makeI18n } from '../src/i18n'

const q = (id: string) => `[data-testid="${id}"]`

function answering(status: number, body: unknown) {
  const sent: FormData[] = []
  const fetchImpl = vi.fn(async (_url: RequestInfo | URL, init?: RequestInit) => {
    sent.push(init?.body as FormData)
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
  })
  return { fetchImpl: fetchImpl as unknown as typeof fetch, sent }
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('importCharacterCard', () => {
  const file = new File(['{}'], 'aria.json')

  it('answers the conflict of a card that is here already, asking by default', async () => {
    const conflict = { sameness: 'identical', character_id: 'Aria', name: 'Aria' }
    const { fetchImpl, sent } = answering(409, { error: { message: 'already', problems: [] }, conflict })
    expect(await importCharacterCard(file, undefined, fetchImpl)).toEqual({ conflict })
    expect(sent[0]!.get('on_conflict')).toBe('ask')
  })

  it('sends the choice and answers what was imported', async () => {
    const card = { outcome: 'updated', id: 'Aria', name: 'Aria', version: 'v2', books: [], warnings: [] }
    const { fetchImpl, sent } = answering(201, card)
    expect(await importCharacterCard(file, 'update', fetchImpl)).toEqual({ imported: card })
    expect(sent[0]!.get('on_conflict')).toBe('update')
  })

  it('throws any other failure with the server message', async () => {
    const { fetchImpl } = answering(422, { error: { message: 'aria.json: not a character card', problems: [] } })
    await expect(importCharacterCard(file, 'ask', fetchImpl)).rejects.toEqual(new ApiError(422, 'aria.json: not a character card'))
  })
})

describe('the other doors a card comes in by', () => {
  const conflict = { sameness: 'changed', character_id: 'Aria', name: 'Aria' }
  const refused = { error: { message: 'already', problems: [] }, conflict }

  it('the Knowledge page answers the conflict and sends both choices', async () => {
    const { fetchImpl, sent } = answering(409, refused)
    expect(await importKnowledgeFile(new File(['{}'], 'aria.json'), 'local', fetchImpl)).toEqual({ conflict })
    expect(sent[0]!.get('on_conflict')).toBe('ask')
    expect(sent[0]!.get('on_duplicate')).toBe('keep_existing')
    const again = answering(201, { kind: 'character_card', filename: 'aria.json', created: [], warnings: [] })
    await importKnowledgeFile(new File(['{}'], 'aria.json'), 'local', again.fetchImpl, 'keep_existing', 'keep_both')
    expect(again.sent[0]!.get('on_conflict')).toBe('keep_both')
  })

  it('a chat’s import answers the conflict', async () => {
    const { fetchImpl, sent } = answering(409, refused)
    expect(await importChat(new File(['{}'], 'aria.png'), 'ask', fetchImpl)).toEqual({ conflict })
    expect(sent[0]!.get('on_conflict')).toBe('ask')
  })

  it('a group’s import sends every card and answers the conflict', async () => {
    const { fetchImpl, sent } = answering(409, refused)
    const cards = [new File(['a'], 'Aria.png'), new File(['b'], 'Bo.png')]
    const answer = await importGroup(new File(['{}'], '1.json'), new File([''], '1.jsonl'), cards, 'update', fetchImpl)
    expect(answer).toEqual({ conflict })
    expect(sent[0]!.getAll('cards').map((c) => (c as File).name)).toEqual(['Aria.png', 'Bo.png'])
    expect(sent[0]!.get('on_conflict')).toBe('update')
  })
})

describe('the card conflict dialog', () => {
  function mountDialog(sameness: 'identical' | 'changed' | null, locale: 'en' | 'zh' = 'en') {
    const conflict = { sameness: sameness ?? 'identical', character_id: 'sera', name: 'Seraphina' }
    const flow = { asking: computed(() => (sameness ? { conflict, fileName: 'Seraphina.png' } : null)), choose: vi.fn() }
    const w = mount(CardConflictDialog, { props: { flow, busy: false }, global: { plugins: [makeI18n(locale)] } })
    return { w, chosen: () => flow.choose.mock.calls.map(([choice]) => choice as string) }
  }

  it('offers open, keep both and cancel for the very same card', async () => {
    const { w, chosen } = mountDialog('identical')
    expect(w.text()).toContain('Seraphina is already in your library')
    expect(w.find(q('card-conflict-update')).exists()).toBe(false)
    await w.find(q('card-conflict-open')).trigger('click')
    await w.find(q('card-conflict-keep-both')).trigger('click')
    await w.find(q('card-conflict-cancel')).trigger('click')
    expect(chosen()).toEqual(['open', 'keep_both', 'cancel'])
  })

  it('offers update for a changed card, in Chinese too', async () => {
    const { w, chosen } = mountDialog('changed', 'zh')
    expect(w.find(q('card-conflict-open')).exists()).toBe(false)
    expect(w.find(q('card-conflict-update')).text()).toBe('更新')
    await w.find(q('card-conflict-update')).trigger('click')
    expect(chosen()).toEqual(['update'])
  })

  it('shows nothing while no card waits', () => {
    const { w } = mountDialog(null)
    expect(w.find(q('card-conflict')).exists()).toBe(false)
  })
})
