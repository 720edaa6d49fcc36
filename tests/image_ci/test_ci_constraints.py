"""constraints/: every requirement file is pinned `==` with sha256 hashes,
and pydeps=pip stops early, with a clear message, when it cannot proceed."""
import json
import time

import pytest

import testimages

from ci_helpers import FLAVOR_DIR, ROOT, make_wheel, run, serve_directory
from harness import free_port
from ci_helpers import fixture_archive  # noqa: F401 (fixtures)

CHECK = FLAVOR_DIR / "check-constraints.py"
H1 = "a" * 64
H2 = "0123456789abcdef" * 4


def constraint_files():
    files = sorted((ROOT / "constraints").glob("*.txt"))
    assert files, "constraints/ has no requirement files"
    return files


@pytest.mark.parametrize("path", constraint_files(), ids=lambda p: p.name)
def test_every_constraint_file_is_fully_hash_pinned(path):
    cp = run(["/usr/bin/python3", CHECK, path])
    assert cp.returncode == 0, cp.stderr
    # And independently of the checker: each requirement line has == and a hash.
    text = path.read_text().replace("\\\n", " ")
    reqs = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert reqs
    for line in reqs:
        name = line.split()[0]
        assert "==" in name, line
        assert "--hash=sha256:" in line, line


@pytest.mark.parametrize("text", [
    f"numpy==2.2.6 --hash=sha256:{H1}\n",
    f"# comment\nnumpy==2.2.6 \\\n    --hash=sha256:{H1} \\\n    --hash=sha256:{H2}\nsix==1.16.0 --hash=sha256:{H2}  # trailing\n",
    f"Python_Dateutil==2.9.0.post0 --hash=sha256:{H1}\n",
])
def test_checker_accepts(text, tmp_path):
    f = tmp_path / "ok.txt"
    f.write_text(text)
    cp = run(["/usr/bin/python3", CHECK, f])
    assert cp.returncode == 0, cp.stderr


@pytest.mark.parametrize("text,message", [
    ("numpy\n", "not pinned as name==version"),
    (f"numpy>=2 --hash=sha256:{H1}\n", "not pinned as name==version"),
    (f"numpy==2.* --hash=sha256:{H1}\n", "not pinned as name==version"),
    (f"numpy[extra]==2.2.6 --hash=sha256:{H1}\n", "not pinned as name==version"),
    (f"numpy==2.2.6;python_version>'3' --hash=sha256:{H1}\n", "not pinned as name==version"),
    ("numpy==2.2.6\n", "numpy: no --hash"),
    ("numpy==2.2.6 --hash=md5:0123456789abcdef0123456789abcdef\n", "not --hash=sha256:"),
    (f"numpy==2.2.6 --hash=sha256:{H1[:-1]}\n", "not --hash=sha256:"),
    (f"numpy==2.2.6 --hash=sha256:{H1.upper()}\n", "not --hash=sha256:"),
    (f"-r other.txt\nnumpy==2.2.6 --hash=sha256:{H1}\n", "option -r is not allowed"),
    (f"--index-url http://127.0.0.1/simple\nnumpy==2.2.6 --hash=sha256:{H1}\n", "option --index-url"),
    (f"numpy @ file:///tmp/numpy.whl --hash=sha256:{H1}\n", "not pinned as name==version"),
    (f"numpy==2.2.6 --hash=sha256:{H1}\nNumPy==2.2.6 --hash=sha256:{H2}\n", "listed twice"),
    (f"numpy==2.2.6 \\\n    --hash=sha256:{H1} \\\n", "ends inside a continued line"),
    ("# only comments\n\n", "no requirements"),
])
def test_checker_rejects(text, message, tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    cp = run(["/usr/bin/python3", CHECK, f])
    assert cp.returncode == 1
    assert message in cp.stderr
    assert str(f) in cp.stderr


def pip_download(tmp_path, env, constraints=ROOT / "constraints", cache=None, extra=()):
    return run([FLAVOR_DIR / "pip-download.sh", constraints, tmp_path / "out", "trixie", *extra],
               env={"PATH": "/usr/bin:/bin", "CACHE": str(cache or tmp_path / "cache"), **env}, timeout=120)


@pytest.fixture()
def index(tmp_path):
    """A PEP 503 index on loopback (a stand-in for the real one: the wheels are
    ones the test builds) serving demo 1.0 as a wheel and sdonly 1.0 as an
    sdist only. Yields (url, constraints dir, wheel's sha256)."""
    root = tmp_path / "index"
    (root / "simple/demo").mkdir(parents=True)
    (root / "simple/sdonly").mkdir(parents=True)
    wheel, digest = make_wheel(root / "simple/demo", name="demo", version="1.0")
    (root / "simple/demo/index.html").write_text(
        f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    sdist = root / "simple/sdonly/sdonly-1.0.tar.gz"
    sdist.write_bytes(b"not a real sdist")
    (root / "simple/sdonly/index.html").write_text(f'<a href="{sdist.name}">{sdist.name}</a>\n')
    constraints = tmp_path / "constraints"
    constraints.mkdir()
    with serve_directory(root) as served:
        yield served.url("simple"), constraints, digest


def test_pip_downloads_to_the_cache_and_rebuilds_offline(index, tmp_path):
    url, constraints, digest = index
    (constraints / "demo.txt").write_text(f"demo==1.0 --hash=sha256:{digest}\n")
    cp = pip_download(tmp_path, {"PIP_INDEX": url}, constraints)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "cache/pip-wheels/demo-1.0-py3-none-any.whl").is_file()
    assert sorted(p.name for p in (tmp_path / "out/wheels").iterdir()) == ["demo-1.0-py3-none-any.whl"]
    # offline=1: no index at all (an unreachable one), the cache alone.
    (tmp_path / "out").rename(tmp_path / "online")
    cp = pip_download(tmp_path, {"PIP_INDEX": f"http://127.0.0.1:{free_port()}/simple", "OFFLINE": "1"},
                      constraints)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "out/wheels/demo-1.0-py3-none-any.whl").read_bytes() == \
        (tmp_path / "online/wheels/demo-1.0-py3-none-any.whl").read_bytes()


