'use strict'
// The CodeInterpreter's nodejs language, inside the sandbox: interpreter_runner.py execs
// node on this file as its forked child, so fds 1 and 2 are already the runner's pipes
// and its time limit and process group apply. Arguments: the fd to write the outcome to
// (one JSON object: value, error, exit_code) and the file holding the code, which is
// deleted before the code runs.
//
// The code runs as a script in this context (vm.runInThisContext), so its completion
// value is known, as in a notebook; a promise as that value is awaited. `require`
// resolves from /scratch, the working folder.
const fs = require('node:fs')
const vm = require('node:vm')
const { createRequire } = require('node:module')

const FILENAME = '/scratch/main.js'
const outcomeFd = Number(process.argv[2])
const codePath = process.argv[3]
const code = fs.readFileSync(codePath, 'utf8')
fs.rmSync(codePath)

let outcome = { exit_code: 0 }
let sent = false

function send() {
  if (sent) return
  sent = true
  try {
    fs.writeSync(outcomeFd, JSON.stringify(outcome))
    fs.closeSync(outcomeFd)
  } catch {
    // The code closed the fd: the runner reports the exit status alone.
  }
}

function show(value) {
  if (value === undefined || value === null) return null
  try {
    const text = JSON.stringify(value)
    if (text !== undefined) return text
  } catch {
    // A cycle or a BigInt: its string form below.
  }
  return String(value)
}

function lineOf(stack) {
  const found = /main\.js:(\d+)/.exec(stack)
  return found ? Number(found[1]) : null
}

function failed(error) {
  const isError = error instanceof Error
  const head = isError ? `${error.name}: ${error.message}` : `Uncaught ${show(error) ?? String(error)}`
  const stack = isError && typeof error.stack === 'string' ? error.stack : head
  // The frames of this file and of node's internals are not the code's.
  const own = stack.split('\n').filter((l) => !/node_boot\.js|\(node:/.test(l))
  process.stderr.write(own.join('\n') + '\n')
  const line = lineOf(stack)
  outcome = { error: line ? `${head} (line ${line})` : head, exit_code: 1 }
}

process.on('uncaughtException', (error) => {
  failed(error)
  send()
  process.exit(1)
})
process.on('unhandledRejection', (error) => {
  failed(error)
  send()
  process.exit(1)
})
process.on('exit', (code) => {
  if (code !== 0 && outcome.error === undefined) outcome = { error: `exit code ${code}`, exit_code: code }
  send()
})

globalThis.require = createRequire(FILENAME)
let value
try {
  value = vm.runInThisContext(code, { filename: FILENAME })
} catch (error) {
  failed(error)
  send()
  process.exit(1)
}
if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
  value.then(
    (settled) => {
      outcome.value = show(settled)
    },
    (error) => {
      failed(error)
      process.exitCode = 1
    },
  )
} else {
  outcome.value = show(value)
}
