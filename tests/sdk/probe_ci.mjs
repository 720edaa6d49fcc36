// Test only: the e2b-ci cases with the real, unmodified @e2b/code-interpreter
// SDK from npm in debug mode (envd at localhost:49983, the code interpreter
// at localhost:49999, both through e2b-hostlink forward). One line per case,
// CASE <name> <json>, the twin of probe_ci.py; expectations in test_sdk_ci.py.
import { readFileSync } from 'node:fs'
import { Sandbox, TimeoutError } from '@e2b/code-interpreter'

const CHART = 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label="squares")\nplt.title("sdk chart")\nplt.show()'
let sbx
const cases = {}

// Every case removes the contexts it creates (removeCodeContext stops their
// kernels): a guest of 1 GiB holds the default contexts and a few kernels
// more, not one per case (the e2b-ci boot runs this probe and probe_ci.py
// against one guest).
async function withContext (opts, use) {
  const ctx = await sbx.createCodeContext(opts)
  try {
    return await use(ctx)
  } finally {
    await sbx.removeCodeContext(ctx)
  }
}

cases.ci_run_code = async () => {
  sbx = await Sandbox.create()
  const ex = await sbx.runCode('1+1')
  return { text: ex.text ?? null, executionError: ex.error ? ex.error.name : null }
}

cases.ci_chart = async () => {
  const ex = await sbx.runCode(CHART)
  const r = ex.results[0] ?? {}
  const chart = r.chart ?? {}
  return {
    results: ex.results.length, pngMagic: r.png ? Buffer.from(r.png, 'base64').subarray(0, 8).toString('hex') : null,
    chartType: chart.type ?? null, chartTitle: chart.title ?? null,
    elements: (chart.elements ?? []).map((e) => ({ label: e.label, points: e.points })),
    executionError: ex.error ? `${ex.error.name}: ${ex.error.value}` : null,
  }
}

cases.ci_error = async () => {
  const ex = await sbx.runCode('raise ValueError("sdk boom")')
  return { name: ex.error?.name ?? null, value: ex.error?.value ?? null, hasTraceback: (ex.error?.traceback ?? '').includes('ValueError') }
}

cases.ci_contexts = async () => {
  let id
  const obs = await withContext(undefined, async (ctx) => {
    id = ctx.id
    await sbx.runCode('x = 41', { context: ctx })
    const inCtx = await sbx.runCode('x + 1', { context: ctx })
    const outside = await sbx.runCode('x')
    const listed = (await sbx.listCodeContexts()).some((c) => c.id === id)
    return { language: ctx.language, text: inCtx.text ?? null, outsideError: outside.error?.name ?? null, listed }
  })
  return { ...obs, listedAfterRemove: (await sbx.listCodeContexts()).some((c) => c.id === id) }
}

cases.ci_streams = async () => {
  const out = []
  const err = []
  const ex = await sbx.runCode('import sys\nprint("out-line")\nprint("err-line", file=sys.stderr)',
    { onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line) })
  return { stdout: ex.logs.stdout, stderr: ex.logs.stderr, onStdout: out, onStderr: err }
}

cases.ci_env = async () => {
  const given = await sbx.runCode('import os\nos.environ.get("E2B_CI_PROBE")', { envs: { E2B_CI_PROBE: 'from-sdk' } })
  const after = await sbx.runCode('import os\nos.environ.get("E2B_CI_PROBE", "unset")')
  return { given: given.text ?? null, after: after.text ?? null }
}

cases.ci_dataframe = async () => {
  const ex = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  const html = ex.results[0]?.html ?? ''
  return {
    results: ex.results.length, table: html.includes('<table'),
    cells: ['<th>a</th>', '<th>b</th>', '<td>x</td>', '<td>y</td>'].filter((c) => html.includes(c)),
  }
}

cases.ci_restart = () => withContext(undefined, async (ctx) => {
  const before = await sbx.runCode('y = 7\ny', { context: ctx })
  await sbx.restartCodeContext(ctx)
  const after = await sbx.runCode('y', { context: ctx })
  return { before: before.text ?? null, afterError: after.error?.name ?? null }
})

cases.ci_timeout = () => withContext(undefined, async (ctx) => {
  try {
    await sbx.runCode('import time\ntime.sleep(120)', { context: ctx, timeoutMs: 3000 })
    return { timedOut: false }
  } catch (e) {
    return { timedOut: e instanceof TimeoutError }
  }
})

// A run cut off by its timeout leaves its context usable: the next run
// answers at once (bounded by 20 s, so that a regression fails here
// instead of waiting out the SDK's default timeout), and the cut-off run's
// envs are gone.
cases.ci_timeout_recovers = () => withContext(undefined, async (ctx) => {
  let timedOut = false
  try {
    await sbx.runCode('import time\ntime.sleep(30)', { context: ctx, timeoutMs: 2000, envs: { E2B_CI_CUT_OFF: 'set' } })
  } catch (e) {
    timedOut = e instanceof TimeoutError
  }
  const observe = async (code) => {
    try {
      const ex = await sbx.runCode(code, { context: ctx, timeoutMs: 20000 })
      return { text: ex.text ?? null, error: ex.error ? ex.error.name : null }
    } catch (e) {
      return { text: null, error: e instanceof TimeoutError ? 'TimeoutError' : String(e) }
    }
  }
  const next = await observe('2+2')
  const third = await observe('import os\nos.environ.get("E2B_CI_CUT_OFF", "unset")')
  return { timedOut, next, third }
})

