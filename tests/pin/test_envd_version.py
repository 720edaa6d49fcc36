"""envd-version with stand-in `envd` scripts (the real envd release binary is
not available here; these scripts stand in for it and live only under tests/).
The record it writes is read back with both SDK parsers: Python's
packaging.version (via /usr/bin/python3) and npm's compare-versions."""
import json
import os
import pathlib
import shutil
import stat
import subprocess
import time
import uuid

import pytest

from harness import BUILD, ROOT

PY = "/usr/bin/python3"
# Where `make deps` (mk/deps.sh, NPM_TEST_PREFIX) installs the tests' npm packages.
NPM_PREFIX = pathlib.Path("/usr/local/lib/e2b-images-tests")


def stand_in(tmp_path, body, name="envd", mode=0o755):
    p = tmp_path / "bin" / name
    p.parent.mkdir(exist_ok=True)
    p.write_text("#!/bin/sh\n# test stand-in for envd -version\n" + body + "\n")
    p.chmod(mode)
    return p


def record(tools, envd, out, expect="0.8.0", *extra):
    return tools.run("envd-version", "--envd", envd, "--expect", expect, "--output", out, *extra,
                     preexec_fn=lambda: os.umask(0o077))


@pytest.fixture
def root(tmp_path):
    etc = tmp_path / "root" / "etc"
    etc.mkdir(parents=True)
    return etc


@pytest.fixture(scope="session")
def compare_versions():
    """npm's compare-versions@6, as `make deps` installs it."""
    mod = NPM_PREFIX / "node_modules" / "compare-versions"
    if not shutil.which("node") or not (mod / "package.json").is_file():
        pytest.fail(f"node or {mod} is missing: run `make deps`")
    assert json.loads((mod / "package.json").read_text())["version"].startswith("6."), mod
    return mod


def node_check(mod, versions, pairs=()):
    """For each string: does compare-versions' validateStrict/compare accept it."""
    script = """
const cv = require(process.argv[1]);
const {versions, pairs} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const ok = versions.map(v => { try { cv.compareVersions(v, '0.0.0'); return cv.validate(v); } catch (e) { return false; } });
const cmp = pairs.map(([a, b]) => cv.compareVersions(a, b));
console.log(JSON.stringify({ok, cmp}));
"""
    cp = subprocess.run(["node", "-e", script, str(mod)], input=json.dumps({"versions": versions, "pairs": pairs}),
                        capture_output=True, text=True, timeout=60, check=True)
    return json.loads(cp.stdout)


def python_check(versions, pairs=()):
    script = """
import json, sys
from packaging.version import Version, InvalidVersion
d = json.load(sys.stdin)
def ok(v):
    try:
        Version(v); return True
    except InvalidVersion:
        return False
def cmp(a, b):
    a, b = Version(a), Version(b)
    return (a > b) - (a < b)
print(json.dumps({"ok": [ok(v) for v in d["versions"]], "cmp": [cmp(a, b) for a, b in d["pairs"]],
                  "str": [str(Version(v)) if ok(v) else None for v in d["versions"]]}))
"""
    cp = subprocess.run([PY, "-c", script], input=json.dumps({"versions": versions, "pairs": pairs}),
                        capture_output=True, text=True, timeout=60, check=True)
    return json.loads(cp.stdout)


def assert_nothing_written(etc):
    assert os.listdir(etc) == [], os.listdir(etc)


# -- good ------------------------------------------------------------------

def test_records_the_version(tools, tmp_path, root, compare_versions):
    envd = stand_in(tmp_path, "echo 0.8.0")
    out = root / "envd-version"
    cp = record(tools, envd, out)
    assert cp.returncode == 0, cp.stderr
    assert out.read_bytes() == b"0.8.0\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert os.listdir(root) == ["envd-version"]
    # Both SDKs trim, then parse: both must accept it, and agree it is 0.8.0.
    text = out.read_text().strip()
    assert python_check([text])["str"] == ["0.8.0"]
    node = node_check(compare_versions, [text], [[text, "0.8.0"], [text, "0.7.9"], [text, "0.8.1"]])
    assert node == {"ok": [True], "cmp": [0, 1, -1]}
    cp = tools.run("envd-version", "--check", out)
    assert cp.returncode == 0 and cp.stdout == "0.8.0\n"


def test_trims_surrounding_whitespace(tools, tmp_path, root):
    envd = stand_in(tmp_path, "printf '  \\t0.6.13 \\r\\n\\n'")
    out = root / "envd-version"
    cp = record(tools, envd, out, "0.6.13")
    assert cp.returncode == 0, cp.stderr
    assert out.read_bytes() == b"0.6.13\n"


def test_replaces_an_old_record(tools, tmp_path, root):
    out = root / "envd-version"
    out.write_text("0.7.0\n")
    cp = record(tools, stand_in(tmp_path, "echo 0.8.0"), out)
    assert cp.returncode == 0 and out.read_text() == "0.8.0\n" and os.listdir(root) == ["envd-version"]


