"""Shared by tests/sdk: the pinned SDK installs (build/npm-e2b, build/py-sdk),
the image trees, and one run of sdk_stack.sh with a probe, parsed into its
CASE lines."""
import hashlib
import json
import os
import re
import pathlib
import secrets
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1]))  # the checkout's packages, also when run outside pytest (tests/boot/vm.py)

import testimages  # noqa: E402
from harness import BUILD, require_root  # noqa: E402
from template.e2b import sdk_venv  # noqa: E402

NPM_SRC = HERE / "npm"                 # package.json (exact versions) + package-lock.json (integrity)
NPM_DIR = BUILD / "npm-e2b"
REQUIREMENTS = HERE / "requirements.txt"
PY_DIR = BUILD / "py-sdk"
STACK = HERE / "sdk_stack.sh"
# A boot plus every case takes seconds (rt) to minutes (ci: Jupyter, five kernels);
# these bound a hang.
STACK_TIMEOUT = {"e2b-rt": 300, "e2b-base": 900, "e2b-ci": 1200}

# Where the probes' files are; the JS ones (and their shared module) are
# copied next to node_modules so that `import 'e2b'` resolves to build/npm-e2b.
JS_PROBES = ("sdk_session.mjs", "probe_e2b.mjs", "probe_git.mjs", "probe_ci.mjs", "ci_languages.json")


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def npm_sdk() -> pathlib.Path:
    """`npm ci` of tests/sdk/npm into build/npm-e2b, again only when the
    lock changed (the copy of it in build/npm-e2b is the stamp)."""
    lock = NPM_SRC / "package-lock.json"
    stamp = NPM_DIR / "package-lock.json"
    if not (stamp.exists() and _sha256(stamp) == _sha256(lock) and (NPM_DIR / "node_modules" / "e2b").is_dir()):
        if not shutil.which("npm"):
            pytest.fail("npm missing: make deps")
        shutil.rmtree(NPM_DIR, ignore_errors=True)
        NPM_DIR.mkdir(parents=True)
        shutil.copy(NPM_SRC / "package.json", NPM_DIR)
        shutil.copy(lock, NPM_DIR)
        cp = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NPM_DIR, capture_output=True, text=True,
                            timeout=600)
        if cp.returncode != 0:
            stamp.unlink(missing_ok=True)
            pytest.fail(f"npm ci in {NPM_DIR}: {cp.stderr[-2000:]}")
    for probe in JS_PROBES:
        shutil.copy(HERE / probe, NPM_DIR / probe)
    return NPM_DIR


def npm_version(package: str) -> str:
    return json.loads((NPM_DIR / "node_modules" / package / "package.json").read_text())["version"]


def py_sdk() -> pathlib.Path:
    """A venv of /usr/bin/python3 at build/py-sdk with requirements.txt
    installed under --require-hashes, wheels only, no resolver (the file pins
    the whole closure); rebuilt only when requirements.txt changed
    (template/e2b/sdk_venv.py, as the build's own $(build)/e2b-sdk). Returns
    the venv's python."""
    try:
        return pathlib.Path(sdk_venv.ensure(str(PY_DIR), str(REQUIREMENTS), timeout=600))
    except sdk_venv.VenvError as e:
        pytest.fail(str(e))


def pinned_py(name: str) -> str:
    """The version requirements.txt pins NAME at."""
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==")[1].split()[0]
    raise AssertionError(f"{name} is not pinned in {REQUIREMENTS}")


def tree(flavor: str) -> pathlib.Path:
    """FLAVOR's image tree: $E2B_SDK_RT_TREE / _BASE_ / _CI_TREE, or the
    session's build (testimages.image). Every image ships the real envd, so a
    tree whose envd is not it fails here."""
    var = {"e2b-rt": "E2B_SDK_RT_TREE", "e2b-base": "E2B_SDK_BASE_TREE", "e2b-ci": "E2B_SDK_CI_TREE"}[flavor]
    given = os.environ.get(var)
    if given:
        path = pathlib.Path(given)
        if not (path / "usr" / "bin" / "envd").exists():
            pytest.fail(f"${var}={given} is not an image tree with /usr/bin/envd")
    else:
        built = testimages.image(flavor)
        if not built.ok:
            pytest.fail(built.failure())
        path = built.tree
    # The real envd prints the commit it was built from.
    cp = subprocess.run(["chroot", str(path), "/usr/bin/envd", "-commit"], capture_output=True, text=True)
    if cp.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}\n", cp.stdout):
        pytest.fail(f"{flavor} tree {path}: its envd is not the real one (`envd -commit`: rc {cp.returncode}, "
                    f"{(cp.stdout + cp.stderr).strip()[:200]!r})")
    return path


