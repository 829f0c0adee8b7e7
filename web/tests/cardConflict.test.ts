// The choice about a card that is a character here already, as every door a card comes in
// by keeps it (useCardConflict): the import's conflict waits; update and keep both import
// the same files again with the choice; open goes to the character here (or, for a group,
// imports again as an update); cancel forgets it.
import { describe, expect, it, vi } from 'vitest'
import type { CardConflict } from '../src/api/characters'
import { useCardConflict } from '../src/lib/useCardConflict'

const identical: CardConflict = { sameness: 'identical', character_id: 'sera', name: 'Seraphina' }
const changed: CardConflict = { ...identical, sameness: 'changed' }
const file = new File(['{}'], 'Seraphina.png')

function flowAt(open: ((c: CardConflict) => unknown) | 'update' = vi.fn()) {
  const reimport = vi.fn()
  return { flow: useCardConflict({ reimport, open }), reimport, open }
}

describe('a card conflict', () => {
  it('lets an import through and asks nothing', () => {
    const { flow } = flowAt()
    const card = { id: 'sera' }
    expect(flow.receive(file, { imported: card })).toBe(card)
    expect(flow.asking.value).toBeNull()
  })

  it('waits with the conflict and the file it came in', () => {
    const { flow } = flowAt()
    expect(flow.receive(file, { conflict: changed })).toBeNull()
    expect(flow.asking.value).toEqual({ conflict: changed, fileName: 'Seraphina.png' })
  })

  it('imports the same file again with update or keep both, asking until the answer comes', () => {
    const { flow, reimport } = flowAt()
    flow.receive(file, { conflict: changed })
    flow.choose('update')
    flow.choose('keep_both')
    expect(reimport.mock.calls).toEqual([
      [file, 'update'],
      [file, 'keep_both'],
    ])
    expect(flow.asking.value).not.toBeNull()
    flow.receive(file, { imported: {} })
    expect(flow.asking.value).toBeNull()
  })

  it('opens the character here and stops asking', () => {
    const { flow, reimport, open } = flowAt()
    flow.receive(file, { conflict: identical })
    flow.choose('open')
    expect(open).toHaveBeenCalledWith(identical)
    expect(reimport).not.toHaveBeenCalled()
    expect(flow.asking.value).toBeNull()
  })

  it('cancel imports nothing and stops asking', () => {
    const { flow, reimport, open } = flowAt()
    flow.receive(file, { conflict: identical })
    flow.choose('cancel')
    expect(reimport).not.toHaveBeenCalled()
    expect(open).not.toHaveBeenCalled()
    expect(flow.asking.value).toBeNull()
  })

  it('a failed import stops asking; a choice with nothing waiting does nothing', () => {
    const { flow, reimport, open } = flowAt()
    flow.receive(file, { conflict: changed })
    flow.close()
    expect(flow.asking.value).toBeNull()
    flow.choose('update')
    flow.choose('open')
    expect(reimport).not.toHaveBeenCalled()
    expect(open).not.toHaveBeenCalled()
  })

  it('a group’s files name the card of the conflict; open there is an update', () => {
    const files = { group: new File(['{}'], '1.json'), cards: [new File(['a'], 'Bo.png'), new File(['b'], 'Seraphina.png')] }
    const reimport = vi.fn()
    const flow = useCardConflict<typeof files>({
      reimport,
      open: 'update',
      fileName: (f, c) => f.cards.find((card) => card.name.startsWith(c.name))?.name ?? f.group.name,
    })
    flow.receive(files, { conflict: identical })
    expect(flow.asking.value?.fileName).toBe('Seraphina.png')
    flow.choose('open')
    expect(reimport).toHaveBeenCalledWith(files, 'update')
    expect(flow.asking.value).not.toBeNull()
  })
})
