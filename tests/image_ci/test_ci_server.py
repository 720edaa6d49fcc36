"""e2b-ci's API server from the built tree, started with its units' own
ExecStart= (stack.sh, unit_cmd.py) in a private network namespace:

- a start that fails on a slow kernel leaves no kernel behind, the next start
  comes up first time, and a killed server's restart does not pile up kernels
  (os-image/e2b-ci/PATCHES 0004);
- the server, started before Jupyter, waits for it, and gives up after its
  time-out saying so (PATCHES 0006);
- E2B's own SDK, @e2b/code-interpreter from npm in debug mode, runs code
  through it (POST /execute on :49999, then Jupyter, then a kernel);
- a request the kernel aborts is answered, an interrupt of an idle kernel
  does not reach the next run, and the wait for the kernel's end of an
  abandoned run outlasts its task's cancellation (PATCHES 0008).

Both need upstream's real server: the stand-in fixture opens no websocket and
has no /execute, so on a build from the fixture these tests skip and say so.
E2B_TEST_CI_TREE=DIR runs them against an existing e2b-ci tree instead of the
session's build.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from ci_helpers import ROOT, run

sys.path.insert(0, str(ROOT / "tests"))
import testimages  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
SDK_PACKAGE = "@e2b/code-interpreter@2.8.0"
SDK_DIR = ROOT / "build" / "e2b-sdk"
# Kernel start slowed to SLOW s; the forced failure's time-out is SHORT s.
SLOW, SHORT = 20, 4


@pytest.fixture(scope="module")
def tree():
    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, chroot)")
    if os.environ.get("E2B_TEST_CI_TREE"):
        return pathlib.Path(os.environ["E2B_TEST_CI_TREE"])
    built = testimages.image("e2b-ci")
    if not built.ok:
        pytest.fail(built.failure())
    return built.tree


@pytest.fixture(scope="module")
def upstream_tree(tree):
    main = (tree / "usr/lib/e2b-code-interpreter/server/main.py").read_text()
    if "Stand-in" in main:
        pytest.skip(f"{tree}: built from the stand-in fixture (tests/fixtures/code-interpreter), "
                    "not upstream's server; build from the shipped recipes/code-interpreter.lock")
    print(f"\nserver: upstream's, from {tree}")
    return tree


def in_namespace(argv, timeout):
    return run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", *argv], timeout=timeout)


def kv(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def default_kernels(tree) -> str:
    """How many kernels the server's start leaves running: its default
    contexts, python's and (where the image has the kernel) javascript's."""
    return str(1 + ("javascript" in testimages.ci_kernels(tree)))


def test_failed_start_leaves_no_kernel_and_restart_does_not_pile_up(upstream_tree):
    n = default_kernels(upstream_tree)
    cp = in_namespace([HERE / "server_restart.sh", upstream_tree, SLOW, SHORT], timeout=900)
    out = cp.stdout
    print(out[-3000:])
    assert cp.returncode == 0, out[-4000:] + cp.stderr[-2000:]
    lines = {l.split()[0]: l for l in out.splitlines() if l and l.split()[0].isupper()}
    failed = kv(lines["FAILED-START"])
    assert failed["rc"] != "0", "the start with a time-out below the kernel's start time must fail"
    assert int(failed["seconds"]) < SLOW + 10, "the time-out must bound the failed start"
    assert kv(lines["AFTER-FAILED"]) == {"kernels": "0", "sessions": "0"}, lines["AFTER-FAILED"]
    assert lines["FIRST-START"].startswith("FIRST-START healthy"), out[-3000:]
    assert kv(lines["FIRST-START"])["kernels"] == n, lines["FIRST-START"]
    assert kv(lines["KILLED"])["kernels"] == n, lines["KILLED"]
    assert lines["RESTART"].startswith("RESTART healthy"), out[-3000:]
    assert kv(lines["RESTART"]) == {"kernels": n, "sessions": n}, lines["RESTART"]


# Jupyter's start: the time-out of the forced failure, and how late a slow
# Jupyter starts after the API server.
JUPYTER_SHORT, JUPYTER_DELAY = 3, 8


def test_api_server_waits_for_jupyter_itself(upstream_tree):
    """The units start Jupyter and the API server together (PATCHES 0006):
    the server waits for Jupyter's /api/status before its default context,
    gives up after E2B_CI_JUPYTER_START_TIMEOUT with a message that names
    Jupyter and its last answer (none, 503, or no answer within a try's
    5 s), refuses a time-out that is no number of seconds (PATCHES 0007),
    and otherwise comes up once a late Jupyter answers."""
    cp = in_namespace([HERE / "jupyter_wait.sh", upstream_tree, JUPYTER_SHORT, JUPYTER_DELAY], timeout=600)
    out = cp.stdout
    print(out[-3000:])
    assert cp.returncode == 0, out[-4000:] + cp.stderr[-2000:]
    lines = {l.split()[0]: l for l in out.splitlines() if l and l.split()[0].isupper()}
    failed = kv(lines["NO-JUPYTER"])
    assert failed["rc"] != "0", "without Jupyter the server's start must fail"
    assert JUPYTER_SHORT <= int(failed["seconds"]) < JUPYTER_SHORT + 30, lines["NO-JUPYTER"]
    says = lines["NO-JUPYTER-SAYS"]
    assert ("Jupyter did not answer GET http://localhost:8888/api/status with 200 within "
            f"{JUPYTER_SHORT} s (last try: ConnectError") in says, says
    assert "journalctl -u jupyter.service" in says, says
    # A value that is no time-out stops the start at once, naming itself.
    bad = kv(lines["BAD-TIMEOUT"])
    assert bad["rc"] != "0" and int(bad["seconds"]) < 30, lines["BAD-TIMEOUT"]
    assert ("E2B_CI_JUPYTER_START_TIMEOUT='3m' is not a time-out in seconds: set it to a positive number "
            "(the default is 180)") in lines["BAD-TIMEOUT-SAYS"], lines["BAD-TIMEOUT-SAYS"]
    # A Jupyter that is up but not ready, and one that never answers: the
    # wait gives up after its time-out (plus one 5 s try), naming the answer.
    for mode, last in (("503", "answered 503"), ("silent", "ReadTimeout")):
        got = kv(lines[f"JUPYTER-{mode.upper()}"])
        assert got["rc"] != "0", lines[f"JUPYTER-{mode.upper()}"]
        assert JUPYTER_SHORT <= int(got["seconds"]) < JUPYTER_SHORT + 5 + 30, lines[f"JUPYTER-{mode.upper()}"]
        says = lines[f"JUPYTER-{mode.upper()}-SAYS"]
        assert f"within {JUPYTER_SHORT} s (last try: {last}" in says, says
    assert lines["BEFORE-JUPYTER"] == "BEFORE-JUPYTER waiting", out[-3000:]
    assert kv(lines["BEFORE-JUPYTER-HEALTH"]) == {"code": "000"}, "not listening before its context exists"
    assert lines["LATE-JUPYTER"] == f"LATE-JUPYTER healthy kernels={default_kernels(upstream_tree)}", out[-3000:]


SDK_SCRIPT = """
import { Sandbox } from '@e2b/code-interpreter'
const sbx = await Sandbox.create({ debug: true })
const out = {}
let ex = await sbx.runCode('1+1')
out.sum = { text: ex.text, error: ex.error ? ex.error.name : null }
ex = await sbx.runCode('import sys\\nprint("hello from", sys.implementation.name)\\nx = 21')
out.print = { stdout: ex.logs.stdout, error: ex.error ? ex.error.name : null }
ex = await sbx.runCode('x * 2')
out.state = { text: ex.text }
ex = await sbx.runCode('1/0')
out.error = { name: ex.error ? ex.error.name : null }
console.log('SDK ' + JSON.stringify(out))
"""


@pytest.fixture(scope="module")
def sdk():
    """E2B's JS SDK from npm, installed under build/ (not committed)."""
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.fail("npm/node missing: run `make deps`")
    marker = SDK_DIR / "node_modules/@e2b/code-interpreter/package.json"
    want = SDK_PACKAGE.rsplit("@", 1)[1]
    if not marker.exists() or json.loads(marker.read_text())["version"] != want:
        SDK_DIR.mkdir(parents=True, exist_ok=True)
        cp = run(["npm", "install", "--no-audit", "--no-fund", "--prefix", SDK_DIR, SDK_PACKAGE], timeout=600)
        assert cp.returncode == 0, f"npm install {SDK_PACKAGE}: {cp.stderr[-2000:]}"
    script = SDK_DIR / "run-code.mjs"
    script.write_text(SDK_SCRIPT)
    return script