def run_captured(argv, timeout: float, **kw) -> tuple:
    """(stdout, then stderr's tail; the exit code, None on a time-out) of ARGV."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
        return cp.stdout + "\n--- stderr\n" + cp.stderr[-5000:], cp.returncode
    except subprocess.TimeoutExpired as e:
        out = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        return f"timed out after {timeout}s:\n{out[0]}\n{out[1]}", None


def case_lines(output: str) -> dict:
    """A probe's observations: its `CASE <name> <json>` lines, by name."""
    cases = {}
    for line in output.splitlines():
        if line.startswith("CASE "):
            _, name, obs = line.split(" ", 2)
            cases[name] = json.loads(obs)
    return cases


class StackRun:
    """One boot of sdk_stack.sh (FLAVOR, TREE) running PROBE in the host
    namespace: its CASE observations by name, and the whole output for
    failure messages. INDEX: the stack serves package_index.py to the
    guest (E2B_SDK_INDEX_URL for the probe; its requests in .index_log)."""

    def __init__(self, flavor: str, tree_path: pathlib.Path, work: pathlib.Path, probe: list, cwd=None,
                 index: bool = False):
        self.token = secrets.token_hex(24)
        self.instance_id = "isdk" + secrets.token_hex(6)
        self.env_id = "sdk-template"
        env = dict(os.environ, E2B_SDK_TOKEN=self.token, E2B_SDK_INSTANCE_ID=self.instance_id,
                   E2B_SDK_ENV_ID=self.env_id, E2B_SDK_USER_SERVER=str(HERE / "user_server.sh"),
                   E2B_SDK_TOKEN_HASH=hashlib.sha512(self.token.encode()).hexdigest(),
                   E2B_SDK_INDEX="1" if index else "")
        work.mkdir(parents=True, exist_ok=True)
        # -no-cgroups: see README.md (this host's cgroup2 tree has no cpu,
        # memory or io controller, so envd's cgroup manager cannot be made).
        # --kill-child: if unshare dies (a time-out kills it), the namespace's
        # init dies too, and with it every process and mount of the stack.
        argv = ["unshare", "--net", "--mount", "--pid", "--kill-child", "--mount-proc", str(STACK),
                "ci" if flavor == "e2b-ci" else "rt", str(tree_path), str(work), str(BUILD), "-no-cgroups",
                "--", *map(str, probe)]
        self.output, self.returncode = run_captured(argv, STACK_TIMEOUT[flavor], env=env, cwd=cwd)
        self.cases = case_lines(self.output)
        self.stack = dict(line.partition(" ")[::2] for line in self.output.splitlines() if line.startswith("STACK-"))
        log = work / "logs" / "index.log"
        self.index_log = log.read_text() if index and log.is_file() else ""

    def case(self, name: str) -> dict:
        """NAME's observation; fails with the stack's output if the probe
        did not report it or reported an exception."""
        obs = self.cases.get(name)
        assert obs is not None, f"no CASE {name} (exit {self.returncode}):\n{self.output[-6000:]}"
        assert "error" not in obs, f"{name}: {obs['error']}\n--- stack\n{self.output[-3000:]}"
        return obs


def probe_run(sdk: str, probe: str, tree_path: pathlib.Path, work: pathlib.Path) -> StackRun:
    """One e2b-rt stack run of PROBE (probe_e2b, probe_git) for SDK: js runs
    PROBE.mjs with node next to build/npm-e2b's node_modules, py runs PROBE.py
    with build/py-sdk's python."""
    if sdk == "js":
        return StackRun("e2b-rt", tree_path, work, ["node", f"{probe}.mjs"], cwd=npm_sdk())
    return StackRun("e2b-rt", tree_path, work, [py_sdk(), HERE / f"{probe}.py"])


@pytest.fixture(scope="module")
def rt_tree():
    """The e2b-rt tree (tree()); test modules import this fixture by name."""
    require_root()
    return tree("e2b-rt")


def rt_probe_fixture(probe: str):
    """A module fixture for tests parametrized indirectly by SDK ("js",
    "py"): (sdk, the e2b-rt stack run of PROBE for it), made on first use and
    then shared. One run per SDK: /init sets a token, so they must not share
    an envd."""
    runs = {}

    @pytest.fixture(scope="module")
    def fixture(request, rt_tree, tmp_path_factory):
        sdk = request.param
        if sdk not in runs:
            runs[sdk] = probe_run(sdk, probe, rt_tree, tmp_path_factory.mktemp(f"{probe}-{sdk}"))
        return sdk, runs[sdk]
    return fixture
