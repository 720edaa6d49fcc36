"""Build the e2b-ci flavor with the tests' recipes (test only).

The real envd release and code-interpreter archive cannot be downloaded here:
the envd stand-in (tests/envd-standin) and the code-interpreter fixture
(tests/fixtures/code-interpreter, packed like GitHub's archive) are served
from loopback and pinned in a temporary recipes= directory, so both go through
build/pinfetch exactly like real pins.

  python3 tests/image_ci/testbuild.py OUT [make target...]   (default: the image)
"""
import contextlib
import hashlib
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ci_helpers import FIXTURE_COMMIT, ROOT, pack_fixture, serve_directory  # noqa: E402


@contextlib.contextmanager
def test_recipes():
    with tempfile.TemporaryDirectory(prefix="e2b-ci-recipes-") as tmp:
        tmp = pathlib.Path(tmp)
        srv, recipes = tmp / "srv", tmp / "recipes"
        srv.mkdir()
        recipes.mkdir()
        subprocess.run(["sh", str(ROOT / "tests/envd-standin/build.sh"), str(srv / "envd")],
                       check=True, capture_output=True, timeout=600)
        version = subprocess.run([str(srv / "envd"), "-version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        data = pack_fixture()
        (srv / f"{FIXTURE_COMMIT}.tar.gz").write_bytes(data)
        with serve_directory(srv) as served:
            (recipes / "envd.lock").write_text(
                f"# test only: the envd stand-in, served from loopback\n[envd]\nversion = {version}\n"
                f"url = {served.url('envd')}\nsha256 = {hashlib.sha256((srv / 'envd').read_bytes()).hexdigest()}\n")
            (recipes / "code-interpreter.lock").write_text(
                "# test only: the code-interpreter stand-in, served from loopback\n"
                f"[code-interpreter]\nversion = {FIXTURE_COMMIT}\nurl = {served.url(FIXTURE_COMMIT + '.tar.gz')}\n"
                f"sha256 = {hashlib.sha256(data).hexdigest()}\n")
            yield recipes


def make(out, *targets, timeout=3600, extra=()):
    with test_recipes() as recipes:
        return subprocess.run(["make", "--no-print-directory", *targets, "flavor=e2b-ci",
                               f"recipes={recipes}", f"out={out}", *extra],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)


if __name__ == "__main__":
    cp = make(sys.argv[1], *sys.argv[2:])
    sys.stdout.write(cp.stdout)
    sys.stderr.write(cp.stderr)
    sys.exit(cp.returncode)
