import { describe, expect, it } from 'vitest'
import type { RegexScript } from '../src/api/regexScripts'
import { placementKeys, problemIndex, scriptPhase, scriptTitle, withoutScript, withToggled } from '../src/lib/regexScripts'

function script(fields: Partial<RegexScript>): RegexScript {
  return {
    id: '',
    scriptName: '',
    findRegex: '/x/g',
    replaceString: '',
    trimStrings: [],
    placement: [],
    disabled: false,
    markdownOnly: false,
    promptOnly: false,
    runOnEdit: true,
    substituteRegex: 0,
    minDepth: null,
    maxDepth: null,
    ...fields,
  }
}

describe('global regex scripts list', () => {
  it('titles a script by its name, else its id, else its pattern', () => {
    expect(scriptTitle(script({ scriptName: 'Trim OOC', id: 'u1' }))).toBe('Trim OOC')
    expect(scriptTitle(script({ id: 'u1' }))).toBe('u1')
    expect(scriptTitle(script({ findRegex: '/a'.repeat(30) }))).toBe('/a'.repeat(20))
  })

  it('names the placements in order, leaving out retired ones', () => {
    expect(placementKeys(script({ placement: [5, 2, 0, 1, 2, 4] }))).toEqual(['userInput', 'aiOutput', 'worldInfo'])
    expect(placementKeys(script({ placement: undefined }))).toEqual([])
  })

  it('says where the change shows', () => {
    expect(scriptPhase(script({ markdownOnly: true }))).toBe('display')
    expect(scriptPhase(script({ promptOnly: true }))).toBe('prompt')
    expect(scriptPhase(script({}))).toBe('stored')
  })

  it('toggles and deletes one script, keeping the others and unknown fields as they are', () => {
    const list = [script({ scriptName: 'a' }), script({ scriptName: 'b', tavernHelper: { x: 1 } })]
    const toggled = withToggled(list, 1)
    expect(toggled.map((s) => s.disabled)).toEqual([false, true])
    expect(toggled[1]!.tavernHelper).toEqual({ x: 1 })
    expect(list[1]!.disabled).toBe(false)
    expect(withoutScript(list, 0).map((s) => s.scriptName)).toEqual(['b'])
  })

  it('reads the script index a problem names', () => {
    expect(problemIndex('[3].findRegex')).toBe(3)
    expect(problemIndex('')).toBeNull()
  })
})
