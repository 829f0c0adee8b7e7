// What every field of a generated form needs from the page: the schema (for nested
// defaults), the errors by field path, and what is being edited (a knowledge entry, or a
// workflow node's config).
import type { ComputedRef, InjectionKey } from 'vue'
import type { WorkflowSummary } from '../api/workflows'
import type { FieldSpec, JsonSchema } from './jsonSchema'

export interface EntryFormContext {
  root: JsonSchema
  /** Errors of the edited entry, keyed by field path inside the entry (`a.b[0].c`). */
  errors: ComputedRef<Map<string, string[]>>
  kbId: ComputedRef<string>
  entryId: ComputedRef<string>
  /** `data-testid` of a field: this prefix and its path (default `field-`). */
  testidPrefix?: string
  /** Labels, hints and long-text fields from the knowledge translations (default true);
   * off, the schema's own titles and descriptions are shown. */
  knowledgeLabels?: boolean
  /** What a `workflow` field may name, and the workflow being edited (never offered). */
  workflows?: ComputedRef<WorkflowSummary[]>
  workflowId?: ComputedRef<string>
  /** Top-level fields whose value is not used (a connected input of the same name). */
  overridden?: ComputedRef<Set<string>>
  /** The edited object as shown (defaults filled in): what a field that depends on a
   * sibling reads (a code field's `language`). */
  values?: ComputedRef<unknown>
}

export const ENTRY_FORM: InjectionKey<EntryFormContext> = Symbol('entry-form')

/** Long text fields get a textarea rather than a one-line input. */
export const MULTILINE_FIELDS = new Set(['author_notes', 'editor_description', 'text'])

/** Fields shown first in their object (the schema order puts them later). */
export const FIRST_FIELDS = ['value']

/** One field of an object form: the props of its SchemaField and where its new value goes. */
export interface ChildField {
  key: string
  props: { spec: FieldSpec; path: (string | number)[]; modelValue: unknown; level: number }
  set: (value: unknown) => void
}

/** The fields `specs` of the object `value` at `path`; a change gives `update` a new object. */
export function childFields(
  specs: readonly FieldSpec[],
  path: readonly (string | number)[],
  value: Record<string, unknown> | null | undefined,
  level: number,
  update: (next: Record<string, unknown>) => void,
): ChildField[] {
  return specs.map((spec) => ({
    key: spec.key,
    props: { spec, path: [...path, spec.key], modelValue: value?.[spec.key], level },
    set: (v: unknown) => update({ ...(value ?? {}), [spec.key]: v }),
  }))
}

/** The field the content editor (reference marks, `{{{` completion) replaces. */
export const CONTENT_PATH = 'content.value'