def run_in_stack(tree, tmp_path, commands, marker):
    """COMMANDS (bash) run once the stack from TREE is up, in a namespace of
    their own; the JSON they printed after MARKER on a line of its own."""
    script = tmp_path / "in-stack.sh"
    script.write_text(f"""#!/bin/bash
set -u
logs=$(mktemp -d)
. {HERE}/stack.sh
start_e2b_ci_stack {tree} "$logs" || {{ echo "STACK down"; tail -20 "$logs"/*.log; exit 1; }}
{commands}
rc=$?
echo "--- server log"; grep -v '^DEBUG' "$logs/server.log" | tail -20
exit $rc
""")
    cp = in_namespace(["bash", script], timeout=600)
    output = cp.stdout[-4000:] + cp.stderr[-3000:]
    assert cp.returncode == 0, output
    line = next((l for l in cp.stdout.splitlines() if l.startswith(marker + " ")), None)
    assert line, output
    got = json.loads(line[len(marker) + 1:])
    print(got)
    return got


def test_e2b_sdk_runs_code_through_the_api_server(upstream_tree, sdk, tmp_path):
    """Sandbox.create({debug: true}) makes no API call; runCode posts to
    localhost:49999/execute. The SDK's debug mode would reach envd on
    localhost:49983 for commands and files; runCode does not, and the API
    server's own GET /envs there is answered by stack.sh's stand-in."""
    got = run_in_stack(upstream_tree, tmp_path, f"timeout 300 node {sdk}", "SDK")
    assert got["sum"] == {"text": "2", "error": None}
    assert got["print"]["stdout"] == ["hello from cpython\n"] and got["print"]["error"] is None
    assert got["state"] == {"text": "42"}
    assert got["error"] == {"name": "ZeroDivisionError"}


