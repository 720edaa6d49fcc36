"""The code-interpreter tree: fetched through pinfetch (unpacked and verified by its tree pin), patched
per os-image/e2b-ci/PATCHES, laid out for the image; a patch that no longer
applies stops the build and is named."""
import json
import os
import pathlib
import py_compile
import re
import shutil

import pytest

from ci_helpers import FIXTURE, FLAVOR_DIR, ROOT, prepare, run
from ci_helpers import fixture_archive, flavor_copy, served_archive  # noqa: F401 (fixtures)

PATCH_NAMES = [
    "0001-no-javascript-context-without-kernel.patch",
    "0002-jupyter-loopback-only.patch",
    "0003-ipython-startup-scripts-system-wide.patch",
    "0004-default-context-bounded-no-leaked-kernels.patch",
    "0005-jupyter-kernelspecs-without-ipython.patch",
    "0006-api-server-starts-beside-jupyter.patch",
    "0007-timeouts-named-when-invalid.patch",
    "0008-interrupted-run-leaves-context-usable.patch",
]


def listed_patches(patches_file):
    return [line.split()[0] for line in patches_file.read_text().splitlines()
            if line and not line[0].isspace() and not line.startswith("#")]


def test_patches_file_lists_every_patch_with_a_reason():
    assert listed_patches(FLAVOR_DIR / "PATCHES") == PATCH_NAMES
    assert sorted(p.name for p in (FLAVOR_DIR / "patches").glob("*.patch")) == PATCH_NAMES


# Upstream's tree at the pinned commit, beside the repository (CI and every
# development machine; the same place tests/testimages.py looks).
UPSTREAM_DIR = pathlib.Path(os.environ.get("E2B_UPSTREAM_DIR", ROOT.parent / "shared" / "upstream"))


def upstream_archive():
    lock = (ROOT / "recipes/code-interpreter.lock").read_text()
    commit = re.search(r"^version\s*=\s*(\S+)", lock, re.M).group(1)
    return UPSTREAM_DIR / f"code-interpreter-{commit}.tar.gz"


def test_patches_apply_to_upstreams_real_tree(tmp_path):
    """Every patch of PATCHES, in order, with --fuzz=0, on e2b-dev/code-interpreter
    at the commit recipes/code-interpreter.lock pins; the result compiles."""
    archive = upstream_archive()
    if not archive.is_file():
        pytest.skip(f"{archive}: absent (a clone without ../shared/upstream); "
                    "PATCHES are then checked against the fixture only")
    assert run(["tar", "-xzf", archive, "-C", tmp_path, "--no-same-owner"]).returncode == 0
    (src,) = tmp_path.iterdir()
    cp = run([FLAVOR_DIR / "apply-patches.sh", src])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [f"e2b-ci: applied {n}" for n in PATCH_NAMES]
    server = src / "template/server"
    for py in server.rglob("*.py"):
        py_compile.compile(str(py), cfile=str(tmp_path / "pyc" / py.name), doraise=True)
    main = (server / "main.py").read_text()
    # 0004: both default contexts through the bounded, self-cleaning path;
    # the kernel's websocket under the same time-out.
    assert main.count("await e2b_startup.default_context(") == 2
    assert 'await e2b_startup.remove_sessions(client, "left by an earlier start")' in main
    assert "open_timeout=KERNEL_START_TIMEOUT" in (server / "messaging.py").read_text()
    # 0006: the server waits for Jupyter itself, first thing in its lifespan.
    assert re.search(r"    try:\n(\s+#.*\n)*\s+await e2b_startup\.wait_for_jupyter\(client\)\n"
                     r"\s+await e2b_startup\.remove_sessions\(", main)
    startup = (server / "e2b_startup.py").read_text()
    assert "E2B_CI_JUPYTER_START_TIMEOUT" in startup
    # 0007: both time-outs through the one checked reader, none bare.
    assert 'KERNEL_START_TIMEOUT = seconds_from_env("E2B_CI_KERNEL_START_TIMEOUT", 240)' in startup
    assert 'JUPYTER_START_TIMEOUT = seconds_from_env("E2B_CI_JUPYTER_START_TIMEOUT", 180)' in startup
    assert "float(os.environ" not in startup
    # 0008: a disconnected run holds its context until the kernel is done
    # with it, shielded from the cancellation; "aborted" ends a request.
    messaging = (server / "messaging.py").read_text()
    assert "await finish_uncancelled(settle_abandoned(self, message_id, execution))" in messaging
    assert "await asyncio.shield(self.interrupt())" not in messaging
    assert 'in ("abort", "aborted")' in messaging
    assert "anyio.CancelScope(shield=True)" in (server / "e2b_settle.py").read_text()
    assert not list(src.rglob("*.orig")) and not list(src.rglob("*.rej"))


