// Save / Test connection for one Settings section, with the result box and field errors.
import { computed, ref } from 'vue'
import { useI18n } from 'vue-i18n'
import { ApiError } from '../api/client'
import { putSettings, testConnection } from '../api/settings'
import type {
  ChatEndpointUpdate,
  EmbeddingEndpointUpdate,
  Role,
  SettingsUpdate,
  SettingsView,
} from '../api/types'
import { type Built, type ClientErrors, type FormField, splitProblems } from './settingsForm'
import { runSettingsBeforeSave } from '../extensions/extensionApi'
import { refusalMessage } from '../extensions/hookMessages'

export interface SectionResult {
  ok: boolean
  lines: string[]
  latencyMs?: number | null
}

type Update = ChatEndpointUpdate | EmbeddingEndpointUpdate

export function useEndpointSection(
  role: Role,
  build: () => Built<Update>,
  shownFields: () => readonly FormField[],
  onSaved: (view: SettingsView) => void,
) {
  const { t } = useI18n()
  const saving = ref(false)
  const testing = ref(false)
  const result = ref<SectionResult | null>(null)
  const clientErrors = ref<ClientErrors>({})
  const serverErrors = ref<Partial<Record<FormField, string>>>({})
  const models = ref<string[]>([])
  const busy = computed(() => saving.value || testing.value)

  function errorFor(field: FormField): string {
    const key = clientErrors.value[field]
    return key ? t(key) : (serverErrors.value[field] ?? '')
  }

  function reset(): void {
    result.value = null
    clientErrors.value = {}
    serverErrors.value = {}
  }

  /** Build the update, or show the client-side problems and return null. */
  function prepare(): Update | null {
    reset()
    const built = build()
    if (Object.keys(built.errors).length) {
      clientErrors.value = built.errors
      result.value = { ok: false, lines: [t('settings.result.fixFields')] }
      return null
    }
    return built.update
  }

  function showError(exc: unknown): void {
    const refused = refusalMessage(exc, t)
    if (refused) {
      result.value = { ok: false, lines: [refused] }
      return
    }
    if (exc instanceof ApiError) {
      if (exc.isNetworkError) {
        result.value = { ok: false, lines: [t('settings.errors.network', { message: exc.message })] }
        return
      }
      const split = splitProblems(exc.problems, role, shownFields())
      serverErrors.value = split.fields
      const lines = Object.keys(split.fields).length ? [t('settings.result.fixFields')] : []
      if (split.other.length) lines.push(...split.other)
      else if (!lines.length) lines.push(exc.message)
      result.value = { ok: false, lines }
      return
    }
    result.value = { ok: false, lines: [exc instanceof Error ? exc.message : String(exc)] }
  }

  async function save(): Promise<void> {
    const update = prepare()
    if (!update) return
    saving.value = true
    try {
      // Plugins may check or change the settings, or refuse the save (hook:client:settings:before-save).
      const body: SettingsUpdate = await runSettingsBeforeSave<SettingsUpdate>({ [role]: update })
      const view = await putSettings(body)
      onSaved(view)
      result.value = { ok: true, lines: [t('settings.result.saved')] }
    } catch (exc) {
      showError(exc)
    } finally {
      saving.value = false
    }
  }

  async function test(): Promise<void> {
    const update = prepare()
    if (!update) return
    testing.value = true
    try {
      const report = await testConnection(role, update)
      const lines = [report.message]
      if (report.warning) lines.push(report.warning)
      if (report.models?.length) {
        models.value = report.models
        const shown = report.models.slice(0, 8).join(', ')
        lines.push(t('settings.result.models', { models: report.models.length > 8 ? `${shown}, …` : shown }))
      }
      if (report.dimensions) lines.push(t('settings.result.dimensions', { n: report.dimensions }))
      result.value = { ok: report.ok, lines, latencyMs: report.latency_ms }
    } catch (exc) {
      showError(exc)
    } finally {
      testing.value = false
    }
  }

  return { saving, testing, busy, result, models, errorFor, save, test, reset }
}
