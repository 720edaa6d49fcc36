// Test only: every case of tests/sdk with the real, unmodified `e2b` SDK from
// npm, in debug mode (E2B_DEBUG=true: no API call, envd at localhost:49983,
// getHost(port) = localhost:port), through e2b-hostlink forward into the
// real envd. Prints one line per case: CASE <name> <json observation>; the
// expected values live in test_sdk_rt.py, shared with the Python probe, so
// both SDKs are held to the same answers. A case that throws reports
// {"error": ...} and fails there.
//
// Env: E2B_SDK_TOKEN (its sha512 is MMDS's accessTokenHash), E2B_SDK_USER_SERVER
// (user_server.sh, the user's server for getHost).
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Sandbox, CommandExitError, TimeoutError, FilesystemEventType } from 'e2b'
import { ENVD, TOKEN, errName, postInit, asControlPlaneGives, report } from './sdk_session.mjs'

const HOME = '/home/user'

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// The same deterministic bytes test_sdk_rt.py computes: b[i] = (31*i + 7) % 251.
const pattern = (n) => { const b = new Uint8Array(n); for (let i = 0; i < n; i++) b[i] = (31 * i + 7) % 251; return b }

async function until(check, ms = 10000) {
  const end = Date.now() + ms
  while (Date.now() < end) { if (await check()) return true; await sleep(50) }
  return false
}

let plain, sbx, envdVersion
const cases = {}

cases.debug_create = async () => {
  plain = await Sandbox.create()
  const r = await plain.commands.run('echo pre-init')
  return { sandboxId: plain.sandboxId, host3000: plain.getHost(3000), envdVersion: plain.envdApi.version, stdout: r.stdout }
}

cases.init_token = async () => {
  const wrong = await postInit({ accessToken: 'not-the-token' })
  const init = await postInit({ accessToken: TOKEN, envVars: { SDK_INIT_VAR: 'from-init' }, defaultUser: 'user' })
  envdVersion = init.version
  sbx = asControlPlaneGives(envdVersion)
  const unauth = (await fetch(`${ENVD}/envs`)).status
  const envs = await fetch(`${ENVD}/envs`, { headers: { 'X-Access-Token': TOKEN } })
  const envsBody = envs.status === 200 ? await envs.json() : {}
  let withoutToken = null
  try { await plain.commands.run('true') } catch (e) { withoutToken = errName(e) }
  const r = await sbx.commands.run('echo "$SDK_INIT_VAR"; id -un')
  return {
    wrongTokenStatus: wrong.status, initStatus: init.status, unauthStatus: unauth, authStatus: envs.status,
    envsVar: envsBody.SDK_INIT_VAR ?? null, sdkWithoutToken: withoutToken, stdout: r.stdout,
  }
}

cases.envd_version = async () => ({ initHeader: envdVersion, sdkVersion: sbx.envdApi.version })

cases.commands_run = async () => {
  const r = await sbx.commands.run('echo out; echo err >&2')
  return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }
}

cases.commands_exit_error = async () => {
  try { await sbx.commands.run('echo partial; echo bad >&2; exit 3') } catch (e) {
    return { errorClass: e instanceof CommandExitError ? 'CommandExitError' : errName(e), exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }
  }
  return { errorClass: null }
}

cases.commands_env_cwd = async () => {
  const r = await sbx.commands.run('printf "%s|%s" "$SDK_VAR" "$PWD"', { envs: { SDK_VAR: 'v a l' }, cwd: '/tmp' })
  return { stdout: r.stdout }
}

cases.commands_users = async () => {
  const root = await sbx.commands.run('id -u; id -un', { user: 'root' })
  const user = await sbx.commands.run('id -u; id -un', { user: 'user' })
  return { root: root.stdout, user: user.stdout }
}

cases.commands_background = async () => {
  const h = await sbx.commands.run('sleep 60', { background: true })
  const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid && p.args.join(' ').includes('sleep 60'))
  const killed = await sbx.commands.kill(h.pid)
  let waitError = null
  try { await h.wait() } catch (e) { waitError = errName(e) }
  const listedAfter = (await sbx.commands.list()).some((p) => p.pid === h.pid)
  return { listed, killed, listedAfter, waitError }
}

cases.commands_stdin = async () => {
  const h = await sbx.commands.run('head -n 2', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'one\n')
  await sbx.commands.sendStdin(h.pid, 'two\n')
  const r = await h.wait()
  return { stdout: r.stdout, exitCode: r.exitCode }
}

cases.commands_stream_1mib = async () => {
  const chunks = []
  const r = await sbx.commands.run('yes 0123456789abcde | head -c 1048576', { onStdout: (d) => chunks.push(d) })
  const streamed = chunks.join('')
  return { streamedBytes: streamed.length, streamedSha256: sha256(streamed), resultBytes: r.stdout.length, resultSha256: sha256(r.stdout), chunks: chunks.length }
}

cases.commands_timeout = async () => {
  const t0 = Date.now()
  try { await sbx.commands.run('sleep 30', { timeoutMs: 1000 }) } catch (e) {
    return { errorClass: e instanceof TimeoutError ? 'TimeoutError' : errName(e), seconds: (Date.now() - t0) / 1000 }
  }
  return { errorClass: null }
}