def test_pip_offline_without_the_wheel_in_the_cache_names_it(index, tmp_path):
    _url, constraints, digest = index
    (constraints / "demo.txt").write_text(f"demo==1.0 --hash=sha256:{digest}\n")
    cp = pip_download(tmp_path, {"OFFLINE": "1"}, constraints)
    assert cp.returncode == 1
    assert "demo.txt: demo==1.0: no wheel for CPython 3.13 in the cache" in cp.stderr
    assert "stopping before mkosi" in cp.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,message", [
    ("demo", "demo.txt: demo==1.0: its hash is not one pinned in the file; stopping before mkosi"),
    ("sdonly", "sdonly.txt: sdonly==1.0: the index has no wheel of it for CPython 3.13 manylinux "
               "x86_64 (sdist only?); stopping before mkosi"),
], ids=["hash-not-pinned", "sdist-only"])
def test_pip_refuses_a_bad_wheel_naming_package_and_file(index, tmp_path, name, message):
    url, constraints, _digest = index
    (constraints / f"{name}.txt").write_text(f"{name}==1.0 --hash=sha256:{H1}\n")
    cp = pip_download(tmp_path, {"PIP_INDEX": url}, constraints)
    assert cp.returncode == 1
    assert message in cp.stderr
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "cache/pip-wheels").iterdir())


def test_pip_with_an_unreachable_index_stops_fast_naming_it(tmp_path):
    index = f"http://127.0.0.1:{free_port()}/simple"
    start = time.monotonic()
    cp = pip_download(tmp_path, {"PIP_INDEX": index})
    assert cp.returncode == 1
    assert "package index unreachable" in cp.stderr and index in cp.stderr and "offline=1" in cp.stderr
    assert "stopping before mkosi" in cp.stderr
    assert time.monotonic() - start < 30
    assert not (tmp_path / "out/wheels").exists()


def test_pip_refuses_unhashed_constraints_before_any_download(tmp_path):
    d = tmp_path / "constraints"
    d.mkdir()
    (d / "server.txt").write_text("fastapi==0.115.11\n")
    cp = run([FLAVOR_DIR / "pip-download.sh", d, tmp_path / "out", "trixie"],
             env={"PATH": "/usr/bin:/bin", "PIP_INDEX": "http://127.0.0.1:9/simple"})
    assert cp.returncode == 1
    assert "fastapi: no --hash" in cp.stderr and "not fully pinned and hashed" in cp.stderr


def test_prepare_with_unknown_pydeps_fails(fixture_archive, tmp_path):
    from ci_helpers import prepare
    archive, _ = fixture_archive
    cp = prepare(archive, tmp_path / "extra", tmp_path / "work", env={"PYDEPS": "conda"})
    assert cp.returncode == 1 and "pydeps=conda: unknown" in cp.stderr


GEN = FLAVOR_DIR / "constraints-gen.py"


