import { createI18n } from 'vue-i18n'
import { en, zh } from './locales'

export type Locale = 'en' | 'zh'
export const LOCALES: readonly Locale[] = ['zh', 'en']
export const LOCALE_STORAGE_KEY = 'storyloom.locale'

/** The saved choice, else the browser's language: zh* → Chinese, anything else → English. */
export function initialLocale(
  stored: string | null = safeStorageGet(),
  navigatorLanguage: string | undefined = globalThis.navigator?.language,
): Locale {
  if (stored === 'en' || stored === 'zh') return stored
  return (navigatorLanguage ?? '').toLowerCase().startsWith('zh') ? 'zh' : 'en'
}

function safeStorageGet(): string | null {
  try {
    return globalThis.localStorage?.getItem(LOCALE_STORAGE_KEY) ?? null
  } catch {
    return null
  }
}

export function saveLocale(locale: Locale): void {
  try {
    globalThis.localStorage?.setItem(LOCALE_STORAGE_KEY, locale)
  } catch {
    // storage may be disabled; the choice then lasts for this page only
  }
}

export function htmlLang(locale: Locale): string {
  return locale === 'zh' ? 'zh-CN' : 'en'
}

export type MessageSchema = typeof en

export function makeI18n(locale: Locale = initialLocale()) {
  return createI18n<[MessageSchema], Locale, false>({
    legacy: false,
    locale,
    fallbackLocale: 'en',
    messages: { en, zh },
  })
}
