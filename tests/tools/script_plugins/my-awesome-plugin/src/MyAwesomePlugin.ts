// MyAwesomePlugin:doSomething, a storyloom script tool (docs/tools.md §6.2).
//
// The seed names this file .ts, and the tool runs it with `node src/MyAwesomePlugin.ts`:
// its content is plain JavaScript (no type annotations), which Node runs as written
// (Node 20 loads a file of unknown extension as CommonJS; Node 22.18+ and 23.6+, which
// strip types from .ts files, run it unchanged too).
//
// stdin: one JSON line {"arguments": {"input": ...}, "config": {"enableFeatureX": ...}, "tool": ...}
// stdout: one JSON line {"result": ...} or {"error": "..."}
'use strict'

function doSomething(args, config) {
  if (typeof args.input !== 'string') throw new Error('input must be a string')
  const input = args.input
  const result = { input, length: Array.from(input).length, featureX: config.enableFeatureX === true }
  if (result.featureX) {
    result.upper = input.toUpperCase()
    result.words = input.split(/\s+/).filter(Boolean).length
    result.reversed = Array.from(input).reverse().join('')
  }
  return result
}

let raw = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  raw += chunk
})
process.stdin.on('end', () => {
  let reply
  try {
    const request = JSON.parse(raw)
    reply = { result: doSomething(request.arguments || {}, request.config || {}) }
  } catch (err) {
    reply = { error: err instanceof Error ? err.message : String(err) }
  }
  process.stdout.write(JSON.stringify(reply) + '\n')
})
