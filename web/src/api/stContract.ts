// TEMPORARY: the shapes of storyloom/server/st_move_in_views.py, written by hand until the
// /api/sillytavern routes land and `npm run gen:api` generates them. Delete this file then
// and take the types from ./types (Schemas['StFolderPreview'] ...).
export type StKind =
  | 'characters'
  | 'worlds'
  | 'personas'
  | 'chats'
  | 'groups'
  | 'group_chats'
  | 'presets'
  | 'instruct'
  | 'context'
  | 'regex'
  | 'variables'
  | 'quick_replies'
  | 'backgrounds'
  | 'sprites'
  | 'themes'

export interface StFolderRequest {
  path: string
  user?: string | null
}
export interface StProblem {
  file: string
  field: string
  reason: string
}
export interface StInactive {
  what: string
  why: string
}
export interface StKindPreview {
  kind: StKind
  found: number
  new: number
  changed: number
}
export interface StFolderPreview {
  path: string
  layout: 'user' | 'root' | 'public'
  kinds: StKindPreview[]
  problems: StProblem[]
}
export interface StKindCount {
  kind: StKind
  added: number
  updated: number
  unchanged: number
}
export interface StImportReport {
  path: string
  counts: StKindCount[]
  inactive: StInactive[]
  problems: StProblem[]
}
export interface StImportJob {
  job_id: string
}
export interface StKindProgress {
  kind: StKind
  done: number
  total: number
}
export interface StImportProgress {
  job_id: string
  state: 'running' | 'done' | 'failed'
  kinds: StKindProgress[]
  report?: StImportReport | null
  error?: string | null
}
