import { describe, expect, it } from 'vitest'
import {
  buildConnectionUpdate,
  cardConnection,
  connectionChoices,
  connectionFormFromView,
  connectionNameProblem,
  NEW_CONNECTION,
  withCardConnection,
} from '../src/lib/connectionProfiles'

describe('connection form', () => {
  it('builds a whole update with the API and templates, the key left out unless typed', () => {
    const form = connectionFormFromView('Kobold', { ...NEW_CONNECTION, api_key_set: true })
    form.api = 'koboldcpp'
    form.base_url = ' http://127.0.0.1:5001 '
    form.instruct_template = ' Mistral V3-Tekken '
    form.temperature = '0.7'
    const built = buildConnectionUpdate({ ...NEW_CONNECTION, api_key_set: true }, form)
    expect(built.nameError).toBeNull()
    expect(built.errors).toEqual({})
    expect(built.update).toMatchObject({
      api: 'koboldcpp',
      base_url: 'http://127.0.0.1:5001',
      instruct_template: 'Mistral V3-Tekken',
      parameters: { temperature: 0.7 },
    })
    expect('api_key' in built.update).toBe(false)
    expect('api_key_set' in built.update).toBe(false)
    form.clear_key = true
    expect(buildConnectionUpdate(NEW_CONNECTION, form).update.api_key).toBe('')
  })

  it('names what is wrong with a name', () => {
    expect(connectionNameProblem('')).toBe('connections.errors.nameEmpty')
    expect(connectionNameProblem(' x')).toBe('connections.errors.nameSpaces')
    expect(connectionNameProblem('a/b')).toBe('connections.errors.nameChars')
    expect(connectionNameProblem('x'.repeat(81))).toBe('connections.errors.nameLong')
    expect(connectionNameProblem('Home', ['Home'])).toBe('connections.errors.nameTaken')
    expect(connectionNameProblem('OpenAI gpt-4o - Default')).toBeNull()
    const form = connectionFormFromView('', NEW_CONNECTION)
    expect(buildConnectionUpdate(NEW_CONNECTION, form).nameError).toBe('connections.errors.nameEmpty')
  })
})

describe('connection choices', () => {
  it('lists every connection by name and keeps a missing pick, marked once loaded', () => {
    expect(connectionChoices(['b', 'a'], null)).toEqual([
      { name: 'a', missing: false },
      { name: 'b', missing: false },
    ])
    expect(connectionChoices(['a'], 'gone')).toContainEqual({ name: 'gone', missing: true })
    expect(connectionChoices([], 'gone', false)).toEqual([{ name: 'gone', missing: false }])
  })

  it('reads and writes a card extension without touching the others', () => {
    const extensions = { depth_prompt: { prompt: 'x' }, storyloom: { agent_profile: 'dm' } }
    const set = withCardConnection(extensions, 'Home')
    expect(set).toEqual({ depth_prompt: { prompt: 'x' }, storyloom: { agent_profile: 'dm', connection: 'Home' } })
    expect(cardConnection(set)).toBe('Home')
    expect(withCardConnection(set, null)).toEqual(extensions)
    expect(withCardConnection({ storyloom: { connection: 'x' } }, null)).toEqual({})
    expect(cardConnection({})).toBeNull()
  })
})