def test_passes_only_minus_version(tools, tmp_path, root):
    envd = stand_in(tmp_path, '[ "$#" = 1 ] && [ "$1" = -version ] && exec echo 0.8.0; echo "args: $*"')
    assert record(tools, envd, root / "envd-version").returncode == 0


# -- bad input: an error and no file ---------------------------------------

BAD_SCRIPTS = {
    "prints-nothing": ("exit 0", "printed nothing"),
    "prints-blank": ("echo '   '", "printed nothing"),
    "junk-after": ("echo 'v0.8.0 junk'", "not MAJOR.MINOR.PATCH"),
    "leading-v": ("echo v0.8.0", "not MAJOR.MINOR.PATCH"),
    "two-lines": ("echo 0.8.0; echo 0.8.0", "more than one line"),
    "prerelease": ("echo 0.8.0-rc.1", "not MAJOR.MINOR.PATCH"),
    "leading-zero": ("echo 0.08.0", "not MAJOR.MINOR.PATCH"),
    "mismatch": ("echo 0.7.0", 'reports "0.7.0" but the lock pins 0.8.0'),
    "crashes": ("echo 0.8.0; kill -SEGV $$", "killed by signal 11"),
    "exits-non-zero": ("echo 0.8.0; exit 3", "exited with status 3"),
    "floods": ("yes 0.8.0 | head -c 100000", "more than 4096 bytes"),
    "binary-junk": ("printf '0.8.0\\000'", "not MAJOR.MINOR.PATCH"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCRIPTS))
def test_bad_envd_output(tools, tmp_path, root, case):
    body, needle = BAD_SCRIPTS[case]
    cp = record(tools, stand_in(tmp_path, body), root / "envd-version")
    assert cp.returncode == 1, cp.stderr
    assert needle in cp.stderr, cp.stderr
    assert_nothing_written(root)


def test_bad_output_leaves_an_old_record_untouched(tools, tmp_path, root):
    out = root / "envd-version"
    out.write_text("0.7.0\n")
    cp = record(tools, stand_in(tmp_path, "echo 0.9.0"), out)
    assert cp.returncode == 1 and out.read_text() == "0.7.0\n" and os.listdir(root) == ["envd-version"]


def test_missing_binary(tools, tmp_path, root):
    cp = record(tools, tmp_path / "bin" / "envd", root / "envd-version")
    assert cp.returncode == 1 and "no such file" in cp.stderr
    assert_nothing_written(root)


def test_not_executable(tools, tmp_path, root):
    envd = stand_in(tmp_path, "echo 0.8.0", mode=0o644)
    cp = record(tools, envd, root / "envd-version")
    if os.geteuid() == 0 and os.access(envd, os.X_OK):
        pytest.skip("root can execute anything here")
    assert cp.returncode == 1 and "not executable" in cp.stderr, cp.stderr
    assert_nothing_written(root)


def test_a_directory_is_not_a_binary(tools, tmp_path, root):
    cp = record(tools, tmp_path, root / "envd-version")
    assert cp.returncode == 1 and "not a regular file" in cp.stderr
    assert_nothing_written(root)


def test_not_an_executable_format(tools, tmp_path, root):
    p = tmp_path / "envd"
    p.write_bytes(b"\x7fELF garbage")
    p.chmod(0o755)
    cp = record(tools, p, root / "envd-version")
    assert cp.returncode == 1 and "cannot execute it: Exec format error" in cp.stderr, cp.stderr
    assert_nothing_written(root)


def test_hang_is_killed_with_its_process_group(tools, tmp_path, root):
    marker = f"{uuid.uuid4().int % 100000 + 1000}.{os.getpid()}"  # a unique sleep argument
    envd = stand_in(tmp_path, f"sleep {marker} &\nexec sleep {marker}")
    # A hang that is not killed fails through record()'s subprocess timeout.
    cp = record(tools, envd, root / "envd-version", "0.8.0", "--timeout", "1")
    assert cp.returncode == 1 and "no answer within 1000 ms" in cp.stderr, cp.stderr
    assert_nothing_written(root)
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert left == [], f"still running: {left}"


def test_prints_then_hangs(tools, tmp_path, root):
    envd = stand_in(tmp_path, "echo 0.8.0; exec sleep 600")
    cp = record(tools, envd, root / "envd-version", "0.8.0", "--timeout", "0.5")
    assert cp.returncode == 1 and "no answer" in cp.stderr
    assert_nothing_written(root)


