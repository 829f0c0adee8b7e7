import { describe, expect, it } from 'vitest'
import openapi from '../src/api/openapi.json'
import { CLIENT_HOOKS, WRAP_POINTS } from '../src/extensions/extensionApi'

// The server decides which wrap points and client hooks exist (tools/plugin_manifest.py);
// the web app keeps them as runtime lists, which must be exactly the API's enums.
function itemsEnum(property: string): string[] {
  const info = openapi.components.schemas.ExtensionInfo as unknown as {
    properties: Record<string, { items?: { enum?: string[] } }>
  }
  const values = info.properties[property]?.items?.enum
  if (!values) throw new Error(`ExtensionInfo.${property} has no enum in openapi.json`)
  return values
}

describe('the extension API matches the server', () => {
  it('has the wrap points the server grants, no more, no fewer', () => {
    expect([...WRAP_POINTS].sort()).toEqual([...itemsEnum('wraps')].sort())
    expect([...WRAP_POINTS].sort()).toEqual([...itemsEnum('overrides')].sort())
  })

  it('has the client hooks a manifest may declare', () => {
    expect([...CLIENT_HOOKS].sort()).toEqual([...itemsEnum('hooks')].sort())
  })
})
