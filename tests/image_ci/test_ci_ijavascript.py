"""e2b-ci's javascript kernel, staged on the build host by
os-image/e2b-ci/ijavascript-stage.sh: the real ijavascript, nel and
ijavascript-babel archives (../shared/upstream) through a file:// pin mirror,
the real npm registry (the machine's npm configuration) from
recipes/ijavascript/package-lock.json; and os-image/e2b-ci/ijavascript-lock.py,
which generates and checks that lock."""
import hashlib
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tarfile

import pytest

import testimages

from ci_helpers import FLAVOR_DIR, ROOT, run

STAGE = FLAVOR_DIR / "ijavascript-stage.sh"
LOCKPY = FLAVOR_DIR / "ijavascript-lock.py"
PINS = ROOT / "recipes" / "ijavascript.lock"
TREES = ("ijavascript", "nel", "ijavascript-babel")
DEST = "usr/lib/e2b-code-interpreter/ijavascript"
SPEC = "usr/local/share/jupyter/kernels/javascript"
DOC = "usr/share/doc/e2b-code-interpreter/ijavascript.json"
KERNEL_JSON = {
    "argv": ["/usr/bin/node", "/usr/lib/e2b-code-interpreter/ijavascript/lib/kernel.js",
             "--hide-undefined", "{connection_file}", "--protocol=5.1"],
    "display_name": "JavaScript (Node.js)", "language": "javascript",
}


@pytest.fixture(scope="module")
def archives():
    found = testimages.ijavascript_archives()
    missing = [n for n in TREES if n not in found]
    if missing:
        pytest.skip(f"no archive of {', '.join(missing)} in {testimages.UPSTREAM_DIR} (GitHub is unreachable here)")
    return found


@pytest.fixture(scope="module")
def mirror(tmp_path_factory, archives):
    """A file:// pin mirror holding the three archives under their tree pins."""
    m = tmp_path_factory.mktemp("ijs-mirror")
    testimages.fill_pin_mirror(m)
    return m


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One build cache for the module: filled by the first stage, read offline later."""
    return tmp_path_factory.mktemp("ijs-cache")


def stage(tmp, cache, mirror=None, offline=False, recipes=ROOT / "recipes", extra=None):
    extra = extra or tmp / "extra"
    env = dict(os.environ, EXTRA=str(extra), WORK=str(tmp / "work"), TOOLS=str(ROOT / "build"),
               RECIPES=str(recipes), CACHE=str(cache),
               PIN_MIRROR=f"file://{mirror}" if mirror else "", OFFLINE="1" if offline else "0")
    return run([STAGE], env=env), extra


def tree_digest(root):
    """{relative path: (mode, sha256 or link target)} of every entry under ROOT."""
    out = {}
    for p in sorted(pathlib.Path(root).rglob("*")):
        rel = str(p.relative_to(root))
        st = p.lstat()
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = (oct(st.st_mode & 0o7777), hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[rel] = (oct(st.st_mode & 0o7777), None)
    return out


@pytest.fixture(scope="module")
def staged(tmp_path_factory, mirror, cache):
    tmp = tmp_path_factory.mktemp("ijs-online")
    cp, extra = stage(tmp, cache, mirror=mirror)
    assert cp.returncode == 0, cp.stderr
    return extra


def installed_packages(nm, root):
    """The package directories under node_modules NM (scopes and nested
    node_modules followed), relative to ROOT, as a lock's keys name them."""
    found = set()
    for d in nm.iterdir():
        for pkg in (d.iterdir() if d.name.startswith("@") else [d]):
            if (pkg / "package.json").is_file():
                found.add(str(pkg.relative_to(root)))
                if (pkg / "node_modules").is_dir():
                    found |= installed_packages(pkg / "node_modules", root)
    return found


def shipped_lock():
    return json.loads((ROOT / "recipes" / "ijavascript" / "package-lock.json").read_text())


