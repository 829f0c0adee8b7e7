// The code editor (CodeMirror 6) and the read-only code block: the text in and out through
// v-model, syntax highlighting per language (`tok-*` classes), read-only mode, line numbers.
import { EditorView } from '@codemirror/view'
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import { nextTick } from 'vue'
import CodeBlock from '../src/components/CodeBlock.vue'
import CodeEditor from '../src/components/CodeEditor.vue'
import { highlightLines } from '../src/lib/codeHighlight'
import { codeLanguage, languageOfFile, lineCount } from '../src/lib/codeLanguages'

const LUA = 'local mood = ctx.variables.mood or "calm"\n-- a comment\nctx.variables.count = 3\n'
const JS = 'const n = 2 ** 10\n// note\nctx.variables.n = n\n'
const PY = 'def f(x):\n    return x * 2\nprint(f(21))\n'

function tokens(root: Element, cls: string): string[] {
  return [...root.querySelectorAll(`.${cls}`)].map((e) => e.textContent ?? '')
}

async function settle(): Promise<void> {
  // The parse runs on a timer in the editor; the block loads its parser on demand.
  for (let i = 0; i < 5; i++) {
    await flushPromises()
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('code languages', () => {
  it('maps names, aliases and file extensions onto the known languages', () => {
    expect(['js', 'JavaScript', 'lua', 'py', 'python3', 'ruby', undefined].map(codeLanguage)).toEqual([
      'javascript',
      'javascript',
      'lua',
      'python',
      'python',
      'plain',
      'plain',
    ])
    expect(languageOfFile('mood.lua')).toBe('lua')
    expect(languageOfFile('tidy:clean.js')).toBe('javascript')
    expect(languageOfFile('README')).toBe('plain')
  })

  it('counts lines without the trailing newline', () => {
    expect(lineCount('')).toBe(0)
    expect(lineCount('a')).toBe(1)
    expect(lineCount('a\nb\nc\n')).toBe(3)
  })
})

describe('code highlighting', () => {
  it('marks keywords, strings, numbers and comments of each language', async () => {
    const flat = async (code: string, lang: 'lua' | 'javascript' | 'python') =>
      (await highlightLines(code, lang)).flat().filter((s) => s.cls)
    const lua = await flat(LUA, 'lua')
    expect(lua).toContainEqual({ text: 'local', cls: 'tok-keyword' })
    expect(lua).toContainEqual({ text: '"calm"', cls: 'tok-string' })
    expect(lua.find((s) => s.text.startsWith('--'))?.cls).toContain('tok-comment')
    const js = await flat(JS, 'javascript')
    expect(js).toContainEqual({ text: 'const', cls: 'tok-keyword' })
    expect(js.find((s) => s.text === '10')?.cls).toContain('tok-number')
    const py = await flat(PY, 'python')
    expect(py).toContainEqual({ text: 'def', cls: 'tok-keyword' })
    expect(py.find((s) => s.text === 'f')?.cls).toContain('tok-definition')
  })

  it('keeps plain text as it is, one line per line', async () => {
    const lines = await highlightLines('a < b\nc', 'plain')
    expect(lines).toEqual([[{ text: 'a < b', cls: '' }], [{ text: 'c', cls: '' }]])
  })
})

describe('CodeEditor', () => {
  it('shows the text with line numbers and highlighted Lua tokens', async () => {
    const w = mount(CodeEditor, { props: { modelValue: LUA, language: 'lua' }, attachTo: document.body })
    await settle()
    const root = w.get('[data-testid="code-editor"]')
    expect(root.attributes('data-language')).toBe('lua')
    expect(root.find('.cm-content').text()).toContain('local mood')
    expect(root.findAll('.cm-lineNumbers .cm-gutterElement').map((e) => e.text())).toContain('3')
    expect(tokens(root.element, 'tok-keyword')).toContain('local')
    expect(tokens(root.element, 'tok-string')).toContain('"calm"')
    w.unmount()
  })

  it('switches the highlighting when the language changes', async () => {
    const w = mount(CodeEditor, { props: { modelValue: JS, language: 'lua' }, attachTo: document.body })
    await settle()
    expect(tokens(w.element, 'tok-keyword')).not.toContain('const')
    await w.setProps({ language: 'javascript' })
    await settle()
    expect(w.get('[data-testid="code-editor"]').attributes('data-language')).toBe('javascript')
    expect(tokens(w.element, 'tok-keyword')).toContain('const')
    w.unmount()
  })

  it('gives edits back through v-model and takes new values from outside', async () => {
    const w = mount(CodeEditor, { props: { modelValue: 'x = 1', language: 'python' }, attachTo: document.body })
    await settle()
    const view = (w.vm as unknown as { $: { exposed: Record<string, unknown> } }).$.exposed
    expect(typeof view.focus).toBe('function')
    // Typing goes through CodeMirror's DOM observer, which happy-dom does not drive: feed
    // the change as a transaction on the editor found from its DOM.
    const editor = EditorView.findFromDOM(w.get('.cm-editor').element as HTMLElement)!
    editor.dispatch({ changes: { from: editor.state.doc.length, insert: '\ny = 2' } })
    expect(w.emitted('update:modelValue')!.at(-1)).toEqual(['x = 1\ny = 2'])
    await w.setProps({ modelValue: 'z = 3' })
    expect(editor.state.doc.toString()).toBe('z = 3')
    // An outside value equal to the text changes nothing.
    const before = w.emitted('update:modelValue')!.length
    await w.setProps({ modelValue: 'z = 3' })
    await nextTick()
    expect(w.emitted('update:modelValue')!.length).toBe(before)
    w.unmount()
  })

  it('does not let a read-only editor change', async () => {
    const w = mount(CodeEditor, { props: { modelValue: 'print(1)', language: 'python', readOnly: true }, attachTo: document.body })
    await settle()
    const content = w.get('.cm-content')
    expect(content.attributes('contenteditable')).toBe('false')
    expect(w.get('[data-testid="code-editor"]').attributes('data-readonly')).toBe('true')
    w.unmount()
  })
})

describe('CodeBlock', () => {
  it('renders numbered lines and colours them once the parser is loaded', async () => {
    const w = mount(CodeBlock, { props: { code: PY, language: 'python' } })
    expect(w.findAll('.code-line')).toHaveLength(3)
    expect(w.text()).toContain('return x * 2')
    await settle()
    const block = w.get('[data-testid="code-block"]')
    expect(block.attributes('data-highlighted')).toBe('true')
    expect(tokens(block.element, 'tok-keyword')).toEqual(expect.arrayContaining(['def', 'return']))
    expect(w.findAll('.code-line')).toHaveLength(3)
  })

  it('shows plain text unhighlighted', async () => {
    const w = mount(CodeBlock, { props: { code: '<b>not html</b>' } })
    await settle()
    expect(w.get('[data-testid="code-block"]').attributes('data-highlighted')).toBe('false')
    expect(w.text()).toBe('<b>not html</b>')
    expect(w.find('b').exists()).toBe(false)
  })
})
