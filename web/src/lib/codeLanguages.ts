// The languages code is shown and edited in (script node code, CodeInterpreter calls) and
// how a free-form name from the server maps onto them. Kept free of editor imports: the
// parsers are loaded on demand (lib/codeHighlight.ts, components/CodeEditor.vue) so the
// chat page does not carry them until code is shown.

export type CodeLanguage = 'javascript' | 'lua' | 'python' | 'plain'

const ALIASES: Record<string, CodeLanguage> = {
  javascript: 'javascript',
  js: 'javascript',
  node: 'javascript',
  lua: 'lua',
  python: 'python',
  py: 'python',
  python3: 'python',
}

/** A language name as config, a tool argument or a file extension give it; anything else is plain text. */
export function codeLanguage(name: unknown): CodeLanguage {
  if (typeof name !== 'string') return 'plain'
  return ALIASES[name.trim().toLowerCase()] ?? 'plain'
}

/** The language of a script file by its extension (`mood.lua`, `plugin:tidy.js`). */
export function languageOfFile(name: string): CodeLanguage {
  const dot = name.lastIndexOf('.')
  return dot < 0 ? 'plain' : codeLanguage(name.slice(dot + 1))
}

const LABELS: Record<CodeLanguage, string> = { javascript: 'JavaScript', lua: 'Lua', python: 'Python', plain: '' }

/** The language's name as shown ("Python"); empty for plain text. */
export function languageLabel(language: CodeLanguage): string {
  return LABELS[language]
}

/** Lines of `code`, not counting one trailing newline. */
export function lineCount(code: string): number {
  if (code === '') return 0
  return code.replace(/\r?\n$/, '').split(/\r?\n/).length
}
