import { describe, expect, it } from 'vitest'
import type { CardScripts } from '../src/api/characters'
import { loreCut, scriptsOff, scriptsOffKey } from '../src/lib/cardNotices'

const scripts: CardScripts = {
  needs_answer: false,
  regex: [
    { id: 'bar', name: '状态栏', scope: 'display', frame: true, frame_scripts: true, status: 'runs' },
    { id: 'think', name: '去思考', scope: 'both', frame: false, frame_scripts: false, status: 'runs' },
    { id: 'old', name: 'off', scope: 'both', frame: false, frame_scripts: false, status: 'off_in_card' },
  ],
  helper: [
    { id: 'mvu', name: 'MVU', kind: 'mvu_bundle', info: '', status: 'native' },
    { id: 'daily', name: '日替', kind: 'other', info: '', status: 'not_allowed' },
  ],
}

describe('scriptsOff', () => {
  it('counts what the chat switched off and what the character was not allowed', () => {
    const off = scriptsOff(scripts, { allow_regex_scripts: false, allow_html_scripts: false })
    expect(off).toEqual({ regexOff: 2, framesOff: 1, helperNative: 1, helperNotAllowed: 1, helperNotAllowedNames: ['日替'] })
    expect(scriptsOffKey('c1', off!)).toBe('c1:scripts:2:1:1:1')
  })

  it('says nothing when everything the card ships runs here', () => {
    const allowed: CardScripts = { ...scripts, helper: (scripts.helper ?? []).slice(0, 1) }
    expect(scriptsOff(allowed, { allow_regex_scripts: true, allow_html_scripts: true })).toBeNull()
  })
})

describe('loreCut', () => {
  it('reads the reply summary and ignores anything else', () => {
    expect(loreCut({ extra: { lore_cut: { count: 3, constant: ['世界设定', 7], budget: 150 } } })).toEqual({
      count: 3,
      constant: ['世界设定'],
      budget: 150,
    })
    expect(loreCut({ extra: {} })).toBeNull()
    expect(loreCut({ extra: { lore_cut: { count: 0 } } })).toBeNull()
    expect(loreCut(null)).toBeNull()
  })
})