// Installs as E2B's docs tell users to add packages to the code interpreter,
// each seen by the next cell; the twin of probe_ci.py's (the same case names
// and observations, packages named e2b-probe-js<word>). Only with a package
// index (E2B_SDK_INDEX_URL: sdk_stack.sh serves tests/sdk/package_index.py on
// the guest's loopback); a boot's guest reaches none.
const INDEX = process.env.E2B_SDK_INDEX_URL
// As `user`, E2B's default user (this probe does no /init that would name it).
async function command (cmd) {
  try {
    return (await sbx.commands.run(cmd, { timeoutMs: 300_000, user: 'user' })).exitCode
  } catch (e) {
    return e.exitCode ?? String(e)
  }
}
async function inCell (code) {
  const ex = await sbx.runCode(code, { timeoutMs: 300_000 })
  return ex.logs.stdout.some((l) => l.includes('Successfully installed')) ? 0 : 1
}
async function installThenImport (install, word, language) {
  const name = `e2b-probe-js${word}`
  const installed = await install(name)
  const ex = language
    ? await sbx.runCode(`console.log(require('${name}').name)`, { language })
    : await sbx.runCode(`import ${name.replaceAll('-', '_')} as m\nprint(m.NAME)`)
  return {
    install: installed, imported: JSON.stringify(ex.logs.stdout) === JSON.stringify([name + '\n']),
    importError: ex.error ? `${ex.error.name}: ${ex.error.value}` : null,
  }
}
if (INDEX) {
  cases.ci_install_path = async () => {
    const kernel = (await sbx.runCode('import sys\nprint(sys.prefix)')).logs.stdout
    const prefix = kernel.length ? kernel[0].trim() : null
    const shell = (await sbx.commands.run("python3 -c 'import sys; print(sys.prefix)'", { user: 'user' })).stdout
    const pipsOfKernel = {}
    for (const p of ['pip', 'pip3']) pipsOfKernel[p] = (await sbx.commands.run(`${p} --version`, { user: 'user' })).stdout.includes(`${prefix}/lib/python3`)
    const tools = {}
    for (const t of ['node', 'npm', 'gcc', 'make']) tools[t] = await command(`${t} --version >/dev/null`)
    return { samePython: shell.trim() === prefix, pipsOfKernel, tools }
  }
  cases.ci_install_pip_user = () => installThenImport((n) => command(`pip install --index-url ${INDEX}/simple ${n}`), 'user')
  cases.ci_install_pip_sudo = () => installThenImport((n) => command(`sudo pip install --index-url ${INDEX}/simple ${n}`), 'sudo')
  cases.ci_install_pip_bang = () => installThenImport((n) => inCell(`!pip install --index-url ${INDEX}/simple ${n}`), 'bang')
  cases.ci_install_pip_magic = () => installThenImport((n) => inCell(`%pip install --index-url ${INDEX}/simple ${n}`), 'magic')
  cases.ci_install_npm_require = () => installThenImport(
    (n) => command(`cd /home/user && npm install --registry ${INDEX}/npm/ ${n}`), 'npm', 'js')
}

// The per-language cases (ci_languages.json) for the languages the image's
// kernels serve (argv[2], a comma list; js and ts share javascript's kernel);
// argv[3], when given: only these of them (the boot's short list).
const table = JSON.parse(readFileSync(new URL('./ci_languages.json', import.meta.url)))
const served = new Set((process.argv[2] ?? '').split(',').filter(Boolean))
const only = new Set((process.argv[3] ?? '').split(',').filter(Boolean))

async function languageStep (step, { stepTimeoutSec, ...opts }) {
  const out = []
  const err = []
  let ex
  try {
    ex = await sbx.runCode(step.code, {
      ...opts, timeoutMs: (step.timeoutSec ?? stepTimeoutSec) * 1000, requestTimeoutMs: (step.timeoutSec ?? stepTimeoutSec) * 1000,
      onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line),
    })
  } catch (e) {
    return { thrown: e instanceof TimeoutError ? 'TimeoutError' : String(e) }
  }
  const png = ex.results.find((r) => r.png)?.png
  return {
    text: ex.text ?? null, stdout: ex.logs.stdout, stderr: ex.logs.stderr, onStdout: out, onStderr: err,
    texts: ex.results.map((r) => r.text ?? null), formats: ex.results.map((r) => r.formats().sort()),
    pngMagic: png ? Buffer.from(png, 'base64').subarray(0, 8).toString('hex') : null,
    error: ex.error ? { name: ex.error.name, value: ex.error.value, tracebackHasMarker: step.marker ? (ex.error.traceback ?? '').includes(step.marker) : null } : null,
  }
}

for (const c of table.cases) {
  if (!served.has(c.language) || (only.size && !only.has(c.name))) continue
  cases[c.name] = async () => {
    const stepTimeoutSec = c.stepTimeoutSec ?? table.stepTimeoutSec
    const runSteps = async (opts) => {
      const steps = []
      for (const [i, step] of c.steps.entries()) {
        steps.push(await languageStep(c.kind === 'timeout' && i === 0 ? { ...step, timeoutSec: c.timeoutSec } : step, opts))
      }
      return steps
    }
    if (c.kind === 'run') return { contextLanguage: null, steps: await runSteps({ language: c.language, stepTimeoutSec }) }
    return withContext({ language: c.language, requestTimeoutMs: table.createTimeoutSec * 1000 },
      async (ctx) => ({ contextLanguage: ctx.language, steps: await runSteps({ context: ctx, stepTimeoutSec }) }))
  }
}

for (const [name, run] of Object.entries(cases)) {
  let obs
  try { obs = await run() } catch (e) { obs = { error: String(e && e.stack ? e.stack : e) } }
  console.log(`CASE ${name} ${JSON.stringify(obs)}`)
}