def test_stage_lays_out_the_kernel(staged, archives):
    root = staged / DEST
    assert sorted(p.name for p in root.iterdir()) == ["LICENSE", "lib", "node_modules", "package.json"]
    assert (root / "lib" / "kernel.js").is_file()
    assert (root / "package.json").read_bytes() == (ROOT / "recipes/ijavascript/package.json").read_bytes()
    # Nothing else is staged: the extra tree has exactly the kernel, its spec and its record.
    tops = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()
                  and not str(p.relative_to(staged)).startswith(DEST + "/"))
    assert tops == [f"{SPEC}/kernel.json", f"{SPEC}/logo-32x32.png", f"{SPEC}/logo-64x64.png", DOC]

    # Every package of the lock, at its locked version; nothing beyond it.
    nm = root / "node_modules"
    lock = shipped_lock()
    paths = [p for p in lock["packages"] if p]
    assert len(paths) == 59
    for path in paths:
        pkg = json.loads((root / path / "package.json").read_text())
        assert pkg["version"] == lock["packages"][path]["version"], path
    assert installed_packages(nm, root) == set(paths)

    # The git dependencies are the pinned trees, as real directories.
    for key, tree in (("nel", "nel"), ("ijavascript-babel", "ijavascript-babel")):
        d = nm / key
        assert d.is_dir() and not d.is_symlink(), d
        with tarfile.open(archives[tree]) as tar:
            member = next(m for m in tar.getmembers() if m.name.split("/", 1)[-1] == "package.json")
            assert (d / "package.json").read_bytes() == tar.extractfile(member).read()
    assert not (root / "vendor").exists() and not (nm / ".bin").exists()

    # zeromq: its source and nan for the image's build of zmq.node; no prebuilt addons.
    zmq = nm / "zeromq"
    assert (zmq / "binding.gyp").is_file() and (zmq / "binding.cc").is_file()
    assert (zmq / "scripts" / "prepare.js").is_file() and (nm / "nan" / "nan.h").is_file()
    assert not list(staged.rglob("prebuilds")) and not (zmq / "windows").exists()
    assert not list(staged.rglob("*.node"))
    for p in staged.rglob("*"):
        mode = p.lstat().st_mode
        assert mode & 0o022 == 0 and mode & 0o444 == 0o444, p


def test_stage_writes_the_kernelspec_and_record(staged, archives):
    spec = staged / SPEC
    assert json.loads((spec / "kernel.json").read_text()) == KERNEL_JSON
    with tarfile.open(archives["ijavascript"]) as tar:
        for size in ("32x32", "64x64"):
            member = next(m for m in tar.getmembers() if m.name.endswith(f"images/nodejs/js-green-{size}.png"))
            assert (spec / f"logo-{size}.png").read_bytes() == tar.extractfile(member).read()
    rec = json.loads((staged / DOC).read_text())
    assert rec["npm_packages"] == 59
    lock_bytes = (ROOT / "recipes/ijavascript/package-lock.json").read_bytes()
    assert rec["npm_lock_sha256"] == hashlib.sha256(lock_bytes).hexdigest()
    for name in TREES:
        pin = testimages.lock_stanza(PINS, name)
        assert rec["trees"][name] == {"version": pin["version"], "tree_sha256": pin["tree_sha256"]}
    assert (staged / DOC).read_text() == json.dumps(rec, indent=1, sort_keys=True) + "\n"


def test_offline_restage_from_the_caches(staged, cache, tmp_path):
    """offline=1, no mirror: the same tree from the pinfetch and npm caches,
    also over a previous run in the same EXTRA."""
    shutil.copytree(staged, tmp_path / "extra", symlinks=True)
    (tmp_path / "extra" / DEST / "stale-file").write_text("from an older run\n")
    cp, extra = stage(tmp_path, cache, offline=True)
    assert cp.returncode == 0, cp.stderr
    assert tree_digest(extra) == tree_digest(staged)


