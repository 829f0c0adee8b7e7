// Static syntax highlighting for code that is only read (a CodeInterpreter call in the chat):
// the language's Lezer parser and `classHighlighter` turn the code into lines of spans with
// `tok-*` classes, the same classes the editor uses (styles/code.css colours them). No editor
// is created; each parser is imported only when code in its language is first shown.
import type { Parser } from '@lezer/common'
import type { CodeLanguage } from './codeLanguages'

/** A run of text and its token classes ("" for plain text). */
export interface CodeSpan {
  text: string
  cls: string
}

export type CodeLine = CodeSpan[]

const parsers = new Map<CodeLanguage, Promise<Parser | null>>()

async function loadParser(language: CodeLanguage): Promise<Parser | null> {
  switch (language) {
    case 'python':
      return (await import('@lezer/python')).parser
    case 'javascript':
      return (await import('@lezer/javascript')).parser
    case 'lua': {
      // Lua has no Lezer grammar: the legacy stream mode, wrapped as a language, parses it.
      const [{ StreamLanguage }, { lua }] = await Promise.all([
        import('@codemirror/language'),
        import('@codemirror/legacy-modes/mode/lua'),
      ])
      return StreamLanguage.define(lua).parser
    }
    default:
      return null
  }
}

/** The parser of `language`, loaded once. */
export function parserFor(language: CodeLanguage): Promise<Parser | null> {
  let found = parsers.get(language)
  if (!found) {
    found = loadParser(language).catch(() => null)
    parsers.set(language, found)
  }
  return found
}

/** `code` as plain lines (before, or without, a parser). */
export function plainLines(code: string): CodeLine[] {
  return code.split('\n').map((text) => (text ? [{ text, cls: '' }] : []))
}

/** `code` split into lines of highlighted spans. */
export async function highlightLines(code: string, language: CodeLanguage): Promise<CodeLine[]> {
  const parser = await parserFor(language)
  if (!parser) return plainLines(code)
  const { classHighlighter, highlightCode } = await import('@lezer/highlight')
  const lines: CodeLine[] = [[]]
  highlightCode(
    code,
    parser.parse(code),
    classHighlighter,
    (text, cls) => lines[lines.length - 1]!.push({ text, cls }),
    () => lines.push([]),
  )
  return lines
}
