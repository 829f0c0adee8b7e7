import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { en, zh } from '../src/locales'
import { initialLocale } from '../src/i18n'
import { AREAS } from '../src/router'

function flatten(obj: unknown, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>()
  if (obj && typeof obj === 'object' && !Array.isArray(obj)) {
    for (const [k, v] of Object.entries(obj)) {
      const key = prefix ? `${prefix}.${k}` : k
      if (v && typeof v === 'object') for (const [kk, vv] of flatten(v, key)) out.set(kk, vv)
      else out.set(key, v)
    }
  }
  return out
}

const enKeys = flatten(en)
const zhKeys = flatten(zh)

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return /\.(ts|vue)$/.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })
}

describe('locale files', () => {
  it('have identical key sets', () => {
    const onlyEn = [...enKeys.keys()].filter((k) => !zhKeys.has(k))
    const onlyZh = [...zhKeys.keys()].filter((k) => !enKeys.has(k))
    expect(onlyEn).toEqual([])
    expect(onlyZh).toEqual([])
  })

  it('have non-empty string messages only', () => {
    for (const [map, name] of [
      [enKeys, 'en'],
      [zhKeys, 'zh'],
    ] as const) {
      for (const [key, value] of map) {
        expect(typeof value, `${name}:${key}`).toBe('string')
        expect((value as string).trim(), `${name}:${key}`).not.toBe('')
      }
    }
  })

  it('use the same placeholders in both languages', () => {
    const names = (s: unknown) => [...String(s).matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort()
    for (const [key, value] of enKeys) expect(names(zhKeys.get(key)), key).toEqual(names(value))
  })

  it('avoid characters vue-i18n treats as syntax', () => {
    // "@" starts a linked message and "|" separates plural forms.
    for (const [key, value] of [...enKeys, ...zhKeys]) expect(String(value), key).not.toMatch(/[@|]/)
  })

  it('contain every literal key the source uses', () => {
    const srcDir = join(__dirname, '..', 'src')
    const used = new Set<string>()
    for (const file of sourceFiles(srcDir)) {
      const text = readFileSync(file, 'utf8')
      for (const m of text.matchAll(/\bt\(\s*'([a-zA-Z0-9_.]+)'/g)) used.add(m[1]!)
      for (const m of text.matchAll(/'(settings\.errors\.[a-z_]+)'/g)) used.add(m[1]!)
    }
    expect(used.size).toBeGreaterThan(20)
    const missing = [...used].filter((k) => !enKeys.has(k))
    expect(missing).toEqual([])
  })

  it('contain the keys built at run time', () => {
    const dynamic = [
      ...AREAS.flatMap((a) => [`pages.${a}.title`, `pages.${a}.description`, `nav.${a}`]),
      'nav.settings',
      ...['user_llm', 'agent_llm', 'embedding'].flatMap((r) => [
        `settings.sections.${r}.title`,
        `settings.sections.${r}.description`,
      ]),
      ...['connecting', 'connected', 'busy', 'error', 'disconnected'].map((s) => `ws.${s}`),
    ]
    expect(dynamic.filter((k) => !enKeys.has(k))).toEqual([])
  })
})

describe('initialLocale', () => {
  it('prefers the stored choice', () => {
    expect(initialLocale('en', 'zh-CN')).toBe('en')
    expect(initialLocale('zh', 'en-US')).toBe('zh')
  })

  it('falls back to the browser language', () => {
    expect(initialLocale(null, 'zh-CN')).toBe('zh')
    expect(initialLocale(null, 'zh-TW')).toBe('zh')
    expect(initialLocale(null, 'ZH')).toBe('zh')
    expect(initialLocale(null, 'en-GB')).toBe('en')
    expect(initialLocale(null, 'ja')).toBe('en')
    expect(initialLocale('fr', undefined)).toBe('en')
  })
})