def test_offline_with_empty_caches_names_what_is_missing(staged, cache, tmp_path):
    cp, extra = stage(tmp_path, tmp_path / "empty-cache", offline=True)
    assert cp.returncode == 1
    assert "pin [ijavascript]" in cp.stderr and "run once online" in cp.stderr, cp.stderr
    assert not extra.exists()
    # The trees cached, the npm cache empty: npm's miss becomes ours, naming a package.
    partial = tmp_path / "partial-cache"
    shutil.copytree(cache / "pinfetch", partial / "pinfetch")
    cp, extra = stage(tmp_path, partial, offline=True)
    assert cp.returncode == 1
    assert "ijavascript: error: npm: " in cp.stderr and "not in the npm cache" in cp.stderr, cp.stderr
    assert "run the build once online" in cp.stderr
    names = {p.rsplit("node_modules/", 1)[-1] for p in shipped_lock()["packages"] if p}
    assert cp.stderr.split("npm: ", 1)[1].split(":", 1)[0] in names, cp.stderr
    assert not extra.exists()


def test_tampered_archive_is_refused_naming_the_pin(archives, tmp_path):
    """One byte of lib/kernel.js changed and the archive re-tarred, on the
    mirror under ijavascript's tree pin."""
    src = io.BytesIO()
    with tarfile.open(archives["ijavascript"]) as tin, tarfile.open(fileobj=src, mode="w:gz") as tout:
        hit = False
        for m in tin.getmembers():
            data = tin.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("/lib/kernel.js"):
                data = bytes([data[0] ^ 0x20]) + data[1:]
                hit = True
            if data is not None:
                m.size = len(data)
            tout.addfile(m, io.BytesIO(data) if data is not None else None)
        assert hit
    mirror = tmp_path / "mirror"
    testimages.fill_pin_mirror(mirror)
    pin = testimages.tree_pin_hex(testimages.lock_stanza(PINS, "ijavascript")["tree_sha256"])
    (mirror / "tree" / pin).write_bytes(src.getvalue())
    extra = tmp_path / "extra"
    (extra / "usr").mkdir(parents=True)
    cp, _ = stage(tmp_path, tmp_path / "cache", mirror=mirror, offline=True, extra=extra)
    assert cp.returncode == 1
    assert "pinfetch: ijavascript: tree_sha256 mismatch" in cp.stderr, cp.stderr
    assert "ijavascript: error: pin [ijavascript]" in cp.stderr and "did not verify" in cp.stderr
    assert [str(p.relative_to(extra)) for p in extra.rglob("*")] == ["usr"]


def recipes_copy(tmp_path):
    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    return dst


def test_altered_integrity_is_refused_naming_the_package(staged, cache, mirror, tmp_path):
    recipes = recipes_copy(tmp_path)
    lock_path = recipes / "ijavascript" / "package-lock.json"
    lock = json.loads(lock_path.read_text())
    entry = lock["packages"]["node_modules/jmp"]
    # Another valid sha512: the digest of other bytes.
    import base64
    entry["integrity"] = "sha512-" + base64.b64encode(hashlib.sha512(b"not jmp").digest()).decode()
    lock_path.write_text(json.dumps(lock, indent=2) + "\n")
    extra = tmp_path / "extra"
    (extra / "usr").mkdir(parents=True)
    cp, _ = stage(tmp_path, cache, mirror=mirror, recipes=recipes, extra=extra)
    assert cp.returncode == 1
    assert f"ijavascript: error: npm: jmp@{entry['version']}: the tarball does not match the lock's integrity" \
        in cp.stderr, cp.stderr
    assert [str(p.relative_to(extra)) for p in extra.rglob("*")] == ["usr"]