def test_an_interrupt_that_raced_the_cells_end_is_spent_on_a_probe(tmp_path):
    """PATCHES 0008 (issue 49, finding 14): when the client goes away just
    as its cell ends, the interrupt reaches an idle kernel after the cell's
    idle status; settle_abandoned then frees the context only once the
    kernel has answered a probe, on which that late interrupt lands, not on
    the next request. A cell the interrupt reaches while it runs frees the
    context at its idle status, with no probe; a cell that had ended is not
    interrupted. settle_race_cases.py scripts the kernel and context around
    the patched e2b_settle of upstream's real tree."""
    archive = upstream_archive()
    if not archive.is_file():
        pytest.skip(f"{archive}: absent (a clone without ../shared/upstream)")
    assert run(["tar", "-xzf", archive, "-C", tmp_path, "--no-same-owner"]).returncode == 0
    (src,) = tmp_path.iterdir()
    assert run([FLAVOR_DIR / "apply-patches.sh", src]).returncode == 0
    cp = run(["/usr/bin/python3", pathlib.Path(__file__).parent / "settle_race_cases.py", src / "template/server"],
             timeout=60)
    assert cp.returncode == 0, cp.stderr[-3000:]
    got = json.loads(cp.stdout.partition("SETTLE-RACE ")[2])
    assert got == {
        "busy": {"order": ["interrupt reaches the busy cell", "cell idle", "lock released"], "probes_left": 0},
        "raced": {"order": ["cell idle", "interrupt reaches the idle kernel", "probe sent",
                            "probe answered (the late interrupt landed on it)", "lock released"], "probes_left": 0},
        "ended": {"order": ["cell idle", "lock released"], "probes_left": 0},
    }


def test_fixture_says_it_is_a_stand_in():
    assert "not E2B's code" in (FIXTURE / "README.md").read_text()
    assert "Stand-in" in (FIXTURE / "template/server/main.py").read_text()


