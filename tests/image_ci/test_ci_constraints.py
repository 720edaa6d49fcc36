"""constraints/: every requirement file is pinned `==` with sha256 hashes,
and pydeps=pip stops early, with a clear message, when it cannot proceed."""
import time

import pytest

from ci_helpers import FLAVOR_DIR, ROOT, run
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


def pip_download(tmp_path, env):
    return run([FLAVOR_DIR / "pip-download.sh", ROOT / "constraints", tmp_path / "out", "trixie"],
               env={"PATH": "/usr/bin:/bin", **env}, timeout=120)


def test_pip_without_an_index_says_how_to_give_one(tmp_path):
    cp = pip_download(tmp_path, {})
    assert cp.returncode == 1
    assert "pydeps=pip: no package index: pass pip_index=URL" in cp.stderr


def test_pip_with_an_unreachable_index_stops_fast_naming_it(tmp_path):
    index = f"http://127.0.0.1:{free_port()}/simple"
    start = time.monotonic()
    cp = pip_download(tmp_path, {"PIP_INDEX": index})
    assert cp.returncode == 1
    assert "package index unreachable" in cp.stderr and index in cp.stderr
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