@pytest.mark.parametrize("edit,message", [
    (lambda lock: lock["packages"]["node_modules/uuid"].pop("integrity"), "uuid@3.4.0: has no sha512 integrity"),
    (lambda lock: lock["packages"][""]["dependencies"].pop("jp-kernel"),
     "packages[\"\"].dependencies differs from package.json's dependencies (stale lock)"),
    (lambda lock: lock["packages"]["node_modules/ms"].__setitem__("resolved", "https://registry.invalid/ms/-/ms.tgz"),
     "ms@2.1.3: has a registry URL in resolved"),
])
def test_bad_lock_is_refused_before_npm(mirror, cache, tmp_path, edit, message):
    recipes = recipes_copy(tmp_path)
    lock_path = recipes / "ijavascript" / "package-lock.json"
    lock = json.loads(lock_path.read_text())
    edit(lock)
    lock_path.write_text(json.dumps(lock, indent=2) + "\n")
    cp, extra = stage(tmp_path, cache, mirror=mirror, recipes=recipes)
    assert cp.returncode == 1 and message in cp.stderr, cp.stderr
    assert "run os-image/e2b-ci/ijavascript-lock.py" in cp.stderr
    assert not extra.exists()


def assert_names_no_registry(lock):
    """Only the two file: trees have a resolved; the configured registry's host is nowhere."""
    resolved = {p: e["resolved"] for p, e in lock["packages"].items() if "resolved" in e}
    assert resolved == {"node_modules/nel": "file:vendor/nel",
                        "node_modules/ijavascript-babel": "file:vendor/ijavascript-babel"}
    registry = run(["npm", "config", "get", "registry"]).stdout.strip()
    host = registry.split("://", 1)[-1].split("/", 1)[0]
    assert host and host not in json.dumps(lock)


def lock_check(recipes, mirror, tmp_path):
    return run(["/usr/bin/python3", LOCKPY, "--check", "--recipes", recipes,
                "--mirror", f"file://{mirror}", "--cache", tmp_path / "pin-cache"])


