"""What E2B's SDKs must observe in every case of tests/sdk's probes
(probe_e2b.*, probe_ci.*), the same for both SDKs: one table for the
namespace layer (test_sdk_rt.py, test_sdk_ci.py) and for the boot
(tests/boot/sdk_checks.py). Each check raises AssertionError on a wrong
observation; ENVD_VERSION arguments are the image's /etc/envd-version,
trimmed."""
import hashlib
import re

# The SDKs name their errors differently; everything else is expected alike.
ERRORS = {
    "js": {"exit": "CommandExitError", "timeout": "TimeoutError", "auth": "AuthenticationError"},
    "py": {"exit": "CommandExitException", "timeout": "TimeoutException", "auth": "AuthenticationException"},
}
HOME = "/home/user"


def pattern(n: int) -> bytes:
    """The probes' deterministic file content: b[i] = (31*i + 7) % 251 (period
    251, a prime, so a chunk moved or repeated changes the hash)."""
    return (bytes((31 * i + 7) % 251 for i in range(251)) * (n // 251 + 1))[:n]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_debug_create(o, sdk, envd_version):
    # Debug mode: no API call, a fixed id, localhost hosts, and no version
    # read from envd: the SDK's fallback, which gates no feature off.
    assert o == {"sandboxId": "debug_sandbox_id", "host3000": "localhost:3000", "envdVersion": "99.99.99",
                 "stdout": "pre-init\n"}


def check_init_token(o, sdk, envd_version):
    assert o["wrongTokenStatus"] == 401, "envd took an /init token whose sha512 is not MMDS's accessTokenHash"
    assert o["initStatus"] == 204
    assert (o["unauthStatus"], o["authStatus"]) == (401, 200), "the token /init set is not enforced"
    assert o["envsVar"] == "from-init"
    assert o["sdkWithoutToken"] == ERRORS[sdk]["auth"]
    # /init's envVars reach a command's environment, its defaultUser runs it.
    assert o["stdout"] == "from-init\nuser\n"


def check_envd_version(o, sdk, envd_version):
    # What the pool reports to the SDK as envdVersion (trimmed: the JS SDK's
    # parser refuses surrounding whitespace) must be what envd says it is.
    shipped = envd_version
    assert re.fullmatch(r"\d+\.\d+\.\d+", shipped), f"/etc/envd-version holds {shipped!r}"
    assert o == {"initHeader": shipped, "sdkVersion": shipped}


def check_commands_run(o, sdk, envd_version):
    assert o == {"stdout": "out\n", "stderr": "err\n", "exitCode": 0}


def check_commands_exit_error(o, sdk, envd_version):
    assert o == {"errorClass": ERRORS[sdk]["exit"], "exitCode": 3, "stdout": "partial\n", "stderr": "bad\n"}


def check_commands_env_cwd(o, sdk, envd_version):
    assert o == {"stdout": "v a l|/tmp"}


def check_commands_users(o, sdk, envd_version):
    assert o == {"root": "0\nroot\n", "user": "1000\nuser\n"}


def check_commands_background(o, sdk, envd_version):
    assert o == {"listed": True, "killed": True, "listedAfter": False, "waitError": ERRORS[sdk]["exit"]}


def check_commands_stdin(o, sdk, envd_version):
    assert o == {"stdout": "one\ntwo\n", "exitCode": 0}


def check_commands_stream_1mib(o, sdk, envd_version):
    want = sha(b"0123456789abcde\n" * 65536)
    assert (o["streamedBytes"], o["resultBytes"]) == (1 << 20, 1 << 20)
    assert (o["streamedSha256"], o["resultSha256"]) == (want, want)
    assert o["chunks"] > 1, "1 MiB arrived in one piece: not streamed"


def check_commands_timeout(o, sdk, envd_version):
    assert o["errorClass"] == ERRORS[sdk]["timeout"]
    assert 0.9 <= o["seconds"] < 5, o


def check_pty(o, sdk, envd_version):
    # Terminal output: lines end in \r\n, bash's bracketed-paste toggles and
    # carriage returns around them; what matters is the lines' text.
    lines = {re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", part).strip() for part in re.split(r"[\r\n]+", o["output"])}
    assert "24 80" in lines, o["output"]      # the size it was created with
    assert "PTY-42" in lines, o["output"]     # input reached the shell (which did the sum), output came back
    assert "30 100" in lines, o["output"]     # resize reached the terminal
    assert o["killed"] is True


def check_files_text(o, sdk, envd_version):
    assert o == {"text": "hello, ünïcödé\nline 2\n"}


def check_files_bytes(o, sdk, envd_version):
    assert o == {"hex": bytes(range(256)).hex()}


def check_big(n):
    def check(o, sdk, envd_version):
        want = sha(pattern(n))
        assert o == {"writtenSha256": want, "readSha256": want, "guestSha256": want, "size": n}
    return check


def check_files_ops(o, sdk, envd_version):
    assert o == {
        "madeDir": True, "madeAgain": False, "list": [["a.txt", "file"], ["sub", "dir"]],
        "info": {"name": "a.txt", "type": "file", "size": 3, "path": f"{HOME}/sdk-ops/a.txt", "owner": "user"},
        "renamed": f"{HOME}/sdk-ops/b.txt", "existsOld": False, "existsNew": True, "existsAfterRemove": False,
    }


def check_files_watch(o, sdk, envd_version):
    events = [tuple(e) for e in o["events"]]
    for want in (("create", "a.txt"), ("write", "a.txt"), ("remove", "a.txt")):
        assert want in events, events
    assert events.index(("create", "a.txt")) < events.index(("remove", "a.txt")), events


def check_files_upload_download(o, sdk, envd_version):
    want = sha(pattern(300000))
    assert o == {"signed": True, "uploadStatus": 200, "downloadStatus": 200, "downloadedSha256": want,
                 "sentSha256": want, "unsignedStatus": 401}


def check_get_host(o, sdk, envd_version):
    # Through forward 3000 -> vsock port 10000 -> the real dynamic relay
    # (CONNECT 3000) -> the server in the guest: nothing maps port 3000 on
    # its own.
    assert o == {"host": "localhost:3000", "status": 200, "body": "served through the relay\n"}


CHECKS = {
    "debug_create": check_debug_create, "init_token": check_init_token, "envd_version": check_envd_version,
    "commands_run": check_commands_run, "commands_exit_error": check_commands_exit_error,
    "commands_env_cwd": check_commands_env_cwd, "commands_users": check_commands_users,
    "commands_background": check_commands_background, "commands_stdin": check_commands_stdin,
    "commands_stream_1mib": check_commands_stream_1mib, "commands_timeout": check_commands_timeout,
    "pty": check_pty, "files_text": check_files_text, "files_bytes": check_files_bytes,
    "files_1mib": check_big(1 << 20), "files_16mib": check_big(16 << 20), "files_ops": check_files_ops,
    "files_watch": check_files_watch, "files_upload_download": check_files_upload_download,
    "get_host": check_get_host,
}


# e2b-ci: @e2b/code-interpreter and e2b-code-interpreter (probe_ci.*).
# The installs of probe_ci.py / probe_ci.mjs (namespace layer only: they need
# the stack's package index, which a boot's guest cannot reach).
INSTALLED = {"install": 0, "imported": True, "importError": None}
CI_INSTALL_EXPECTED = {
    "ci_install_path": {"samePython": True, "pipsOfKernel": {"pip": True, "pip3": True},
                        "tools": {"node": 0, "npm": 0, "gcc": 0, "make": 0}},
    "ci_install_pip_user": INSTALLED,
    "ci_install_pip_sudo": INSTALLED,
    "ci_install_pip_bang": INSTALLED,
    "ci_install_pip_magic": INSTALLED,
    "ci_install_npm_require": INSTALLED,
}

CI_EXPECTED = {
    "ci_run_code": {"text": "2", "executionError": None},
    # One result: the figure, as a PNG and as e2b_charts' chart data.
    "ci_chart": {"results": 1, "pngMagic": "89504e470d0a1a0a", "chartType": "line", "chartTitle": "sdk chart",
                 "elements": [{"label": "squares", "points": [[1, 1], [2, 4], [3, 9]]}], "executionError": None},
    "ci_error": {"name": "ValueError", "value": "sdk boom", "hasTraceback": True},
    # State persists within the new context and not outside it; removed, the
    # context is listed no more.
    "ci_contexts": {"language": "python", "text": "42", "outsideError": "NameError", "listed": True,
                    "listedAfterRemove": False},
    # Both streams, in the execution's logs and through the callbacks.
    "ci_streams": {"stdout": ["out-line\n"], "stderr": ["err-line\n"], "onStdout": ["out-line\n"],
                   "onStderr": ["err-line\n"]},
    # envs= holds for that execution only (a str result comes back as its text).
    "ci_env": {"given": "from-sdk", "after": "unset"},
    # A DataFrame comes back as an HTML table (upstream's startup scripts add data too).
    "ci_dataframe": {"results": 1, "table": True, "cells": ["<th>a</th>", "<th>b</th>", "<td>x</td>", "<td>y</td>"]},
    # A restarted context has lost its state.
    "ci_restart": {"before": "7", "afterError": "NameError"},
    # run_code's own timeout raises the SDK's timeout error.
    "ci_timeout": {"timedOut": True},
    # After a run cut off by its timeout, the same context answers the next
    # run at once, and the cut-off run's envs are gone (PATCHES 0008).
    "ci_timeout_recovers": {"timedOut": True, "next": {"text": "4", "error": None},
                            "third": {"text": "unset", "error": None}},
}


# sbx.git (probe_git.*): the same scenario as `user` and as root, each in its
# home, then three failures as `user`. Observations in git's own words.
GIT_ERRORS = {
    "js": {"exit": "CommandExitError", "upstream": "GitUpstreamError"},
    "py": {"exit": "CommandExitException", "upstream": "GitUpstreamException"},
}
GIT_HOMES = {"user": "/home/user", "root": "/root"}
GIT_IDENTITY = "SDK Tester <sdk-tester@example.invalid>"


def git_status(branch, upstream=None, files=()):
    return {"currentBranch": branch, "upstream": upstream, "isClean": not files, "files": [list(f) for f in files]}


def check_git_init(who):
    home = GIT_HOMES[who]

    def check(o, sdk, envd_version):
        assert o == {"stdout": f"Initialized empty Git repository in {home}/git/work/.git/\n",
                     "bareStdout": f"Initialized empty Git repository in {home}/git/remote.git/\n",
                     "isBare": "false\ntrue\n", "owner": f"{who}\n{who}\n"}
    return check


def check_git_commit(who):
    def check(o, sdk, envd_version):
        assert o == {
            "untracked": git_status("main", files=[("hello.txt", "untracked", False)]),
            "staged": git_status("main", files=[("hello.txt", "added", True)]),
            "clean": git_status("main"),
            "committedLine": "[main (root-commit) <sha>] first commit",
            "branches": {"branches": ["feature", "main"], "currentBranch": "feature"},
            "log": f"{GIT_IDENTITY}|first commit\n",
            # configureUser's default scope is global: the user's own ~/.gitconfig.
            "globalConfig": "sdk-tester@example.invalid\n",
        }
    return check


def check_git_push(who):
    def check(o, sdk, envd_version):
        # Both branches reached the bare repository over file://, and
        # push's default --set-upstream made origin/feature feature's upstream.
        assert o == {"remoteBranches": "feature\nmain\n", "sameCommit": True,
                     "status": git_status("feature", "origin/feature")}
    return check


def check_git_clone_pull(who):
    def check(o, sdk, envd_version):
        assert o == {
            # clone --branch feature --single-branch: that branch, tracking origin.
            "cloned": git_status("feature", "origin/feature"), "branches": ["feature"],
            "pulledLog": "second commit\nfirst commit\n", "pulledFile": "second\n",
            "after": git_status("feature", "origin/feature"),
        }
    return check


def check_git_error_not_a_repository(o, sdk, envd_version):
    assert (o["errorClass"], o["exitCode"]) == (GIT_ERRORS[sdk]["exit"], 128), o
    # "(or any of the parent directories): .git", or "(or any parent up to
    # mount point …)" where the file system ends first (a chroot, a mount).
    assert len(o["gitFatal"]) == 1 and o["gitFatal"][0].startswith("fatal: not a git repository ("), o


def check_git_error_push_without_upstream(o, sdk, envd_version):
    assert o["errorClass"] == GIT_ERRORS[sdk]["upstream"], o
    assert o["message"].startswith("Git push failed because no upstream branch is configured."), o
    # Python raises it from git's CommandExitException, whose stderr is git's
    # own words; the JS SDK drops them (a new error, no cause).
    want = ["fatal: The current branch local-only has no upstream branch."] if sdk == "py" else []
    assert (o["exitCode"], o["gitFatal"]) == (None, want), o


def check_git_error_clone_missing(o, sdk, envd_version):
    assert (o["errorClass"], o["exitCode"]) == (GIT_ERRORS[sdk]["exit"], 128), o
    assert o["gitFatal"] == ["fatal: '/home/user/git/missing.git' does not appear to be a git repository",
                             "fatal: Could not read from remote repository."], o


GIT_CHECKS = {
    **{f"{step.__name__[len('check_'):]}_{who}": step(who) for who in GIT_HOMES
       for step in (check_git_init, check_git_commit, check_git_push, check_git_clone_pull)},
    "git_error_not_a_repository": check_git_error_not_a_repository,
    "git_error_push_without_upstream": check_git_error_push_without_upstream,
    "git_error_clone_missing": check_git_error_clone_missing,
}


# envd's E2B volumes (probe_envd_volumes.py): /init with volumeMounts makes
# envd run `mount -t nfs` with its own options. NFS_MOUNT_OPTIONS is envd's
# nfsOptions (internal/api/init.go at the pinned tag) behind "fg,hard,".
NFS_MOUNT_OPTIONS = ("fg,hard,sync,rsize=1048576,wsize=1048576,mountproto=tcp,mountport=2049,proto=tcp,port=2049,"
                     "nfsvers=3,noacl,noac,lookupcache=none")


def check_envd_volume_mount(o, sdk, envd_version):
    # Nothing serves the volume, so /init fails, naming envd's own command.
    assert o["status"] == 400, o
    assert (f"failed to setup NFS volumes: failed to mount NFS at \"/mnt/e2b-volume\": `mount -v -t nfs -o "
            f"{NFS_MOUNT_OPTIONS} 127.0.0.1:/e2b-volume /mnt/e2b-volume` failed") in o["body"], o
    # mount(8) handed the mount to the image's mount.nfs (nfs-common), which
    # speaks for itself; without it: "unknown filesystem type 'nfs'".
    assert "\nmount.nfs: " in o["body"], o
    assert "unknown filesystem type" not in o["body"], o


VOLUME_CHECKS = {"envd_volume_mount": check_envd_volume_mount}


# e2b-ci's other languages (ci_languages.json, run by probe_ci.*): each
# case's observation, {contextLanguage, steps: [one per step]}, or a check
# where a kernel's exact output was not yet observed (bash, java).
def ci_step(text=None, results=(), stdout=(), stderr=(), error=None, png=None):
    """One runCode's observation. RESULTS: (text, other formats) per result;
    the streams reach the execution's logs and the callbacks alike."""
    return {"text": text, "stdout": list(stdout), "stderr": list(stderr), "onStdout": list(stdout),
            "onStderr": list(stderr), "texts": [t for t, _ in results], "formats": [sorted(f) for _, f in results],
            "pngMagic": png, "error": error}


def ci_value(text):
    """An expression's value, as the server's main result (execute_result)."""
    return ci_step(text, [(text, [])])


def ci_r_value(text):
    """IRkernel sends a value as display_data (text, html, latex, markdown),
    so the SDK's main-result `text` stays empty and results[0].text holds it."""
    return ci_step(None, [(text, ["html", "latex", "markdown"])])


def ci_case(steps, context=None):
    return {"contextLanguage": context, "steps": steps}


TIMED_OUT = {"thrown": "TimeoutError"}
STREAMS = ci_step(stdout=["out-line\n"], stderr=["err-line\n"])


def check_bash(want_stdout, want_error=None, context=None, timed_out_first=False):
    """bash_kernel runs bash on a pty: both streams arrive as stdout, in
    chunks of its choosing; an exit status other than 0 is its error."""
    def check(o):
        assert o["contextLanguage"] == context, o
        steps = o["steps"][1:] if timed_out_first else o["steps"]
        if timed_out_first:
            assert o["steps"][0] == TIMED_OUT, o
        for step, (stdout, error) in zip(steps, zip(want_stdout, want_error or [None] * len(want_stdout)), strict=True):
            assert "thrown" not in step, o
            assert "".join(step["stdout"]) == stdout and step["stdout"] == step["onStdout"], o
            assert step["stderr"] == step["onStderr"] == [], o
            if error is None:
                assert step["error"] is None, o
            else:
                assert step["error"] is not None and step["error"]["value"] == error, o
    return check


def check_java_error(o):
    """JJava reports an exception thrown by a snippet as JShell hands it over,
    wrapped: ename "RuntimeException", evalue "<class>, <message>" (observed
    with JJava 1.0a8 on OpenJDK 21), the stack trace as its traceback."""
    err = o["steps"][0]["error"]
    assert err is not None and err["name"] == "RuntimeException", o
    assert err["value"] == "java.lang.IllegalStateException, java boom" and err["tracebackHasMarker"], o


CI_LANGUAGE_EXPECTED = {
    # The server's default JavaScript context exists from its start: a run in
    # js without a context answers.
    "ci_js_default_context": ci_case([ci_value("true")]),
    "ci_js_answer": ci_case([ci_value("[ 2, 4, 6 ]"), ci_value("{ name: 'e2b', answer: 42 }")]),
    "ci_js_error": ci_case([ci_step(error={"name": "TypeError", "value": "js boom", "tracebackHasMarker": True})]),
    "ci_js_streams": ci_case([STREAMS]),
    "ci_js_context": ci_case([ci_value("41"), ci_value("42")], "javascript"),
    # ijavascript restarts its session on an interrupt (state is lost, as
    # upstream's); the next run must still answer.
    "ci_js_timeout_recovers": ci_case([TIMED_OUT, ci_value("4")], "javascript"),
    "ci_ts_answer": ci_case([ci_value("42"), ci_value("42")]),
    "ci_ts_error": ci_case([ci_step(error={"name": "RangeError", "value": "ts boom", "tracebackHasMarker": True})]),
    "ci_ts_streams": ci_case([STREAMS]),
    "ci_ts_context": ci_case([ci_value("41"), ci_value("42")], "typescript"),
    "ci_r_answer": ci_case([ci_r_value("[1] 2")]),
    # plot() comes back as image/png (with its alt text as text/plain).
    "ci_r_plot": ci_case([ci_step(None, [("plot without title", ["png"])], png="89504e470d0a1a0a")]),
    # IRkernel's error: ename "ERROR", evalue R's condition message.
    "ci_r_error": ci_case([ci_step(error={"name": "ERROR", "value": "Error: r boom\n", "tracebackHasMarker": True})]),
    # message() goes to stderr; IRkernel's stream ends with a blank line.
    "ci_r_streams": ci_case([ci_step(stdout=["out-line\n"], stderr=["err-line\n\n"])]),
    "ci_r_context": ci_case([ci_r_value("[1] 41"), ci_r_value("[1] 42")], "r"),
    "ci_r_timeout_recovers": ci_case([TIMED_OUT, ci_r_value("[1] 4")], "r"),
    "ci_bash_answer": check_bash(["42\n"]),
    "ci_bash_error": check_bash(["ls: cannot access '/nonexistent-e2b-ci': No such file or directory\n"], ["2"]),
    "ci_bash_streams": check_bash(["out-line\nerr-line\n"]),
    "ci_bash_context": check_bash(["41\n", "42\n"], context="bash"),
    "ci_bash_timeout_recovers": check_bash(["after\n"], context="bash", timed_out_first=True),
    "ci_java_answer": ci_case([ci_value("42"), ci_step(stdout=["Hello, World!\n"])]),
    "ci_java_error": check_java_error,
    "ci_java_streams": ci_case([STREAMS]),
    "ci_java_context": ci_case([ci_value("41"), ci_value("42")], "java"),
    "ci_java_timeout_recovers": ci_case([TIMED_OUT, ci_value("4")], "java"),
}
