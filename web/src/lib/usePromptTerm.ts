// Labels of the prompt inspector's server vocabulary (a block kind, a role, a placement,
// a lore scope, a rule's outcome) in the page's language.
import { useI18n } from 'vue-i18n'

export type PromptTerm = (group: string, value: string | null | undefined) => string

/** `term(group, value)`: the translation of `chat.prompt.<group>.<value>`; a value the
 * messages do not know is shown as it came. */
export function usePromptTerm(): PromptTerm {
  const { t, te } = useI18n()
  return (group, value) => {
    if (!value) return ''
    const key = `chat.prompt.${group}.${value}`
    return te(key) ? t(key) : value
  }
}