def test_lock_check_passes_on_the_shipped_files(mirror, tmp_path):
    cp = lock_check(ROOT / "recipes", mirror, tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert_names_no_registry(shipped_lock())


@pytest.mark.parametrize("edit,field", [
    (lambda p: p["dependencies"].__setitem__("jp-kernel", "2"), "'dependencies' (jp-kernel)"),
    (lambda p: p["dependencies"].__setitem__("nel", "https://github.com/e2b-dev/nel.git"), "'dependencies' (nel)"),
    (lambda p: p.__setitem__("version", "5.2.2"), "'version'"),
    (lambda p: p.__setitem__("devDependencies", {"mocha": "*"}), "'devDependencies'"),
])
def test_lock_check_names_the_edited_field(mirror, tmp_path, edit, field):
    recipes = recipes_copy(tmp_path)
    path = recipes / "ijavascript" / "package.json"
    pkg = json.loads(path.read_text())
    edit(pkg)
    path.write_text(json.dumps(pkg, indent=2) + "\n")
    cp = lock_check(recipes, mirror, tmp_path)
    assert cp.returncode == 1
    assert f"field {field} differs from the pinned ijavascript tree's package.json" in cp.stderr, cp.stderr
    # The stage refuses it too, before npm.
    cp, extra = stage(tmp_path, tmp_path / "cache", mirror=mirror, recipes=recipes)
    assert cp.returncode == 1 and "does not match the pinned ijavascript tree" in cp.stderr, cp.stderr
    assert not extra.exists()


def test_generator_writes_a_lock_that_checks(mirror, tmp_path):
    """A fresh lock from the registry (versions may have moved on since the
    shipped one): no registry URL, an integrity for every registry package."""
    recipes = recipes_copy(tmp_path)
    (recipes / "ijavascript" / "package-lock.json").unlink()
    cp = run(["/usr/bin/python3", LOCKPY, "--recipes", recipes, "--mirror", f"file://{mirror}",
              "--cache", tmp_path / "pin-cache"])
    assert cp.returncode == 0, cp.stderr
    assert (recipes / "ijavascript" / "package.json").read_bytes() == \
        (ROOT / "recipes/ijavascript/package.json").read_bytes()
    assert lock_check(recipes, mirror, tmp_path).returncode == 0
    lock = json.loads((recipes / "ijavascript" / "package-lock.json").read_text())
    assert "node_modules/zeromq" in lock["packages"]
    assert_names_no_registry(lock)


def node_gyp():
    npm = shutil.which("npm")
    if not npm:
        return None
    p = pathlib.Path(npm).resolve().parent.parent / "node_modules" / "node-gyp" / "bin" / "node-gyp.js"
    return p if p.is_file() else shutil.which("node-gyp")


def test_staged_kernel_runs_js_and_ts(staged, tmp_path):
    """The staged tree works: zmq.node built against the host's libzmq (as the
    image build does against Debian's), the kernelspec's argv run on a
    connection file, and jupyter_client executing JavaScript and TypeScript."""
    jc = pytest.importorskip("jupyter_client", reason="python3-jupyter-client is not installed (make deps)")
    if run(["dpkg-query", "-W", "-f=${db:Status-Status}", "libzmq3-dev"]).stdout != "installed":
        pytest.skip("libzmq3-dev is not installed (make deps): zmq.node cannot be built")
    gyp = node_gyp()
    if not gyp or not shutil.which("c++"):
        pytest.skip("no node-gyp or C++ compiler on the build host (make deps)")
    root = tmp_path / "ijavascript"
    shutil.copytree(staged / DEST, root, symlinks=True)
    nodedir = pathlib.Path(shutil.which("node")).resolve().parent.parent
    if not (nodedir / "include" / "node" / "node.h").is_file():
        pytest.skip(f"no Node.js headers under {nodedir}/include/node (Debian: libnode-dev)")
    cp = run(["node", gyp, "rebuild", f"--nodedir={nodedir}"], cwd=root / "node_modules" / "zeromq",
             env=dict(os.environ, npm_config_zmq_external="true"))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert (root / "node_modules/zeromq/build/Release/zmq.node").is_file()

    conn = tmp_path / "kernel.json"
    jc.connect.write_connection_file(str(conn), ip="127.0.0.1")
    argv = [a.replace("/usr/lib/e2b-code-interpreter/ijavascript", str(root)).replace("{connection_file}", str(conn))
            for a in KERNEL_JSON["argv"]]
    argv[0] = shutil.which("node")
    kernel = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    client = jc.BlockingKernelClient(connection_file=str(conn))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)

        def execute(code):
            outputs = []

            def hook(msg):
                if msg["msg_type"] in ("execute_result", "stream", "error"):
                    outputs.append((msg["msg_type"], msg["content"]))
            reply = client.execute_interactive(code, timeout=60, output_hook=hook)
            return reply["content"], outputs

        reply, out = execute("[1, 2, 3].map(x => x * 2)")
        assert reply["status"] == "ok", reply
        assert out == [("execute_result", {"data": {"text/plain": "[ 2, 4, 6 ]"}, "metadata": {},
                                           "execution_count": reply["execution_count"]})], out
        reply, out = execute("function twice(n: number): number { return n * 2 }\n"
                             "const v: number = await Promise.resolve(twice(21));\nconsole.log(v)")
        assert reply["status"] == "ok", (reply, out)
        assert ("stream", {"name": "stdout", "text": "42\n"}) in out, out
        reply, out = execute("throw new TypeError('boom')")
        assert reply["status"] == "error" and reply["ename"] == "TypeError" and reply["evalue"] == "boom", reply
    finally:
        client.stop_channels()
        os.killpg(kernel.pid, signal.SIGTERM)
        try:
            kernel.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(kernel.pid, signal.SIGKILL)
            kernel.wait()
