// A CodeInterpreter call as the chat shows it: the code the model sent (the step's
// arguments) and what the sandbox gave back (the step's result, storyloom's CodeRunResult:
// stdout, stderr, the last expression's value, files written, the limit that stopped it,
// the error). Read defensively: a step is stored JSON from any version of the server.
import type { ToolStep } from './chatTools'
import { type CodeLanguage, codeLanguage } from './codeLanguages'

export const CODE_INTERPRETER_TOOL = 'CodeInterpreter:execute'

/** A file the code left in its scratch folder; `text` when it is small text. */
export interface CodeRunFile {
  name: string
  size: number
  text: string | null
}

export interface CodeRun {
  language: CodeLanguage
  code: string
  /** The sandbox answered (false: the call was refused or failed before running). */
  ran: boolean
  stdout: string
  stderr: string
  /** The last expression's value as text, or null. */
  value: string | null
  files: CodeRunFile[]
  durationMs: number
  /** The limit that stopped the run ("wall_time", "memory", …), or null. */
  limit: string | null
  exitCode: number | null
  /** The exception's last line, or null. */
  error: string | null
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '')
const strOrNull = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

function valueText(v: unknown): string | null {
  if (v === undefined || v === null) return null
  if (typeof v === 'string') return v
  try {
    return JSON.stringify(v)
  } catch {
    return String(v)
  }
}

function fileOf(raw: unknown): CodeRunFile | null {
  if (!isRecord(raw) || typeof raw.name !== 'string') return null
  return { name: raw.name, size: num(raw.size) ?? 0, text: typeof raw.text === 'string' ? raw.text : null }
}

/** The CodeInterpreter call of a step, or null for any other tool. */
export function codeRunOf(step: Pick<ToolStep, 'tool' | 'arguments' | 'result' | 'ok'>): CodeRun | null {
  if (step.tool !== CODE_INTERPRETER_TOOL) return null
  const args = step.arguments
  const result = step.ok && isRecord(step.result) ? step.result : null
  return {
    language: codeLanguage(result?.language ?? args.language ?? 'python'),
    code: str(args.code),
    ran: result !== null,
    stdout: str(result?.stdout),
    stderr: str(result?.stderr),
    value: valueText(result?.value),
    files: Array.isArray(result?.files) ? result.files.map(fileOf).filter((f): f is CodeRunFile => f !== null) : [],
    durationMs: num(result?.duration_ms ?? result?.durationMs) ?? 0,
    limit: strOrNull(result?.limit),
    exitCode: num(result?.exit_code ?? result?.exitCode),
    error: strOrNull(result?.error),
  }
}

/** One line for the step's summary: the error, else the value, else stdout's last line. */
export function codeRunSummary(run: CodeRun, max = 60): string {
  const pick = run.error ?? run.value ?? run.stdout.trimEnd().split('\n').at(-1) ?? ''
  const text = pick.replace(/\s+/g, ' ').trim()
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** "512 B", "3.4 KB", "1.2 MB". */
export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
}