def test_archive_through_pinfetch_then_prepare(tools, served_archive, tmp_path):
    url, digest, tree = served_archive
    extra, work = tmp_path / "extra", tmp_path / "work"
    dest = extra / "usr/lib/e2b-code-interpreter/source"
    dest.parent.mkdir(parents=True)
    cp = tools.run("pinfetch", "--url", url, "--tree-sha256", tree, "--name", "code-interpreter",
                   "--output", dest, "--cache", tmp_path / "cache")
    assert cp.returncode == 0, cp.stderr
    assert (dest / "template/server/main.py").is_file()
    # The same URL with another tree pin is refused: the pin is what is trusted.
    bad = tools.run("pinfetch", "--url", url, "--tree-sha256", "sha256-" + "A" * 43 + "=",
                    "--name", "code-interpreter", "--output", tmp_path / "bad", "--no-cache")
    assert bad.returncode == 1 and "code-interpreter" in bad.stderr and "tree_sha256 mismatch" in bad.stderr
    assert not (tmp_path / "bad").exists()

    cp = run([FLAVOR_DIR / "prepare.sh", "--extra", extra, "--work", work])
    assert cp.returncode == 0, cp.stderr
    for name in PATCH_NAMES:
        assert f"applied {name}" in cp.stdout
    assert not dest.exists(), "the unpatched source itself must not ship"

    prefix = extra / "usr/lib/e2b-code-interpreter"
    main = (prefix / "server/main.py").read_text()
    assert '/api/kernelspecs' in main
    assert re.search(r'if "javascript" in kernelspecs.*:\n\s+javascript_context = await e2b_startup.default_context\(\n'
                     r'\s+create_context\(client, websockets, "javascript"', main)
    assert (prefix / "server/e2b_startup.py").is_file()
    assert (prefix / "server/consts.py").is_file()
    assert (prefix / "python/e2b_charts/__init__.py").is_file()
    assert (prefix / "python/e2b_kernelspecs.py").read_text() == (FLAVOR_DIR / "python/e2b_kernelspecs.py").read_text()
    # The API server waits for Jupyter itself (0006): no shell wait ships.
    assert not (prefix / "wait-for-jupyter").exists()
    assert "await e2b_startup.wait_for_jupyter(client)" in main
    assert sorted(p.name for p in (prefix / "startup").iterdir()) == ["0002_data.py", "0003_images.py"]
    doc = extra / "usr/share/doc/e2b-code-interpreter"
    assert (doc / "LICENSE").read_text() == (FIXTURE / "LICENSE").read_text()
    assert (doc / "LICENSE.e2b_charts").is_file()
    assert (doc / "PATCHES").read_text() == (FLAVOR_DIR / "PATCHES").read_text()
    kernel_cfg = (extra / "etc/ipython/ipython_kernel_config.py").read_text()
    assert "/usr/lib/e2b-code-interpreter/startup/0002_data.py" in kernel_cfg
    assert not list(extra.rglob("*.orig")) and not list(extra.rglob("*.rej"))


class Recorder:
    """Stands in for traitlets' config object: records `c.Section.key = v`."""

    def __init__(self):
        object.__setattr__(self, "values", {})

    def __getattr__(self, section):
        values = self.values

        class Section:
            def __setattr__(self, key, value):
                values[f"{section}.{key}"] = value

        return Section()


def load_config(path):
    c = Recorder()
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: c})
    return c.values


def test_jupyter_config_binds_loopback(fixture_archive, tmp_path):
    archive, _ = fixture_archive
    cp = prepare(archive, tmp_path / "extra", tmp_path / "work")
    assert cp.returncode == 0, cp.stderr
    cfg = load_config(tmp_path / "extra/etc/jupyter/jupyter_server_config.py")
    assert cfg["ServerApp.ip"] == "127.0.0.1"
    assert cfg["ServerApp.port"] == 8888
    assert cfg["ServerApp.port_retries"] == 0
    assert cfg["IdentityProvider.token"] == ""
    assert cfg["ServerApp.open_browser"] is False
    # 0005: our kernel spec manager, laid out on jupyter.service's PYTHONPATH.
    assert cfg["ServerApp.kernel_spec_manager_class"] == "e2b_kernelspecs.KernelSpecManager"
    assert (tmp_path / "extra/usr/lib/e2b-code-interpreter/python/e2b_kernelspecs.py").is_file()
    # Upstream's settings are kept (the patch only adds).
    assert cfg["ServerApp.root_dir"] == "/home/user"
    assert cfg["ServerApp.disable_check_xsrf"] is True


def break_patch(flavor_dir, name):
    p = flavor_dir / "patches" / name
    text = p.read_text()
    # Change one context line (a line starting with a space in a hunk).
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(" ") and line.strip():
            lines[i] = line.rstrip("\n") + "  # drifted upstream\n"
            break
    else:
        raise AssertionError("no context line")
    p.write_text("".join(lines))