@pytest.mark.parametrize("dest", ["missing-dir/envd-version", "is-a-dir", "file/envd-version"])
def test_unwritable_destination(tools, tmp_path, root, dest):
    (root / "is-a-dir").mkdir()
    (root / "file").write_text("x")
    before = sorted(os.listdir(root))
    cp = record(tools, stand_in(tmp_path, "echo 0.8.0"), root / dest)
    assert cp.returncode == 1, cp.stderr
    assert str(root / dest) in cp.stderr, cp.stderr
    assert sorted(os.listdir(root)) == before and os.listdir(root / "is-a-dir") == []


def test_read_only_file_system(tools, tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a read-only bind mount")
    etc = tmp_path / "ro"
    etc.mkdir()
    envd = stand_in(tmp_path, "echo 0.8.0")
    cp = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                         'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"', "sh",
                         str(etc), tools.path("envd-version"), "--envd", str(envd), "--expect", "0.8.0",
                         "--output", str(etc / "envd-version")], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1 and "Read-only file system" in cp.stderr, cp.stderr
    assert os.listdir(etc) == []


@pytest.mark.parametrize("args", [
    [], ["--envd", "x"], ["--envd", "x", "--expect", "0.8.0"], ["--envd", "x", "--expect", "v0.8.0", "--output", "o"],
    ["--envd", "x", "--expect", "0.8", "--output", "o"], ["--check", "f", "--envd", "x"], ["--bogus"],
    ["--envd", "x", "--expect", "0.8.0", "--output", "o", "--timeout", "0"], ["extra"],
])
def test_usage(tools, tmp_path, args):
    cp = tools.run("envd-version", *args, cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    assert os.listdir(tmp_path) == []


# -- --check ---------------------------------------------------------------

@pytest.mark.parametrize("content,good", [
    (b"0.8.0\n", True), (b"10.0.1\n", True), (b"0.8.0", False), (b"0.8.0\n\n", False), (b" 0.8.0\n", False),
    (b"v0.8.0\n", False), (b"0.8.0\r\n", False), (b"", False), (b"\n", False), (b"0.8.0 junk\n", False),
    (b"0.8.0\n0.8.0\n", False), (b"x" * 100, False),
])
def test_check(tools, tmp_path, content, good):
    f = tmp_path / "envd-version"
    f.write_bytes(content)
    cp = tools.run("envd-version", "--check", f)
    assert (cp.returncode == 0) == good, cp.stderr
    if not good:
        assert cp.returncode == 1 and cp.stdout == ""


def test_check_missing_file(tools, tmp_path):
    cp = tools.run("envd-version", "--check", tmp_path / "nope")
    assert cp.returncode == 1 and "No such file" in cp.stderr


# -- the grammar against both real parsers ---------------------------------

CANDIDATES = [
    "0.0.0", "0.8.0", "0.6.13", "1.2.3", "10.20.30", "999999999.999999999.999999999", "0.1.0", "0.2.4",
    "v0.8.0", "0.8", "1", "0.8.0.1", "0.8.0-rc.1", "0.8.0-beta", "0.8.0+build.5", "0.8.0rc1", "0.8.0.post1",
    "1!0.8.0", "00.8.0", "0.08.0", "0.8.00", "1000000000.0.0", "0.8.x", "0.8.*", "", " 0.8.0", "0.8.0 ",
    "0.8.0\n", "v0.8.0 junk", "0.8.0-", "0.8.0-rc..1", "0.8.0-dev.1", "=0.8.0", "^0.8.0", "~0.8.0",
]


def test_grammar_is_inside_both_parsers(tools, tmp_path, compare_versions):
    """Everything envd-version accepts, both SDK parsers accept unchanged and
    order the same way; the test table spans what either parser accepts."""
    ours = []
    for i, v in enumerate(CANDIDATES):
        f = tmp_path / f"v{i}"
        f.write_bytes(v.encode() + b"\n")
        ours.append(tools.run("envd-version", "--check", f).returncode == 0)
    accepted = [v for v, ok in zip(CANDIDATES, ours) if ok]
    assert set(accepted) == {"0.0.0", "0.8.0", "0.6.13", "1.2.3", "10.20.30", "999999999.999999999.999999999",
                             "0.1.0", "0.2.4"}
    pairs = [[a, b] for a in accepted for b in accepted]
    py = python_check(CANDIDATES, pairs)
    node = node_check(compare_versions, CANDIDATES, pairs)
    for v, mine, p, n, s in zip(CANDIDATES, ours, py["ok"], node["ok"], py["str"]):
        if mine:
            assert p and n, f"{v!r}: python {p}, node {n}"
            assert s == v, f"packaging normalises {v!r} to {s!r}"
    assert py["cmp"] == node["cmp"], "the two parsers order accepted versions differently"
    # And the table is not trivially narrow: each parser accepts things we refuse.
    assert any(p and not m for p, m in zip(py["ok"], ours)) and any(n and not m for n, m in zip(node["ok"], ours))


def test_npm_left_nothing_in_the_repository():
    assert not (ROOT / "package-lock.json").exists() and not (ROOT / "node_modules").exists()
