"""A real e2b-ci build (mkosi, packing): its pack stage is deterministic
(os-image/pack.py again over the built tree gives the same digests); then the
tree is checked and the code-interpreter stack is started from it. The full
two-build check, `make repro flavor=e2b-ci`, is a gate of the image workflow
(ci/image.yml): with upstream's whole Python stack it costs more than
`make test` can afford on a 2-core machine.

The code-interpreter comes from the shipped recipes/code-interpreter.lock,
its archive served as a pin_mirror=file:// tree mirror, when a git archive of
the pinned commit is in ../shared/upstream/; otherwise from the stand-in
tests/fixtures/code-interpreter with a test lock (pytest's summary says
which). envd is the real one, built from its pinned source
(tests/testimages.py); package caches are the repository's (out/cache),
shared with tests/image.
"""
import configparser
import json
import os

import pytest

import testimages
from ci_helpers import ROOT, e2b_ci_build, make_wheel, run

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build


@pytest.fixture(scope="module")
def built():
    """The session's e2b-ci build, shared with tests/boot (tests/testimages.py)."""
    return e2b_ci_build()


@pytest.fixture(scope="module")
def tree(built):
    return built.tree


def test_pack_again_gives_the_same_digests(built, tmp_path):
    m = built.manifest
    out = tmp_path / "again"
    # Without the apt lists the archive's InRelease is unknown, so the base
    # the build recorded goes in the meta file, which takes precedence.
    meta = json.loads((built.dir / "work/meta.json").read_text())
    meta["base_name"] = m["labels"]["org.opencontainers.image.base.name"]
    meta["base_digest"] = m["labels"]["org.opencontainers.image.base.digest"]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    cp = run(["/usr/bin/python3", ROOT / "os-image/pack.py", "--tree", built.tree, "--out", out,
              "--flavor", "e2b-ci", "--distro", m["distro"], "--release", m["release"],
              "--epoch", m["source_date_epoch"], "--archives", built.dir / "work/archives.json",
              "--artifacts", built.dir / "work/artifacts.jsonl", "--apt-lists", tmp_path / "no-lists",
              "--meta", tmp_path / "meta.json"],
             timeout=3600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stderr[-4000:]
    again = json.loads((out / "manifest.json").read_text())
    assert again["outputs"] == m["outputs"]
    assert again["packages"] == m["packages"]


def test_labels_read_back_with_skopeo(built):
    labels = testimages.check_labels(built, "e2b-ci", "e2b-ci", "10000,10052,10053,49983,49999")
    assert labels["org.e2b-images.ready"] == "url http://127.0.0.1:49999/health"


def unit(tree, name):
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    text = (tree / "usr/lib/systemd/system" / name).read_text()
    p.read_string(text)
    return p


def test_units_present_enabled_and_ordered(tree):
    for name in ("jupyter.service", "code-interpreter.service"):
        shipped = tree / "usr/lib/systemd/system" / name
        assert shipped.read_text() == (ROOT / "units" / name).read_text()
        wants = tree / "etc/systemd/system/multi-user.target.wants" / name
        assert wants.is_symlink(), f"{name} is not enabled"
        assert os.readlink(wants).endswith(f"/systemd/system/{name}")
        u = unit(tree, name)
        assert "envd-guard.service" in u["Unit"]["Requires"].split()
        assert "envd-guard.service" in u["Unit"]["After"].split()
    ci = unit(tree, "code-interpreter.service")
    assert "jupyter.service" in ci["Unit"]["Requires"].split()
    assert "jupyter.service" in ci["Unit"]["After"].split()
    assert ci["Unit"]["PartOf"] == "jupyter.service"
    # The guard the units require is there, and enabled.
    assert (tree / "usr/lib/systemd/system/envd-guard.service").is_file()
    # (links point at /lib/..., dangling from the host: test the link itself)
    assert any((d / "envd-guard.service").is_symlink()
               for d in (tree / "etc/systemd/system").glob("*.wants"))


def test_code_interpreter_laid_out_patched_and_licensed(tree):
    prefix = tree / "usr/lib/e2b-code-interpreter"
    assert "/api/kernelspecs" in (prefix / "server/main.py").read_text()
    assert (prefix / "python/e2b_charts/__init__.py").is_file()
    assert not (prefix / "source").exists(), "the unpatched source must not ship"
    # Bytecode, hash-based and unchecked: no source mtimes inside.
    pyc = sorted((prefix / "server/__pycache__").glob("main.*.pyc"))
    assert pyc, "no bytecode for the server"
    flags = int.from_bytes(pyc[0].read_bytes()[4:8], "little")
    assert flags == 0b01, f"{pyc[0].name}: pyc flags {flags:#x}, expected unchecked-hash (0x1)"
    doc = tree / "usr/share/doc/e2b-code-interpreter"
    assert (doc / "LICENSE").is_file() and (doc / "PATCHES").is_file()
    cfg = (tree / "etc/jupyter/jupyter_server_config.py").read_text()
    assert 'c.ServerApp.ip = "127.0.0.1"' in cfg
    # Python's kernelspec alone on the venv's Jupyter path (pydeps=pip; debian:
    # Debian's); the other kernels' are in /usr/local/share (test_ci_kernels.py).
    venv = tree / "usr/lib/e2b-code-interpreter/venv"
    specs = venv / "share/jupyter/kernels" if venv.is_dir() else tree / "usr/share/jupyter/kernels"
    kernels = sorted(p.name for p in specs.iterdir())
    assert kernels == ["python3"]
    if venv.is_dir():
        spec = json.loads((specs / "python3/kernel.json").read_text())
        assert spec["argv"][0] == "/usr/lib/e2b-code-interpreter/venv/bin/python"


def image_python(tree):
    """The image's own Python for the code-interpreter stack: pydeps=pip's
    venv, or Debian's (pydeps=debian)."""
    venv = "/usr/lib/e2b-code-interpreter/venv/bin/python"
    return venv if (tree / venv.lstrip("/")).exists() else "/usr/bin/python3"


def test_matplotlib_defaults_to_the_cjk_fallback_without_warnings(tree):
    """The CJK fallback is matplotlib's default for `user` in the image's own
    Python (pydeps=pip: the venv's defaults file; debian: /etc/matplotlibrc),
    and importing matplotlib prints nothing (a line added to the pip defaults
    file would be warned about on every import)."""
    python = image_python(tree)
    cp = run(["chroot", "--userspec=1000:1000", tree, "/usr/bin/env", "-i", "HOME=/tmp", python, "-c",
              "import matplotlib; print(matplotlib.rcParams['font.family'])"])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == "['sans-serif', 'WenQuanYi Micro Hei']"
    assert cp.stderr == ""


KERNELSPECS_CHECK = r"""
import json, sys
from e2b_kernelspecs import KernelSpecManager
m = KernelSpecManager()
specs = m.find_kernel_specs()
argv = m.get_kernel_spec("python3").argv
mine = "IPython" in sys.modules
from jupyter_client.kernelspec import KernelSpecManager as Plain
Plain().find_kernel_specs()
print(json.dumps({"specs": specs, "argv": argv, "ipython_with_ours": mine,
                  "ipython_with_jupyters": "IPython" in sys.modules}))
"""


def test_jupyter_finds_kernels_without_importing_ipython(tree):
    """Patch 0005's kernel spec manager, in the image's own Python as `user`:
    it finds the image's kernels and a kernelspec the user installed in
    ~/.local/share/jupyter/kernels, and leaves IPython unimported, where
    jupyter_client's own manager imports it (about 8 s of a TCG boot, which
    the patch saves)."""
    python = image_python(tree)
    assert 'c.ServerApp.kernel_spec_manager_class = "e2b_kernelspecs.KernelSpecManager"' in \
        (tree / "etc/jupyter/jupyter_server_config.py").read_text()
    # The user's kernelspec lives on a tmpfs over the tree's /tmp (its HOME
    # here): nothing is written into the built tree.
    script = (f'mount -t tmpfs tmpfs "$1/tmp" && mkdir -p "$1/tmp/.local/share/jupyter/kernels/mine" && '
              f'echo \'{{"argv": ["/bin/true", "{{connection_file}}"], "display_name": "mine", "language": "x"}}\' '
              f'> "$1/tmp/.local/share/jupyter/kernels/mine/kernel.json" && chmod -R a+rX "$1/tmp/.local" && '
              f'exec chroot --userspec=1000:1000 "$1" /usr/bin/env -i HOME=/tmp '
              f'PYTHONPATH=/usr/lib/e2b-code-interpreter/python {python} -c "$2"')
    cp = run(["unshare", "--mount", "sh", "-c", script, "sh", tree, KERNELSPECS_CHECK])
    assert cp.returncode == 0, cp.stderr
    got = json.loads(cp.stdout)
    # The image's own kernels (upstream's names) and the user's.
    want = {testimages.CI_KERNELS[k] for k in testimages.ci_kernels(tree)}
    assert sorted(got["specs"]) == sorted(want | {"mine"}) and "python3" in want, got
    assert got["specs"]["mine"] == "/tmp/.local/share/jupyter/kernels/mine"
    assert got["argv"][0] == python and "ipykernel_launcher" in got["argv"], got
    assert got["ipython_with_ours"] is False
    assert got["ipython_with_jupyters"] is True, "jupyter_client no longer imports IPython: patch 0005 may go"


def test_venv_extension_modules_carry_no_debug_info(tree):
    """pydeps=pip: the postinst strips the DWARF some wheels ship (spacy,
    numba, gensim, Pillow: about 48 MiB of the compressed layer) from the
    wheels' own modules, and leaves auditwheel's bundled libraries (*.libs/,
    patchelf'd) alone; that the stripped modules still load is shown by
    test_ci_stack.py's imports and known answers in a kernel."""
    venv = tree / "usr/lib/e2b-code-interpreter/venv"
    if not venv.is_dir():
        pytest.skip("pydeps=debian build: no venv")
    modules = [p for p in venv.rglob("*.so*") if p.is_file() and ".libs" not in p.parent.name]
    assert len(modules) > 100, f"only {len(modules)} extension modules in {venv}"
    with_debug = []
    for so in modules:
        cp = run(["readelf", "-S", "--wide", so])
        assert cp.returncode == 0, f"readelf {so}: {cp.stderr}"
        if " .debug_info " in cp.stdout:
            with_debug.append(str(so.relative_to(tree)))
    assert with_debug == [], f"{len(with_debug)} modules keep .debug_info: {with_debug[:5]}"


def test_venv_bytecode_everywhere_but_the_test_suites(tree):
    """pydeps=pip: every module has its unchecked-hash .pyc (the venv is
    read-only for `user`, so a missing one is compiled on every import),
    except the packages' own test suites (tests/, test/), which stay source."""
    site = next((tree / "usr/lib/e2b-code-interpreter/venv/lib").glob("python3*/site-packages"), None)
    if site is None:
        pytest.skip("pydeps=debian build: no venv")
    for module in ("pandas/core/frame.py", "matplotlib/pyplot.py", "spacy/language.py"):
        py = site / module
        assert list((py.parent / "__pycache__").glob(py.stem + ".*.pyc")), f"no bytecode for {py}"
    suites = [d for d in site.rglob("tests") if d.is_dir()]
    assert len(suites) > 50, f"only {len(suites)} tests/ directories under {site}"
    compiled = [str(p.relative_to(site)) for d in suites for p in d.rglob("*.pyc")]
    assert compiled == [], f"{len(compiled)} .pyc in test suites: {compiled[:5]}"


def test_manifest_lists_the_archive_pin(built):
    m = built.manifest
    text = json.dumps(m)
    assert testimages.sources().ci_commit in text
    if "python_packages" in m:  # pydeps=pip: the venv's, at upstream's versions
        venv = {p["name"].lower().replace("_", "-"): p["version"] for p in m["python_packages"]}
        assert {n: venv.get(n) for n in ("jupyter-server", "ipykernel", "fastapi", "uvicorn")} == \
            {"jupyter-server": "2.20.0", "ipykernel": "6.31.0", "fastapi": "0.111.0", "uvicorn": "0.30.1"}
    else:
        for name in ("python3-jupyter-server", "python3-ipykernel", "python3-fastapi", "python3-uvicorn"):
            assert name in text


def test_stack_from_the_built_tree_serves_health_on_loopback_only(tree):
    """Jupyter and the API server started from the image tree (chroot as uid
    1000, private network namespace): /health is "OK" on 127.0.0.1:49999, the
    default python context exists, and the javascript one where the image
    has its kernel (as upstream's server opens both), and nothing listens
    on a non-loopback address but the tree's real envd (0.0.0.0:49983: it
    has no bind option; in the guest the guard drops it off-guest)."""
    script = ROOT / "tests/image_ci/run_stack.sh"
    cp = run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", script, tree], timeout=300)
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    out = cp.stdout
    assert 'HEALTH "OK"' in out
    contexts = json.loads(out.split("CONTEXTS ", 1)[1].splitlines()[0])
    defaults = ["python", "javascript"] if "javascript" in testimages.ci_kernels(tree) else ["python"]
    assert [c["language"] for c in contexts] == defaults
    listeners = [l.split() for l in out.split("LISTEN-BEGIN\n", 1)[1].split("LISTEN-END")[0].splitlines() if l.strip()]
    local = {l[3] for l in listeners}
    assert "127.0.0.1:8888" in local and "127.0.0.1:49999" in local
    envd = {"*:49983", "0.0.0.0:49983", "[::]:49983"}
    assert local & envd, f"the tree's envd is not listening: {sorted(local)}"
    for addr in local - envd:
        assert addr.startswith("127.") or addr.startswith("[::1]"), f"non-loopback listener {addr}"


@pytest.mark.parametrize("good_hash", [True, False], ids=["hash-ok", "hash-mismatch"])
def test_pydeps_pip_postinst_installs_offline_with_hashes(tree, tmp_path, good_hash):
    """The real mkosi.postinst, pip branch, run over the built tree (through
    an overlay; `mkosi-chroot` is plain chroot): a venv with the wheels that
    prepare.sh would have downloaded, --require-hashes, unchecked-hash
    bytecode, the units pointed at the venv. PyPI is unreachable here, so the
    wheel is one we build; a wrong hash must fail the install."""
    staged = tmp_path / "stage"
    (staged / "wheels").mkdir(parents=True)
    (staged / "constraints").mkdir()
    _, digest = make_wheel(staged / "wheels")
    if not good_hash:
        digest = digest[::-1]
    (staged / "constraints/probe.txt").write_text(f"e2b-ci-probe==1.0 \\\n    --hash=sha256:{digest}\n")
    assert run(["/usr/bin/python3", ROOT / "os-image/e2b-ci/check-constraints.py",
                staged / "constraints/probe.txt"]).returncode == 0
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mkosi-chroot").write_text('#!/bin/sh\nexec chroot "$BUILDROOT" "$@"\n')
    (bindir / "mkosi-chroot").chmod(0o755)
    inner = tmp_path / "inner.sh"
    inner.write_text(f"""#!/bin/sh
set -e
m={tmp_path}/merged
mkdir -p $m {tmp_path}/up {tmp_path}/wk
mount -t overlay overlay -o lowerdir={tree},upperdir={tmp_path}/up,workdir={tmp_path}/wk $m
mount -t proc proc $m/proc
mount --bind /dev $m/dev
cp -a {staged} $m/var/lib/e2b-ci-pydeps
export BUILDROOT=$m SRCDIR={ROOT} PATH={bindir}:/usr/sbin:/usr/bin:/sbin:/bin
set +e
sh {ROOT}/os-image/mkosi.profiles/e2b-ci/mkosi.postinst
rc=$?
test ! -e $m/var/lib/e2b-ci-pydeps || {{ echo "staged wheels left in the tree"; rc=1; }}
if [ $rc = 0 ]; then
  chroot $m /usr/lib/e2b-code-interpreter/venv/bin/python -c 'import e2b_ci_probe, fastapi, sys; print("IMPORT", e2b_ci_probe.OK, sys.prefix)'
  cat $m/usr/lib/systemd/system/jupyter.service.d/10-pydeps-pip.conf
  ls $m/usr/lib/e2b-code-interpreter/venv/lib/python3*/site-packages/e2b_ci_probe/__pycache__/
  head -c 8 $m/usr/lib/e2b-code-interpreter/venv/lib/python3*/site-packages/e2b_ci_probe/__pycache__/*.pyc | od -An -tx1
fi
exit $rc
""")
    cp = run(["unshare", "--mount", "sh", inner], timeout=600)
    if not good_hash:
        assert cp.returncode != 0
        assert "DO NOT MATCH THE HASHES" in cp.stdout + cp.stderr
        return
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "IMPORT e2b-ci probe /usr/lib/e2b-code-interpreter/venv" in cp.stdout
    assert "Environment=E2B_CI_PYTHON=/usr/lib/e2b-code-interpreter/venv/bin/python" in cp.stdout
    # pyc header: magic (4 bytes), then flags 01 00 00 00 = hash-based, unchecked.
    assert " 01 00 00 00" in cp.stdout.splitlines()[-1]


def test_units_verify_and_api_server_is_sandboxed(tree):
    """systemd-analyze (the host's) finds nothing wrong in our two units, and
    the API server (which runs no user code) scores as sandboxed. jupyter.service
    is deliberately not sandboxed: its kernels are the user's code."""
    cp = run(["systemd-analyze", "verify", f"--root={tree}", "jupyter.service", "code-interpreter.service"],
             env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
    ours = [l for l in (cp.stdout + cp.stderr).splitlines()
            if "jupyter.service" in l or "code-interpreter.service" in l]
    assert not ours, ours
    cp = run(["systemd-analyze", "security", f"--root={tree}", "--offline=true", "code-interpreter.service"])
    score = float(cp.stdout.strip().splitlines()[-1].split(":")[1].split()[0])
    assert score <= 2.5, cp.stdout[-2000:]
