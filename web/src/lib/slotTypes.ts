// Which slot types may feed which: the rule of storyloom/workflow/slot_types.py
// (`can_connect`), so the canvas refuses a connection before the server would.
// tests/workflowSlotPairs.json lists every pair as Python answers it.

export const JSON_TYPES = ['STRING', 'INTEGER', 'FLOAT', 'BOOLEAN', 'OBJECT', 'ARRAY'] as const
export const ANY = 'ANY'

/** Domain types and the JSON type each one flows into. */
export const DOMAIN_BASES: Readonly<Record<string, string>> = {
  MESSAGES: 'ARRAY',
  KB_ENTRIES: 'ARRAY',
  LORE_HITS: 'ARRAY',
  EMBEDDING: 'OBJECT',
  SKEIN: 'OBJECT',
  STATE_DELTA: 'ARRAY',
}

export const ALL_TYPES: readonly string[] = [...JSON_TYPES, ...Object.keys(DOMAIN_BASES), ANY]

function conversions(): Set<string> {
  const pairs = new Set<string>([
    'INTEGER>FLOAT',
    'INTEGER>STRING',
    'FLOAT>STRING',
    'BOOLEAN>STRING',
    'OBJECT>STRING',
    'ARRAY>STRING',
  ])
  for (const [domain, base] of Object.entries(DOMAIN_BASES)) {
    pairs.add(`${domain}>${base}`)
    pairs.add(`${domain}>STRING`)
  }
  return pairs
}

const CONVERSIONS = conversions()

/** Whether an output of type `source` may feed an input of type `target`. */
export function canConnect(source: string, target: string): boolean {
  if (source === target || source === ANY || target === ANY) return true
  return CONVERSIONS.has(`${source}>${target}`)
}

const COLORS: Readonly<Record<string, string>> = {
  STRING: '#3b82c4',
  INTEGER: '#2e9d6b',
  FLOAT: '#5fb33a',
  BOOLEAN: '#c0662b',
  OBJECT: '#8a56c2',
  ARRAY: '#c24f8a',
  MESSAGES: '#d6a21e',
  KB_ENTRIES: '#1f9fa8',
  LORE_HITS: '#4aa3d9',
  EMBEDDING: '#7a7f2a',
  SKEIN: '#a3459b',
  STATE_DELTA: '#b5544b',
  ANY: '#8a93a3',
}

/** The colour of a slot type's handle and edges; unknown (plugin) types get a stable hue. */
export function slotColor(type: string): string {
  const known = COLORS[type]
  if (known) return known
  let hash = 0
  for (const ch of type) hash = (hash * 31 + ch.charCodeAt(0)) % 360
  return `hsl(${hash}, 45%, 45%)`
}
