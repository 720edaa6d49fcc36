// Test only: the unmodified @e2b/code-interpreter SDK in debug mode
// (E2B_DEBUG=true: no API call, envd at localhost:49983, the code
// interpreter at localhost:49999), which e2b-hostlink forward serves.
import { Sandbox } from '@e2b/code-interpreter'

const out = {}
try {
  const sbx = await Sandbox.create()
  out.sandboxId = sbx.sandboxId
  out.running = await sbx.isRunning()
  out.contexts = (await sbx.listCodeContexts()).map((c) => c.language)
  try {
    const ex = await sbx.runCode('1+1')
    out.run = ex.text ?? null
    out.runError = ex.error ? String(ex.error.name) : null
  } catch (e) {
    out.runError = String(e)
  }
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e)
}
console.log('SDK ' + JSON.stringify(out))