@pytest.mark.parametrize("name", PATCH_NAMES)
def test_a_patch_that_no_longer_applies_fails_naming_it(name, flavor_copy, fixture_archive, tmp_path):
    break_patch(flavor_copy, name)
    archive, _ = fixture_archive
    extra = tmp_path / "extra"
    cp = prepare(archive, extra, tmp_path / "work", flavor_dir=flavor_copy)
    assert cp.returncode == 1
    assert f"patch {name} no longer applies" in cp.stderr
    assert "fuzz 0" in cp.stderr
    # Nothing was laid out for the image.
    assert not (extra / "usr/lib/e2b-code-interpreter/server").exists()


def test_fuzz_is_zero(flavor_copy, fixture_archive, tmp_path):
    """A hunk whose context matches only with fuzz (one of three lines off)
    is refused, although plain `patch` would accept it."""
    name = PATCH_NAMES[1]
    break_patch(flavor_copy, name)
    archive, _ = fixture_archive
    src = tmp_path / "src"
    src.mkdir()
    run(["tar", "-xzf", archive, "-C", src, "--strip-components=1"]).check_returncode()
    lenient = run(["patch", "-p1", "--dry-run", "--batch", "-d", src], input=(flavor_copy / "patches" / name).read_text())
    assert lenient.returncode == 0 and "fuzz" in lenient.stdout
    strict = run([flavor_copy / "apply-patches.sh", src, flavor_copy / "PATCHES"])
    assert strict.returncode == 1 and name in strict.stderr


def test_an_already_applied_patch_fails(fixture_archive, tmp_path):
    archive, _ = fixture_archive
    src = tmp_path / "src"
    src.mkdir()
    run(["tar", "-xzf", archive, "-C", src, "--strip-components=1"]).check_returncode()
    assert run([FLAVOR_DIR / "apply-patches.sh", src]).returncode == 0
    again = run([FLAVOR_DIR / "apply-patches.sh", src])
    assert again.returncode == 1 and f"patch {PATCH_NAMES[0]} no longer applies" in again.stderr


@pytest.mark.parametrize("edit,message", [
    (lambda t: re.sub(r"(?m)(^0001-.*\n)((?:    .*\n)+)",
                      lambda m: m[1] + m[2].replace("    ", "#   "), t, count=1),
     "0001-no-javascript-context-without-kernel.patch: no reason given"),
    (lambda t: t + "\n0001-no-javascript-context-without-kernel.patch\n    again\n", "listed twice"),
    (lambda t: t + "\n0009-missing.patch\n    a reason\n", "0009-missing.patch: no such file"),
    (lambda t: t.replace("0003-ipython-startup-scripts-system-wide.patch", "0003-ipython-startup-scripts-system-wide.patch reason on the same line"),
     "the reason goes on the indented lines"),
])
def test_patches_format_errors(edit, message, flavor_copy, tmp_path):
    patches = flavor_copy / "PATCHES"
    patches.write_text(edit(patches.read_text()))
    cp = run([flavor_copy / "apply-patches.sh", tmp_path])
    assert cp.returncode == 2, cp.stderr
    assert message in cp.stderr


def test_an_unlisted_patch_file_is_refused(flavor_copy, tmp_path):
    shutil.copy(flavor_copy / "patches" / PATCH_NAMES[0], flavor_copy / "patches" / "0099-stray.patch")
    cp = run([flavor_copy / "apply-patches.sh", tmp_path])
    assert cp.returncode == 2 and "0099-stray.patch: not listed" in cp.stderr


def test_archive_with_another_layout_is_refused(tmp_path):
    bad = tmp_path / "bad"
    (bad / "top/template").mkdir(parents=True)
    (bad / "top/template/README.md").write_text("not the code interpreter\n")
    archive = tmp_path / "bad.tar.gz"
    run(["tar", "-czf", archive, "-C", bad, "top"]).check_returncode()
    cp = prepare(archive, tmp_path / "extra", tmp_path / "work")
    assert cp.returncode == 1
    assert "the source has no LICENSE" in cp.stderr
