// The logic behind the Tools page, kept free of Vue so it can be unit-tested: searching
// tools, tool-id globs as the server matches them (fnmatch), which permissions enabling a
// plugin must grant, and the words shown for callers and durations.
import type { ToolInfo } from '../api/tools'
import type { PluginInfo } from '../api/plugins'

/** Tools whose id, name, description or source hold every word of `query` (any case). */
export function searchTools<T extends ToolInfo>(tools: readonly T[], query: string): T[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean)
  if (!words.length) return [...tools]
  return tools.filter((tool) => {
    const text = [tool.id, tool.displayName, tool.description, tool.source, tool.implementation].join('\n').toLowerCase()
    return words.every((w) => text.includes(w))
  })
}

/** Ids matching `query` (any part of the id or name), for the inventory picker. */
export function searchIds(tools: readonly ToolInfo[], query: string): string[] {
  return searchTools(tools, query).map((t) => t.id)
}

const globCache = new Map<string, RegExp>()

/** Python's fnmatch.fnmatchcase as a RegExp: `*` any run, `?` one character, `[seq]`,
 * `[!seq]`; nothing else is special (`:` and `.` are plain). */
export function globToRegExp(glob: string): RegExp {
  const cached = globCache.get(glob)
  if (cached) return cached
  let out = ''
  let i = 0
  while (i < glob.length) {
    const c = glob[i]!
    i += 1
    if (c === '*') out += '.*'
    else if (c === '?') out += '.'
    else if (c === '[') {
      let j = i
      if (glob[j] === '!') j += 1
      if (glob[j] === ']') j += 1
      while (j < glob.length && glob[j] !== ']') j += 1
      if (j >= glob.length) out += '\\['
      else {
        let body = glob.slice(i, j).replace(/\\/g, '\\\\')
        i = j + 1
        if (body.startsWith('!')) body = `^${body.slice(1)}`
        else if (body.startsWith('^')) body = `\\${body}`
        out += `[${body}]`
      }
    } else out += c.replace(/[.+^${}()|\\/\]]/g, '\\$&')
  }
  const re = new RegExp(`^${out}$`, 's')
  globCache.set(glob, re)
  return re
}

export function globMatches(glob: string, id: string): boolean {
  try {
    return globToRegExp(glob).test(id)
  } catch {
    return false
  }
}

/** The ids among `ids` that `glob` matches. */
export function matchingIds(glob: string, ids: readonly string[]): string[] {
  return ids.filter((id) => globMatches(glob, id))
}

/** One glob or id per line (commas also separate); blanks dropped, duplicates once. */
export function parseGlobList(text: string): string[] {
  const out: string[] = []
  for (const part of text.split(/[\n,]/)) {
    const item = part.trim()
    if (item && !out.includes(item)) out.push(item)
  }
  return out
}

export function globListText(globs: readonly string[]): string {
  return globs.join('\n')
}

/** The wrap and override permissions a plugin asks for, as the server grants them: wraps
 * as `wrap:ui:<Component>`, overrides as declared (`ui:<Component>`). A plugin that
 * replaces a core service is refused when its manifest is read. */
export function requestedOverrides(plugin: PluginInfo): string[] {
  return [
    ...plugin.declares.ui.wrap.map((component) => `wrap:${component}`),
    ...plugin.declares.ui.override,
  ]
}

/** Whether enabling must ask the user to grant wraps or overrides explicitly. */
export function needsGrant(plugin: PluginInfo): boolean {
  return requestedOverrides(plugin).length > 0
}

/** Whether enabling asks if its script tools may use the network (it declares so). */
export function asksNetwork(plugin: PluginInfo): boolean {
  return plugin.declares.network === true
}

/** Everything a plugin declares, as labelled lists (empty ones left out), for the card. */
export function declaredItems(plugin: PluginInfo): { kind: string; items: string[] }[] {
  const d = plugin.declares
  const all = [
    { kind: 'nodes', items: d.nodes },
    { kind: 'tools', items: d.tools },
    { kind: 'workflows', items: d.workflows },
    { kind: 'hooks', items: d.hooks },
    { kind: 'uiWrap', items: d.ui.wrap },
    { kind: 'uiInject', items: d.ui.inject },
    { kind: 'uiOverride', items: d.ui.override },
  ]
  return all.filter((g) => g.items.length > 0)
}

/** "user", "agent: Narrator", "mcp: claude": the audit log's caller in a few words. */
export function callerText(caller: unknown): string {
  if (typeof caller === 'string') return caller
  if (caller && typeof caller === 'object') {
    const record = caller as Record<string, unknown>
    const kind = typeof record.kind === 'string' ? record.kind : ''
    const name = typeof record.name === 'string' ? record.name : ''
    if (kind && name && name !== kind) return `${kind}: ${name}`
    if (kind || name) return kind || name
  }
  return caller === null || caller === undefined ? '' : JSON.stringify(caller)
}

/** 0.4 → "0.4 ms", 1530 → "1.53 s". */
export function durationText(ms: number): string {
  if (!Number.isFinite(ms)) return ''
  if (ms < 1000) return `${Number(ms.toFixed(ms < 10 ? 1 : 0))} ms`
  return `${Number((ms / 1000).toFixed(2))} s`
}

/** A result or arguments value for a <pre>: strings as they are, anything else as JSON. */
export function prettyValue(value: unknown): string {
  if (typeof value === 'string') return value
  if (value === undefined) return ''
  try {
    return JSON.stringify(value, null, 2)
  } catch {
    return String(value)
  }
}
