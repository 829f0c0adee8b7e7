// Typed calls for /api/sillytavern: moving a SillyTavern user folder in
// (storyloom/server/st_move_in_views.py describes the shapes).
import { type Fetch, requestJson } from './client'
import type {
  StFolderPreview,
  StFolderRequest,
  StImportJob,
  StImportProgress,
  StImportReport,
  StInactive,
  StKind,
  StKindCount,
  StKindPreview,
  StKindProgress,
  StProblem,
} from './types'

export type {
  StFolderPreview,
  StFolderRequest,
  StImportJob,
  StImportProgress,
  StImportReport,
  StInactive,
  StKind,
  StKindCount,
  StKindPreview,
  StKindProgress,
  StProblem,
}

/** What an import of the folder would bring; nothing is written. */
export function previewStFolder(request: StFolderRequest, fetchImpl?: Fetch): Promise<StFolderPreview> {
  return requestJson<StFolderPreview>('POST', '/api/sillytavern/preview', request, fetchImpl)
}

/** Start importing the folder (202): follow the job with getStImport. */
export function startStImport(request: StFolderRequest, fetchImpl?: Fetch): Promise<StImportJob> {
  return requestJson<StImportJob>('POST', '/api/sillytavern/import', request, fetchImpl)
}

export function getStImport(jobId: string, fetchImpl?: Fetch): Promise<StImportProgress> {
  return requestJson<StImportProgress>('GET', `/api/sillytavern/import/${encodeURIComponent(jobId)}`, undefined, fetchImpl)
}