cases.pty = async () => {
  let out = ''
  const dec = new TextDecoder()
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  const enc = new TextEncoder()
  await sbx.pty.sendInput(h.pid, enc.encode('stty size; echo PTY-$((6*7))\n'))
  await until(() => out.includes('PTY-42'))
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'))
  await until(() => out.includes('30 100'))
  const killed = await sbx.pty.kill(h.pid)
  let waitError = null
  try { await h.wait() } catch (e) { waitError = errName(e) }
  return { output: out, killed, waitError }
}

cases.files_text = async () => {
  await sbx.files.write(`${HOME}/sdk/text.txt`, 'hello, ünïcödé\nline 2\n')
  return { text: await sbx.files.read(`${HOME}/sdk/text.txt`) }
}

cases.files_bytes = async () => {
  const all = new Uint8Array(256).map((_, i) => i)
  await sbx.files.write(`${HOME}/sdk/bytes.bin`, all.buffer)
  const back = await sbx.files.read(`${HOME}/sdk/bytes.bin`, { format: 'bytes' })
  return { hex: Buffer.from(back).toString('hex') }
}

async function bigFile(size, name) {
  const data = pattern(size)
  const path = `${HOME}/sdk/${name}`
  await sbx.files.write(path, data.buffer)
  const back = await sbx.files.read(path, { format: 'bytes' })
  const guest = await sbx.commands.run(`sha256sum ${path}`)
  const info = await sbx.files.getInfo(path)
  return { writtenSha256: sha256(data), readSha256: sha256(back), guestSha256: guest.stdout.split(' ')[0], size: info.size }
}
cases.files_1mib = () => bigFile(1 << 20, '1mib.bin')
cases.files_16mib = () => bigFile(16 << 20, '16mib.bin')

cases.files_ops = async () => {
  const d = `${HOME}/sdk-ops`
  const madeDir = await sbx.files.makeDir(d)
  const madeAgain = await sbx.files.makeDir(d)
  await sbx.files.write(`${d}/a.txt`, 'abc')
  await sbx.files.makeDir(`${d}/sub`)
  const list = (await sbx.files.list(d)).map((e) => [e.name, e.type]).sort()
  const info = await sbx.files.getInfo(`${d}/a.txt`)
  const renamed = await sbx.files.rename(`${d}/a.txt`, `${d}/b.txt`)
  const existsOld = await sbx.files.exists(`${d}/a.txt`)
  const existsNew = await sbx.files.exists(`${d}/b.txt`)
  await sbx.files.remove(d)
  return {
    madeDir, madeAgain, list, info: { name: info.name, type: info.type, size: info.size, path: info.path, owner: info.owner },
    renamed: renamed.path, existsOld, existsNew, existsAfterRemove: await sbx.files.exists(d),
  }
}

cases.files_watch = async () => {
  const d = `${HOME}/sdk-watch`
  await sbx.files.makeDir(d)
  const seen = []
  const w = await sbx.files.watchDir(d, (ev) => { seen.push([ev.type, ev.name]) })
  await sbx.files.write(`${d}/a.txt`, 'first')
  await sbx.commands.run(`echo more >> ${d}/a.txt`)
  await sbx.files.remove(`${d}/a.txt`)
  await until(() => seen.some(([t]) => t === FilesystemEventType.REMOVE))
  await w.stop()
  return { events: seen }
}

cases.files_upload_download = async () => {
  const path = `${HOME}/sdk-up.bin`
  const data = pattern(300000)
  const up = await sbx.uploadUrl(path)
  const form = new FormData()
  form.append('file', new Blob([data]), 'sdk-up.bin')
  const upStatus = (await fetch(up, { method: 'POST', body: form })).status
  const down = await sbx.downloadUrl(path)
  const r = await fetch(down)
  const body = new Uint8Array(await r.arrayBuffer())
  const unsigned = (await fetch(down.split('?')[0] + '?path=' + encodeURIComponent(path))).status
  return {
    signed: up.includes('signature=') && down.includes('signature='), uploadStatus: upStatus, downloadStatus: r.status,
    downloadedSha256: sha256(body), sentSha256: sha256(data), unsignedStatus: unsigned,
  }
}

cases.get_host = async () => {
  await sbx.files.write(`${HOME}/srv/hello.txt`, 'served through the relay\n')
  await sbx.files.write(`${HOME}/srv/serve.sh`, readFileSync(process.env.E2B_SDK_USER_SERVER, 'utf8'))
  const server = await sbx.commands.run(`chmod +x serve.sh && exec socat TCP-LISTEN:3000,bind=127.0.0.1,reuseaddr,fork EXEC:${HOME}/srv/serve.sh`,
    { background: true, cwd: `${HOME}/srv` })
  const host = sbx.getHost(3000)
  let status = null, body = null
  await until(async () => {
    try { const r = await fetch(`http://${host}/hello.txt`); status = r.status; body = await r.text(); return status === 200 } catch { return false }
  }, 15000)
  await server.kill()
  return { host, status, body }
}

await report(cases)