def upstream_tree(tmp_path, kernel, server):
    src = tmp_path / "source"
    (src / "template/server").mkdir(parents=True)
    (src / "template/requirements.txt").write_text(kernel)
    (src / "template/server/requirements.txt").write_text(server)
    return src


@pytest.fixture()
def gen_index(tmp_path):
    """A loopback PEP 503 index (stand-in wheels built here): demo 1.0 only as
    an sdist and 1.1 as a wheel; opencv-python-headless 2.0, and helper 3.0
    (demo's dependency), rfc3987-syntax 1.0 (helper's, dropped by the
    generator). Yields its URL."""
    root = tmp_path / "index/simple"
    links = {}
    for name, version, deps in [("demo", "1.1", ["helper"]), ("opencv_python_headless", "2.0", []),
                                ("helper", "3.0", ["rfc3987-syntax"]), ("rfc3987_syntax", "1.0", [])]:
        d = root / name.replace("_", "-")
        d.mkdir(parents=True)
        wheel, digest = make_wheel(d, name=name, version=version, requires=deps)
        links.setdefault(d, []).append(f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a>')
    (root / "demo/demo-1.0.tar.gz").write_bytes(b"not a real sdist")
    links[root / "demo"].append('<a href="demo-1.0.tar.gz">demo-1.0.tar.gz</a>')
    for d, ls in links.items():
        (d / "index.html").write_text("\n".join(ls) + "\n")
    with serve_directory(root.parent) as served:
        yield served.url("simple")


def test_generator_pins_the_closure_and_records_deviations(gen_index, tmp_path):
    src = upstream_tree(tmp_path, "demo==1.0\nopencv-python==2.0\ne2b_charts\n", "helper==3.0\n")
    out = tmp_path / "e2b-ci.txt"
    cp = run(["/usr/bin/python3", GEN, "--source", src, "--output", out, "--index", gen_index],
             env={"PATH": "/usr/bin:/bin"}, timeout=120)
    assert cp.returncode == 0, cp.stderr
    text = out.read_text()
    assert gen_index.split("//")[1].split("/")[0] not in text  # no index host in the file
    assert "# deviation: demo 1.0 -> demo 1.1: no wheel of 1.0 for CPython 3.13" in text
    assert "# deviation: opencv-python 2.0 -> opencv-python-headless 2.0: the headless build" in text
    assert "# deviation: e2b-charts (latest) -> - -: shipped from the pinned archive" in text
    assert "# dropped: rfc3987-syntax 1.0: an optional format checker of jsonschema" in text
    pins = sorted(l.split()[0] for l in text.splitlines() if l and not l.startswith(("#", " ")))
    assert pins == ["demo==1.1", "helper==3.0", "opencv-python-headless==2.0"]
    assert run(["/usr/bin/python3", CHECK, out]).returncode == 0
    cp = run(["/usr/bin/python3", GEN, "--check", "--source", src, "--output", out])
    assert cp.returncode == 0, cp.stderr

    # --check fails when upstream moves, or the file is changed by hand.
    moved = upstream_tree(tmp_path / "moved", "demo==1.0\nopencv-python==2.1\ne2b_charts\n", "helper==3.0\n")
    cp = run(["/usr/bin/python3", GEN, "--check", "--source", moved, "--output", out])
    assert cp.returncode == 1
    assert "opencv-python: the deviation is recorded for 2.0, upstream's template/requirements.txt pins 2.1" in cp.stderr
    assert "upstream template/requirements.txt: sha256" in cp.stderr
    out.write_text(text.replace("helper==3.0", "helper==3.1"))
    cp = run(["/usr/bin/python3", GEN, "--check", "--source", src, "--output", out])
    assert cp.returncode == 1 and "helper: pinned 3.1, upstream's template/server/requirements.txt says 3.0" in cp.stderr
    out.write_text(text + f"rfc3987-syntax==1.0 --hash=sha256:{H1}\n")
    cp = run(["/usr/bin/python3", GEN, "--check", "--source", src, "--output", out])
    assert cp.returncode == 1 and "rfc3987-syntax: recorded as dropped, but pinned" in cp.stderr


def test_shipped_constraints_agree_with_upstream():
    """constraints/e2b-ci.txt against upstream's requirements at the pinned
    commit (its archive in ../shared/upstream/, verified against the lock)."""
    archive = testimages.upstream_archive()
    if archive is None:
        pytest.skip(f"{testimages.UPSTREAM_DIR}/code-interpreter-<commit>.tar.gz is absent")
    cp = run(["/usr/bin/python3", GEN, "--check", "--archive", archive])
    assert cp.returncode == 0, cp.stderr
    assert "agrees with upstream (43 requirements)" in cp.stdout
    assert "e2b-ci-kernels.txt: every kernel wheel's requirement is pinned" in cp.stdout


KERNELS_FILE = f"""# deviation: kern (latest) -> kern 1.0: pinned
# kernel: bash
# requires: kern: dep
kern==1.0 --hash=sha256:{{kern}}
# requires: dep: -
dep==1.0 --hash=sha256:{{dep}}

# kernel: java
# requires: jkern: -
jkern==1.0 --hash=sha256:{{jkern}}
"""


@pytest.mark.parametrize("text,message", [
    (f"# kernel: bash\nkern==1.0 --hash=sha256:{H1}\n", "kern: no `# requires: kern: ...` line just before it"),
    (f"# requires: kern: -\nkern==1.0 --hash=sha256:{H1}\n# kernel: bash\n", "kern: before any `# kernel: NAME` line"),
    (f"# kernel: bash\n# requires: other: -\nkern==1.0 --hash=sha256:{H1}\n", "kern: no `# requires: kern: ...`"),
    (f"# kernel: bash\n# requires: kern: -\nkern==1.0 --hash=sha256:{H1}\n# requires: x: -\n", "x: `# requires:` without"),
    (f"# kernel: Bash!\n# requires: kern: -\nkern==1.0 --hash=sha256:{H1}\n", "a kernel name is lowercase"),
    (f"# kernel: bash\n# requires: kern\nkern==1.0 --hash=sha256:{H1}\n", "not `# requires: WHEEL: NAME...`"),
], ids=["no-requires", "no-kernel", "other-requires", "dangling", "bad-kernel", "bad-requires"])
def test_checker_rejects_a_malformed_kernels_file(text, message, tmp_path):
    f = tmp_path / "kernels.txt"
    f.write_text(text)
    cp = run(["/usr/bin/python3", CHECK, f])
    assert cp.returncode == 1 and message in cp.stderr and str(f) in cp.stderr, cp.stderr


def test_closure_needs_every_recorded_requirement_pinned_once(tmp_path):
    main, kernels = tmp_path / "main.txt", tmp_path / "kernels.txt"
    main.write_text(f"dep==1.0 --hash=sha256:{H1}\n")
    kernels.write_text(f"# kernel: bash\n# requires: kern: dep other\nkern==1.0 --hash=sha256:{H2}\n")
    cp = run(["/usr/bin/python3", CHECK, "--closure", main, kernels])
    assert cp.returncode == 1 and f"{kernels}:3: kern: requires other, pinned in none of" in cp.stderr, cp.stderr
    assert "requires dep" not in cp.stderr
    main.write_text(f"dep==1.0 --hash=sha256:{H1}\nother==2 --hash=sha256:{H1}\nkern==1.0 --hash=sha256:{H1}\n")
    cp = run(["/usr/bin/python3", CHECK, "--closure", main, kernels])
    assert cp.returncode == 1 and "kern: also pinned in" in cp.stderr, cp.stderr
    main.write_text(f"dep==1.0 --hash=sha256:{H1}\nother==2 --hash=sha256:{H1}\n")
    cp = run(["/usr/bin/python3", CHECK, "--closure", main, kernels])
    assert cp.returncode == 0, cp.stderr


def test_shipped_kernels_file_pins_what_bash_kernel_needs():
    """bash_kernel's pexpect and ipykernel come from e2b-ci.txt."""
    files = constraint_files()
    assert [f.name for f in files] == ["e2b-ci-kernels.txt", "e2b-ci.txt"]
    cp = run(["/usr/bin/python3", CHECK, "--closure", *files])
    assert cp.returncode == 0, cp.stderr
    kernels = files[0].read_text()
    for pin in ("bash_kernel==0.10.0", "filetype==1.2.0", "jjava==1.0a8", "# requires: bash_kernel: pexpect ipykernel filetype"):
        assert pin in kernels
    assert "\n# deviation: ijava 1.3.0 -> jjava 1.0a8: " in kernels


@pytest.fixture()
def kernel_index(tmp_path):
    """A loopback index (stand-in: wheels built here) with kern (requires
    dep), dep and jkern. Yields (url, constraints dir, {name: sha256})."""
    root, digests = tmp_path / "index", {}
    for name, requires in (("kern", ["dep (>=1)", "extraonly ; extra == 'x'"]), ("dep", []), ("jkern", [])):
        (root / "simple" / name).mkdir(parents=True)
        wheel, digests[name] = make_wheel(root / "simple" / name, name=name, version="1.0", requires=requires)
        (root / "simple" / name / "index.html").write_text(f'<a href="{wheel.name}#sha256={digests[name]}">{wheel.name}</a>\n')
    constraints = tmp_path / "constraints"
    constraints.mkdir()
    (constraints / "kernels.txt").write_text(KERNELS_FILE.format(**digests))
    with serve_directory(root) as served:
        yield served.url("simple"), constraints, digests


def test_pip_downloads_only_the_chosen_kernels_and_files(kernel_index, tmp_path):
    url, constraints, digests = kernel_index
    (constraints / "demo.txt").write_text("# no kernels here\n" + f"dep2==1.0 --hash=sha256:{H1}\n")
    cp = pip_download(tmp_path, {"PIP_INDEX": url, "KERNELS": "python,bash"}, constraints, extra=["kernels.txt"])
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in (tmp_path / "out/wheels").iterdir()) == \
        ["dep-1.0-py3-none-any.whl", "kern-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in (tmp_path / "out/constraints").iterdir()) == ["kernels.txt"]
    assert "jkern" not in (tmp_path / "out/constraints/kernels.txt").read_text()
    # A kernel set that needs nothing from the file: nothing to do, no OUT.
    cp = pip_download(tmp_path, {"PIP_INDEX": url, "KERNELS": "python,javascript"}, constraints, extra=["kernels.txt"])
    assert cp.returncode == 0 and "nothing to download" in cp.stdout, cp.stderr
    assert not (tmp_path / "out").exists()
    cp = pip_download(tmp_path, {"PIP_INDEX": url}, constraints, extra=["missing.txt"])
    assert cp.returncode == 1 and "missing.txt: not a requirement file in" in cp.stderr


def test_pip_refuses_a_kernel_wheel_whose_requirements_differ_from_its_line(kernel_index, tmp_path):
    url, constraints, digests = kernel_index
    f = constraints / "kernels.txt"
    f.write_text(f.read_text().replace("# requires: kern: dep", "# requires: kern: -"))
    cp = pip_download(tmp_path, {"PIP_INDEX": url}, constraints)
    assert cp.returncode == 1
    assert f"{f}:4: kern: the wheel kern-1.0-py3-none-any.whl requires dep, the `# requires:` line says -" in cp.stderr
    assert "stopping before mkosi" in cp.stderr and not (tmp_path / "out").exists()


def test_stack_table_shows_the_kernels_deviations(tmp_path):
    """The kernels' `# deviation:` lines (no row of upstream's requirements.txt)
    are printed under the table from the constraints the image ships, and a
    README without them does not match (a stand-in build: a manifest and the
    doc folder, as stack-table.py reads them)."""
    out, doc = tmp_path / "out", tmp_path / "doc"
    (doc / "constraints").mkdir(parents=True)
    out.mkdir()
    (doc / "requirements.txt").write_text("numpy==2.2.6\n")
    for f in constraint_files():
        (doc / "constraints" / f.name).write_text(f.read_text())
    (out / "manifest.json").write_text(json.dumps({
        "packages": [{"name": "bash", "version": "5.2"}], "artifacts": [],
        "python_packages": [{"name": "numpy", "version": "2.2.6"}]}))
    table = FLAVOR_DIR / "stack-table.py"
    cp = run(["/usr/bin/python3", table, out, "--requirements", doc / "requirements.txt"])
    assert cp.returncode == 0, cp.stderr
    assert "| numpy | 2.2.6 |" in cp.stdout
    assert "- outside requirements.txt: `ijava` 1.3.0 → `jjava` 1.0a8: " in cp.stdout
    assert "- outside requirements.txt: `bash_kernel` (latest) → `bash_kernel` 0.10.0: " in cp.stdout
    readme = tmp_path / "README.md"
    begin = "<!-- stack-table: begin (os-image/e2b-ci/stack-table.py --write; do not edit) -->"
    readme.write_text(f"# x\n{begin}\n{cp.stdout}<!-- stack-table: end -->\n")
    check = [table, out, "--requirements", doc / "requirements.txt", "--check", readme]
    assert run(["/usr/bin/python3", *check]).returncode == 0
    readme.write_text("\n".join(l for l in readme.read_text().splitlines() if "`jjava`" not in l) + "\n")
    cp = run(["/usr/bin/python3", *check])
    assert cp.returncode == 1 and "the image has \"- outside requirements.txt: `ijava` 1.3.0" in cp.stderr, cp.stderr
