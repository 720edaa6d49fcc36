// Test only: the `e2b` SDK's git module (sbx.git.*) from npm, unmodified,
// in debug mode, against the real envd and the image's own git, through
// e2b-hostlink forward. Every call goes through envd as a command; git
// itself is the image's. The same scenario runs as `user` and as root (the
// SDK's `user` option), each in its home; then three failures. One line per
// case: CASE <name> <json observation>; the expected values are
// expectations.py's GIT_CHECKS, shared with probe_git.py.
//
// Env: E2B_SDK_TOKEN (its sha512 is MMDS's accessTokenHash).
import { CommandExitError, GitUpstreamError } from 'e2b'
import { TOKEN, errName, postInit, asControlPlaneGives, report } from './sdk_session.mjs'

const HOMES = { user: '/home/user', root: '/root' }
const IDENTITY = ['SDK Tester', 'sdk-tester@example.invalid']

const init = await postInit({ accessToken: TOKEN, defaultUser: 'user' })
const sbx = asControlPlaneGives(init.version)

const brief = (st) => ({
  currentBranch: st.currentBranch ?? null, upstream: st.upstream ?? null, isClean: st.isClean,
  files: st.fileStatus.map((f) => [f.name, f.status, f.staged]),
})
const errorOf = (e) => ({
  errorClass: e instanceof GitUpstreamError ? 'GitUpstreamError' : e instanceof CommandExitError ? 'CommandExitError' : errName(e),
  exitCode: e.exitCode ?? null,
  // git's own "fatal:" lines, as the SDK hands them over (the JS SDK keeps
  // them on CommandExitError and drops them from GitUpstreamError).
  gitFatal: (e.stderr ?? '').split('\n').filter((l) => l.startsWith('fatal:')),
  message: e.message,
})

const cases = {}
for (const [who, home] of Object.entries(HOMES)) {
  const opts = { user: who }
  const work = `${home}/git/work`, bare = `${home}/git/remote.git`, clone = `${home}/git/clone`
  const sh = async (cmd) => (await sbx.commands.run(cmd, opts)).stdout

  cases[`git_init_${who}`] = async () => {
    const made = await sbx.git.init(work, { ...opts, initialBranch: 'main' })
    const madeBare = await sbx.git.init(bare, { ...opts, bare: true, initialBranch: 'main' })
    return {
      stdout: made.stdout, bareStdout: madeBare.stdout,
      isBare: await sh(`git -C ${work} rev-parse --is-bare-repository; git -C ${bare} rev-parse --is-bare-repository`),
      owner: await sh(`stat -c %U ${work}/.git ${bare}`),
    }
  }

  cases[`git_commit_${who}`] = async () => {
    await sbx.git.configureUser(...IDENTITY, opts)
    await sbx.files.write(`${work}/hello.txt`, 'hello from the SDK\n', opts)
    const untracked = brief(await sbx.git.status(work, opts))
    await sbx.git.add(work, opts)
    const staged = brief(await sbx.git.status(work, opts))
    const committed = await sbx.git.commit(work, 'first commit', opts)
    const clean = brief(await sbx.git.status(work, opts))
    await sbx.git.createBranch(work, 'feature', opts)
    const branches = await sbx.git.branches(work, opts)
    return {
      untracked, staged, clean, committedLine: committed.stdout.split('\n')[0].replace(/ [0-9a-f]{7,}\]/, ' <sha>]'),
      branches: { branches: branches.branches, currentBranch: branches.currentBranch },
      log: await sh(`git -C ${work} log -1 --format='%an <%ae>|%s'`),
      globalConfig: await sh('git config --global --get user.email'),
    }
  }

  cases[`git_push_${who}`] = async () => {
    await sbx.git.remoteAdd(work, 'origin', `file://${bare}`, opts)
    await sbx.git.push(work, { ...opts, remote: 'origin', branch: 'main' })
    await sbx.git.push(work, { ...opts, remote: 'origin', branch: 'feature' })
    return {
      remoteBranches: await sh(`git -C ${bare} branch --format='%(refname:short)'`),
      sameCommit: (await sh(`git -C ${bare} rev-parse main`)) === (await sh(`git -C ${work} rev-parse main`)),
      status: brief(await sbx.git.status(work, opts)),
    }
  }

  cases[`git_clone_pull_${who}`] = async () => {
    await sbx.git.clone(`file://${bare}`, { ...opts, path: clone, branch: 'feature' })
    const cloned = brief(await sbx.git.status(clone, opts))
    const branches = (await sbx.git.branches(clone, opts)).branches
    // A second commit in work, pushed along feature's upstream (no remote,
    // no branch: what push --set-upstream recorded), then pulled.
    await sbx.files.write(`${work}/second.txt`, 'second\n', opts)
    await sbx.git.add(work, { ...opts, files: ['second.txt'] })
    await sbx.git.commit(work, 'second commit', opts)
    await sbx.git.push(work, opts)
    await sbx.git.pull(clone, opts)
    return {
      cloned, branches, pulledLog: await sh(`git -C ${clone} log --format=%s`),
      pulledFile: await sbx.files.read(`${clone}/second.txt`, opts), after: brief(await sbx.git.status(clone, opts)),
    }
  }
}

const HOME = HOMES.user
const failure = async (call) => { try { await call() } catch (e) { return errorOf(e) } return { errorClass: null } }

cases.git_error_not_a_repository = async () => {
  await sbx.files.makeDir(`${HOME}/plain-dir`)
  return failure(() => sbx.git.status(`${HOME}/plain-dir`))
}

cases.git_error_push_without_upstream = async () => {
  // The clone tracks origin/feature; a branch of its own has no upstream.
  await sbx.git.createBranch(`${HOME}/git/clone`, 'local-only')
  return failure(() => sbx.git.push(`${HOME}/git/clone`))
}

cases.git_error_clone_missing = () =>
  failure(() => sbx.git.clone(`file://${HOME}/git/missing.git`, { path: `${HOME}/git/missing` }))

await report(cases)
