// What the "Import from SillyTavern" section shows, worked out from the server's answers:
// the preview's rows, one progress bar per kind, the report's counts. Kinds the folder has
// none of are left out everywhere, so a small folder gives a short page.
import type {
  StFolderPreview,
  StFolderRequest,
  StImportProgress,
  StImportReport,
  StKind,
  StKindPreview,
  StProblem,
} from '../api/sillytavern'

/** The request for what the form holds: the path trimmed, an empty user left out (the
 * server then takes default-user). Null while there is no path. */
export function folderRequest(path: string, user: string): StFolderRequest | null {
  const p = path.trim()
  if (!p) return null
  const u = user.trim()
  return u ? { path: p, user: u } : { path: p }
}

export function sameRequest(a: StFolderRequest | null, b: StFolderRequest | null): boolean {
  return a !== null && b !== null && a.path === b.path && (a.user ?? null) === (b.user ?? null)
}

export interface PreviewRow {
  kind: StKind
  found: number
  new: number
  changed: number
  /** Here already, as they are there. */
  same: number
}

export function previewRows(preview: StFolderPreview): PreviewRow[] {
  return preview.kinds
    .filter((k) => k.found > 0)
    .map((k) => ({ kind: k.kind, found: k.found, new: k.new, changed: k.changed, same: Math.max(0, k.found - k.new - k.changed) }))
}

/** Whether an import would bring anything: a second run of the same folder would not. */
export function previewBringsAnything(preview: StFolderPreview): boolean {
  return preview.kinds.some((k) => k.new > 0 || k.changed > 0)
}

export interface ProgressBar {
  kind: StKind
  done: number
  total: number
  /** 0..100, whole. */
  percent: number
}

export function percentOf(done: number, total: number): number {
  if (total <= 0) return 100
  return Math.min(100, Math.max(0, Math.floor((done / total) * 100)))
}

/** A bar per kind with something to take. A kind the job has not reached yet answers a
 * total of 0: it keeps the count the preview found, at nothing done. */
export function progressBars(progress: StImportProgress, planned: readonly StKindPreview[] = []): ProgressBar[] {
  const found = new Map(planned.map((k) => [k.kind, k.found]))
  return progress.kinds
    .map((k) => ({ kind: k.kind, done: k.done, total: k.total > 0 ? k.total : (found.get(k.kind) ?? 0) }))
    .filter((k) => k.total > 0)
    .map((k) => ({ ...k, percent: percentOf(k.done, k.total) }))
}

export interface ReportRow {
  kind: StKind
  added: number
  updated: number
  unchanged: number
}

export function reportRows(report: StImportReport): ReportRow[] {
  return report.counts
    .filter((c) => c.added + c.updated + c.unchanged > 0)
    .map((c) => ({ kind: c.kind, added: c.added, updated: c.updated, unchanged: c.unchanged }))
}

/** Whether the import changed anything here (false: the folder was in already). */
export function reportChangedAnything(report: StImportReport): boolean {
  return report.counts.some((c) => c.added > 0 || c.updated > 0)
}

/** Problems in a stable order (by file, then field), so the list reads as the folder does
 * (the server leaves an empty list out). */
export function sortedProblems(problems: readonly StProblem[] = []): StProblem[] {
  return [...problems].sort((a, b) => a.file.localeCompare(b.file) || a.field.localeCompare(b.field))
}
