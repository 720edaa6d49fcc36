// Test only: what every JS probe of tests/sdk shares (probe_e2b.mjs,
// probe_git.mjs): /init with the pool's token, the sandbox object the control
// plane would give the SDK, and the CASE report loop.
//
// Env: E2B_SDK_TOKEN (its sha512 is MMDS's accessTokenHash).
import { Sandbox } from 'e2b'

export const ENVD = 'http://localhost:49983'
export const TOKEN = process.env.E2B_SDK_TOKEN

export const errName = (e) => (e && e.constructor ? e.constructor.name : String(e))

export async function postInit(body) {
  const r = await fetch(`${ENVD}/init`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: r.status, version: r.headers.get('x-envd-version') }
}

// In debug mode Sandbox.create() returns a sandbox with no access token and
// the version "99.99.99" (ENVD_DEBUG_FALLBACK): both normally come from the
// control plane's create/connect answer, which debug mode skips. This builds
// the sandbox object exactly as Sandbox.connect() does from that answer
// (the SDK's own constructor, unmodified), with the token the pool gave
// /init and the version envd itself announced.
export const asControlPlaneGives = (envdVersion) =>
  new Sandbox({ debug: true, sandboxId: 'debug_sandbox_id', envdVersion, envdAccessToken: TOKEN })

// Runs CASES in order, one line each: CASE <name> <json observation>. A case
// that throws reports {"error": ...}, which fails its test.
export async function report(cases) {
  for (const [name, run] of Object.entries(cases)) {
    let obs
    try { obs = await run() } catch (e) { obs = { error: String(e && e.stack ? e.stack : e) } }
    console.log(`CASE ${name} ${JSON.stringify(obs)}`)
  }
}
