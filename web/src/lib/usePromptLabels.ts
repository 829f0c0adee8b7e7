// The prompt inspector's labels (promptLabels.ts) bound to the page's language.
import { useI18n } from 'vue-i18n'
import { htmlLang, type Locale } from '../i18n'
import {
  cutText,
  formatNumber,
  promptName,
  reasonText,
  ruleText,
  scriptName,
  formatDuration,
  sourceText,
  templateProblemText,
  templateWhere,
  type LabelVocabulary,
  type StructuredCut,
  type StructuredReason,
  type StructuredSource,
  type StructuredTemplateProblem,
} from './promptLabels'

export function usePromptLabels() {
  const { t, te, locale } = useI18n()
  const vocabulary = (): LabelVocabulary => ({
    t: (key, values) => t(key, values ?? {}),
    te: (key) => te(key),
    tag: htmlLang(locale.value as Locale),
  })
  return {
    source: (s: StructuredSource) => sourceText(s, vocabulary()),
    reason: (r: StructuredReason) => reasonText(r, vocabulary()),
    rule: (rule: string | undefined) => ruleText(rule, vocabulary()),
    cut: (c: StructuredCut) => cutText(c, vocabulary()),
    number: (n: number) => formatNumber(n, vocabulary().tag),
    duration: (ms: number) => formatDuration(ms, vocabulary().tag),
    script: (run: { name?: unknown; node?: unknown }) => scriptName(run, vocabulary()),
    promptName: (p: { identifier: string; name?: string | null }) => promptName(p, vocabulary()),
    templateProblem: (p: StructuredTemplateProblem) => templateProblemText(p, vocabulary()),
    templateWhere: (p: StructuredTemplateProblem) => templateWhere(p, vocabulary()),
  }
}
