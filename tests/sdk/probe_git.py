"""Test only: the `e2b` SDK's git module (sbx.git.*) from PyPI
(build/py-sdk), unmodified, in debug mode, against the real envd and the
image's own git, through e2b-hostlink forward. The twin of probe_git.mjs:
the same scenario as `user` and as root (the SDK's `user` option), each in
its home, then three failures; the same observation keys, one line per case
(CASE <name> <json>); the expected values are expectations.py's GIT_CHECKS.
Env: E2B_SDK_TOKEN (sha512 in MMDS)."""
import re

from e2b import CommandExitException, GitUpstreamException
from sdk_session import TOKEN, as_control_plane_gives, post_init, report

HOMES = {"user": "/home/user", "root": "/root"}
IDENTITY = ("SDK Tester", "sdk-tester@example.invalid")

init = post_init({"accessToken": TOKEN, "defaultUser": "user"})
sbx = as_control_plane_gives(init.headers.get("x-envd-version"))


def brief(st) -> dict:
    return {"currentBranch": st.current_branch, "upstream": st.upstream, "isClean": st.is_clean,
            "files": [[f.name, f.status, f.staged] for f in st.file_status]}


def error_of(e: Exception) -> dict:
    # git's own "fatal:" lines, as the SDK hands them over: on the
    # CommandExitException itself, or on the one a GitUpstreamException was
    # raised from.
    git_error = e if isinstance(e, CommandExitException) else e.__cause__
    stderr = getattr(git_error, "stderr", None) or ""
    name = next(c.__name__ for c in (GitUpstreamException, CommandExitException, type(e)) if isinstance(e, c))
    return {"errorClass": name, "exitCode": getattr(e, "exit_code", None),
            "gitFatal": [line for line in stderr.split("\n") if line.startswith("fatal:")],
            "message": str(e)}


def failure(call) -> dict:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the error is the observation
        return error_of(e)
    return {"errorClass": None}


cases = {}


def scenario(who: str, home: str) -> None:
    work, bare, clone = f"{home}/git/work", f"{home}/git/remote.git", f"{home}/git/clone"

    def sh(cmd: str) -> str:
        return sbx.commands.run(cmd, user=who).stdout

    def git_init():
        made = sbx.git.init(work, initial_branch="main", user=who)
        made_bare = sbx.git.init(bare, bare=True, initial_branch="main", user=who)
        return {"stdout": made.stdout, "bareStdout": made_bare.stdout,
                "isBare": sh(f"git -C {work} rev-parse --is-bare-repository; "
                             f"git -C {bare} rev-parse --is-bare-repository"),
                "owner": sh(f"stat -c %U {work}/.git {bare}")}

    def git_commit():
        sbx.git.configure_user(*IDENTITY, user=who)
        sbx.files.write(f"{work}/hello.txt", "hello from the SDK\n", user=who)
        untracked = brief(sbx.git.status(work, user=who))
        sbx.git.add(work, user=who)
        staged = brief(sbx.git.status(work, user=who))
        committed = sbx.git.commit(work, "first commit", user=who)
        clean = brief(sbx.git.status(work, user=who))
        sbx.git.create_branch(work, "feature", user=who)
        branches = sbx.git.branches(work, user=who)
        return {"untracked": untracked, "staged": staged, "clean": clean,
                "committedLine": re.sub(r" [0-9a-f]{7,}\]", " <sha>]", committed.stdout.split("\n")[0]),
                "branches": {"branches": branches.branches, "currentBranch": branches.current_branch},
                "log": sh(f"git -C {work} log -1 --format='%an <%ae>|%s'"),
                "globalConfig": sh("git config --global --get user.email")}

    def git_push():
        sbx.git.remote_add(work, "origin", f"file://{bare}", user=who)
        sbx.git.push(work, remote="origin", branch="main", user=who)
        sbx.git.push(work, remote="origin", branch="feature", user=who)
        return {"remoteBranches": sh(f"git -C {bare} branch --format='%(refname:short)'"),
                "sameCommit": sh(f"git -C {bare} rev-parse main") == sh(f"git -C {work} rev-parse main"),
                "status": brief(sbx.git.status(work, user=who))}

    def git_clone_pull():
        sbx.git.clone(f"file://{bare}", path=clone, branch="feature", user=who)
        cloned = brief(sbx.git.status(clone, user=who))
        branches = sbx.git.branches(clone, user=who).branches
        # A second commit in work, pushed along feature's upstream (no
        # remote, no branch: what push --set-upstream recorded), then pulled.
        sbx.files.write(f"{work}/second.txt", "second\n", user=who)
        sbx.git.add(work, files=["second.txt"], user=who)
        sbx.git.commit(work, "second commit", user=who)
        sbx.git.push(work, user=who)
        sbx.git.pull(clone, user=who)
        return {"cloned": cloned, "branches": branches, "pulledLog": sh(f"git -C {clone} log --format=%s"),
                "pulledFile": sbx.files.read(f"{clone}/second.txt", user=who),
                "after": brief(sbx.git.status(clone, user=who))}

    for fn in (git_init, git_commit, git_push, git_clone_pull):
        cases[f"{fn.__name__}_{who}"] = fn


for who, home in HOMES.items():
    scenario(who, home)
HOME = HOMES["user"]


def git_error_not_a_repository():
    sbx.files.make_dir(f"{HOME}/plain-dir")
    return failure(lambda: sbx.git.status(f"{HOME}/plain-dir"))


def git_error_push_without_upstream():
    # The clone tracks origin/feature; a branch of its own has no upstream.
    sbx.git.create_branch(f"{HOME}/git/clone", "local-only")
    return failure(lambda: sbx.git.push(f"{HOME}/git/clone"))


def git_error_clone_missing():
    return failure(lambda: sbx.git.clone(f"file://{HOME}/git/missing.git", path=f"{HOME}/git/missing"))


for fn in (git_error_not_a_repository, git_error_push_without_upstream, git_error_clone_missing):
    cases[fn.__name__] = fn
report(cases)
