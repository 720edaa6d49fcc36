"""E2B's real SDKs, unmodified and in debug mode, against the real envd from
the e2b-rt tree, end to end through our host channel: the JS `e2b` SDK from
npm and the Python `e2b` SDK from PyPI each run every case once
(probe_e2b.mjs, probe_e2b.py) in a namespace stack (sdk_stack.sh: guard,
mmds-serve, envd in Firecracker mode, the dynamic relay, the hybrid-vsock
stand-in, e2b-hostlink forward). One stack per SDK per session; each case
is its own test (test_case[js-commands_run]) with the same expected values
for both SDKs.

Tree: $E2B_SDK_RT_TREE, or the session's e2b-rt build (testimages)."""
import hashlib
import json
import pathlib
import re
import subprocess

import pytest

from harness import require_root
from sdk_helpers import NPM_SRC, StackRun, npm_sdk, npm_version, pinned_py, py_sdk, tree

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


@pytest.fixture(scope="module")
def rt_tree():
    require_root()
    return tree("e2b-rt")


_runs = {}


@pytest.fixture(scope="module")
def run(request, rt_tree, tmp_path_factory):
    """The stack run for the test's SDK (made on first use, then shared)."""
    sdk = request.param
    if sdk not in _runs:
        work = tmp_path_factory.mktemp(f"sdk-{sdk}")
        if sdk == "js":
            probe, cwd = ["node", "probe_e2b.mjs"], npm_sdk()
        else:
            probe, cwd = [py_sdk(), pathlib.Path(__file__).resolve().parent / "probe_e2b.py"], None
        _runs[sdk] = StackRun("e2b-rt", rt_tree, work, probe, cwd=cwd)
    return sdk, _runs[sdk]


def check_debug_create(o, sdk, tree_path):
    # Debug mode: no API call, a fixed id, localhost hosts, and no version
    # read from envd: the SDK's fallback, which gates no feature off.
    assert o == {"sandboxId": "debug_sandbox_id", "host3000": "localhost:3000", "envdVersion": "99.99.99",
                 "stdout": "pre-init\n"}


def check_init_token(o, sdk, tree_path):
    assert o["wrongTokenStatus"] == 401, "envd took an /init token whose sha512 is not MMDS's accessTokenHash"
    assert o["initStatus"] == 204
    assert (o["unauthStatus"], o["authStatus"]) == (401, 200), "the token /init set is not enforced"
    assert o["envsVar"] == "from-init"
    assert o["sdkWithoutToken"] == ERRORS[sdk]["auth"]
    # /init's envVars reach a command's environment, its defaultUser runs it.
    assert o["stdout"] == "from-init\nuser\n"


def check_envd_version(o, sdk, tree_path):
    # What the pool reports to the SDK as envdVersion (trimmed: the JS SDK's
    # parser refuses surrounding whitespace) must be what envd says it is.
    shipped = (tree_path / "etc" / "envd-version").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", shipped), f"/etc/envd-version holds {shipped!r}"
    assert o == {"initHeader": shipped, "sdkVersion": shipped}


def check_commands_run(o, sdk, tree_path):
    assert o == {"stdout": "out\n", "stderr": "err\n", "exitCode": 0}


def check_commands_exit_error(o, sdk, tree_path):
    assert o == {"errorClass": ERRORS[sdk]["exit"], "exitCode": 3, "stdout": "partial\n", "stderr": "bad\n"}


def check_commands_env_cwd(o, sdk, tree_path):
    assert o == {"stdout": "v a l|/tmp"}


def check_commands_users(o, sdk, tree_path):
    assert o == {"root": "0\nroot\n", "user": "1000\nuser\n"}


def check_commands_background(o, sdk, tree_path):
    assert o == {"listed": True, "killed": True, "listedAfter": False, "waitError": ERRORS[sdk]["exit"]}


def check_commands_stdin(o, sdk, tree_path):
    assert o == {"stdout": "one\ntwo\n", "exitCode": 0}


