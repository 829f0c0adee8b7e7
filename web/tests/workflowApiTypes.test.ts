// The hand-written shapes of src/api/workflows.ts against the server's OpenAPI schema
// (src/api/schema.d.ts, generated): a server-side change that breaks the page fails the
// typecheck (`npm run build`) here. The workflow file itself is left out: its schema marks
// `nodes` optional (it has a default), and getWorkflow fills in what is missing.
import { describe, expect, it } from 'vitest'
import type { components } from '../src/api/schema'
import type {
  HistoryEntry,
  NodeTypeInfo,
  RunEvents,
  RunSummary,
  SaveResult,
  ValidationReport,
  WorkflowList,
  WorkflowProblem,
} from '../src/api/workflows'

type Schemas = components['schemas']

function accepts<T>(value: T): T {
  return value
}

describe('workflow API shapes', () => {
  it('accept what the server declares it sends', () => {
    const checks = [
      (v: Schemas['NodeTypeInfo']) => accepts<NodeTypeInfo>(v),
      (v: Schemas['WorkflowList']) => accepts<WorkflowList>(v),
      (v: Schemas['SavedWorkflow']) => accepts<Omit<SaveResult, 'workflow'>>(v),
      (v: Schemas['ValidationReport']) => accepts<ValidationReport>(v),
      (v: Schemas['WorkflowProblem']) => accepts<WorkflowProblem>(v),
      (v: Schemas['HistoryEntry']) => accepts<HistoryEntry>(v),
      (v: Schemas['RunInfo']) => accepts<RunSummary>(v),
      (v: Schemas['RunDetail']) => accepts<Omit<RunEvents, 'events'>>(v),
    ]
    expect(checks).toHaveLength(8)
  })
})