def test_kernel_side_of_an_interrupted_run(upstream_tree, tmp_path):
    """PATCHES 0008, the kernel's side (the SDKs' own case is tests/sdk,
    ci_timeout_recovers): a request that ipykernel aborts because a cell
    before it failed (stop_on_error; ipykernel answers "aborted") ends with
    ExecutionAborted instead of staying open, and the context still works;
    an interrupt that reaches an idle kernel does not reach the next run."""
    got = run_in_stack(upstream_tree, tmp_path,
                       f'cp {HERE}/kernel_cases.py {HERE}/execute_client.py "$E2B_CI_TREE/tmp/"\n'
                       "e2b_ci_as_user /usr/lib/e2b-code-interpreter/venv/bin/python /tmp/kernel_cases.py",
                       "KERNEL-CASES")
    assert got == {
        "queued_behind_failing_cell": {"text": None, "error": "ExecutionAborted", "ended": True},
        "after_abort": {"text": "4", "error": None, "ended": True},
        "idle_interrupt_status": 204,
        "after_idle_interrupt": {"text": "4", "error": None, "ended": True},
    }


def test_settle_finishes_although_its_task_is_cancelled(upstream_tree):
    """PATCHES 0008: the wait that holds a context's lock until the kernel is
    done runs to its end under both kinds of cancellation (upstream's
    asyncio.shield returned at once under the first, and its caller went on
    under the second), with the tree's own python and anyio."""
    cp = run(["chroot", "--userspec=1000:1000", upstream_tree, "/usr/bin/env", "-i", "HOME=/tmp",
              "PATH=/usr/bin:/bin", "/usr/lib/e2b-code-interpreter/venv/bin/python", "-"],
             input=(HERE / "settle_cases.py").read_text(), timeout=60)
    assert cp.returncode == 0, cp.stderr[-3000:]
    got = json.loads(cp.stdout.partition("SETTLE-CASES ")[2])
    assert got == {"cancel_scope": ["work done", "caller re-raises", "group ended"],
                   "task_cancel": ["work done", "caller re-raises", "caller cancelled"]}


def test_unit_cmd_is_the_units_own_command(tmp_path):
    """unit_cmd.py runs what the unit says, drop-ins included."""
    units = tmp_path / "usr/lib/systemd/system"
    (units / "code-interpreter.service.d").mkdir(parents=True)
    shutil.copy(ROOT / "units/code-interpreter.service", units)
    (units / "code-interpreter.service.d/10-pydeps-pip.conf").write_text(
        "[Service]\nEnvironment=E2B_CI_PYTHON=/usr/lib/e2b-code-interpreter/venv/bin/python\n")
    cp = run(["/usr/bin/python3", HERE / "unit_cmd.py", tmp_path, "code-interpreter.service"])
    assert cp.returncode == 0, cp.stderr
    unit = (ROOT / "units/code-interpreter.service").read_text()
    exec_start = re.search(r"^ExecStart=/bin/sh -c '(.*)'$", unit, re.M).group(1)
    assert cp.stdout.startswith("cd /usr/lib/e2b-code-interpreter/server && exec env -i ")
    assert "E2B_CI_PYTHON=/usr/lib/e2b-code-interpreter/venv/bin/python" in cp.stdout
    assert exec_start in cp.stdout
    # And it runs: the command, as sh sees it, starts the unit's argv.
    cp = subprocess.run(["sh", "-n", "-c", cp.stdout], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