def check_commands_stream_1mib(o, sdk, tree_path):
    want = sha(b"0123456789abcde\n" * 65536)
    assert (o["streamedBytes"], o["resultBytes"]) == (1 << 20, 1 << 20)
    assert (o["streamedSha256"], o["resultSha256"]) == (want, want)
    assert o["chunks"] > 1, "1 MiB arrived in one piece: not streamed"


def check_commands_timeout(o, sdk, tree_path):
    assert o["errorClass"] == ERRORS[sdk]["timeout"]
    assert 0.9 <= o["seconds"] < 5, o


def check_pty(o, sdk, tree_path):
    # Terminal output: lines end in \r\n, bash's bracketed-paste toggles and
    # carriage returns around them; what matters is the lines' text.
    lines = {re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", part).strip() for part in re.split(r"[\r\n]+", o["output"])}
    assert "24 80" in lines, o["output"]      # the size it was created with
    assert "PTY-42" in lines, o["output"]     # input reached the shell (which did the sum), output came back
    assert "30 100" in lines, o["output"]     # resize reached the terminal
    assert o["killed"] is True


def check_files_text(o, sdk, tree_path):
    assert o == {"text": "hello, ünïcödé\nline 2\n"}


def check_files_bytes(o, sdk, tree_path):
    assert o == {"hex": bytes(range(256)).hex()}


def check_big(n):
    def check(o, sdk, tree_path):
        want = sha(pattern(n))
        assert o == {"writtenSha256": want, "readSha256": want, "guestSha256": want, "size": n}
    return check


def check_files_ops(o, sdk, tree_path):
    assert o == {
        "madeDir": True, "madeAgain": False, "list": [["a.txt", "file"], ["sub", "dir"]],
        "info": {"name": "a.txt", "type": "file", "size": 3, "path": f"{HOME}/sdk-ops/a.txt", "owner": "user"},
        "renamed": f"{HOME}/sdk-ops/b.txt", "existsOld": False, "existsNew": True, "existsAfterRemove": False,
    }


def check_files_watch(o, sdk, tree_path):
    events = [tuple(e) for e in o["events"]]
    for want in (("create", "a.txt"), ("write", "a.txt"), ("remove", "a.txt")):
        assert want in events, events
    assert events.index(("create", "a.txt")) < events.index(("remove", "a.txt")), events


def check_files_upload_download(o, sdk, tree_path):
    want = sha(pattern(300000))
    assert o == {"signed": True, "uploadStatus": 200, "downloadStatus": 200, "downloadedSha256": want,
                 "sentSha256": want, "unsignedStatus": 401}


def check_get_host(o, sdk, tree_path):
    # Through forward 3000 -> the fake VMM's vsock port 10000 -> the real
    # dynamic relay (CONNECT 3000) -> the server in the guest: the stand-in
    # maps no port 3000 of its own.
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


@pytest.mark.parametrize("name", list(CHECKS))
@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_case(run, name, rt_tree):
    sdk, stack = run
    CHECKS[name](stack.case(name), sdk, rt_tree)


@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_envd_read_mmds_in_firecracker_mode(run):
    """envd ran without -isnotfc and took its ids from mmds-serve's document."""
    sdk, stack = run
    assert stack.stack.get("STACK-SANDBOX-ID") == stack.instance_id, stack.output[-3000:]
    assert stack.stack.get("STACK-TEMPLATE-ID") == stack.env_id, stack.output[-3000:]


@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_probe_reported_every_case_and_nothing_else(run):
    sdk, stack = run
    assert sorted(stack.cases) == sorted(CHECKS), stack.output[-3000:]
    assert stack.returncode == 0, stack.output[-3000:]


def test_installed_sdks_are_the_pinned_ones():
    """What the probes import is what tests/sdk pins: npm's lock and
    requirements.txt (a stale build/ copy would test another SDK)."""
    npm_sdk()
    wanted = json.loads((NPM_SRC / "package.json").read_text())["dependencies"]
    assert {name: npm_version(name) for name in wanted} == wanted
    python = py_sdk()
    got = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                          "print(m.version('e2b'), m.version('e2b-code-interpreter'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert got == [pinned_py("e2b"), pinned_py("e2b-code-interpreter")]
