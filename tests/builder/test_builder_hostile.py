"""Issue 37, end to end: real builder builds (`make flavor=e2b-rt
base=oci:…`, real mkosi, stopped after mkosi with pack=0) of hostile Debian
bases (tests/builder/bases.py).

Finding 4 and what lies under it, in one build (bases.finalize_escape_base
with a trojan getent): /etc/.updated and /var/.updated are symlinks to
files of /work/src/out/<canary>; inside mkosi's script sandbox, where
mkosi.finalize runs outside the image's chroot, /work/src is the checkout,
and finalize writes both stamps. And the base's /usr/bin/getent, which the
build runs as root (mkosi.postinst, maintainer scripts), tries the build
host's files through /proc/PID/root of every process it sees, a canary
under /var/tmp and the checkout's canary, and a device node: mkosi's own
sandbox shares the host's pid namespace, so before sandbox/confine.py it
wrote both. Both canaries keep every file; the checkout keeps every
tracked file and its owner. (Other sessions edit the checkout meanwhile,
so its bytes are compared where this build could have written: the
canary.) The cheap version of the finalize links, on a fake root, is
test_builder_tree.py.

Finding 1 (bases.hostile_home_base): a base whose account `user` has its
home in the checkout is refused, naming the account and the home, and the
checkout keeps its owners."""
import pathlib
import secrets
import shutil
import sys
import tempfile
import pytest  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT


def test_a_hostile_base_reaches_neither_the_checkout_nor_the_host(tmp_path):
    canary = ROOT / "out" / f"e2b-test-canary-{secrets.token_hex(4)}"
    host = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-canary-", dir="/var/tmp"))
    (canary / "sub").mkdir(parents=True)
    (canary / "precious").write_text("the checkout's\n")
    (canary / "sub" / "file").write_text("the checkout's too\n")
    (host / "precious").write_text("the build host's\n")
    out = tmp_path / "out"
    try:
        target = f"/work/src/{canary.relative_to(ROOT)}"
        layout = bases.finalize_escape_base(tmp_path / "hostile", target, reach=(str(host), str(canary)))
        before = bases.tree_state(canary), bases.tree_state(host), bases.checkout_owners()
        cp = testimages.make("e2b-rt", out, "image", f"base=oci:{layout}:{bases.REF}", "pack=0")
        assert cp.returncode == 0, cp.stderr[-4000:]
        tree = out / "e2b-rt" / "work" / "mkosi-out" / "image"
        assert (bases.tree_state(canary), bases.tree_state(host), bases.checkout_owners()) == before
        # The trojan ran (as root, in the build), and got nowhere.
        log = (tree / bases.ESCAPE_LOG.lstrip("/")).read_text()
        assert "ran: getent passwd user" in log, log
        # Through /proc, the checkout is the sandbox's overlay (a write there is dropped, as the
        # canary's state shows), the host's /var/tmp not there at all.
        assert str(host) not in log and "mknod" not in log, log
        # The image has its stamps, as files in place of the base's links.
        for stamp in ("etc/.updated", "var/.updated"):
            assert not (tree / stamp).is_symlink() and "TIMESTAMP_NSEC=" in (tree / stamp).read_text()
    finally:
        shutil.rmtree(canary, ignore_errors=True)
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def test_a_base_user_with_its_home_in_the_checkout_is_refused(tmp_path):
    canary = ROOT / "out" / f"e2b-test-canary-{secrets.token_hex(4)}"
    canary.mkdir(parents=True)
    out = tmp_path / "out"
    try:
        home = f"/work/src/{canary.relative_to(ROOT)}/home"
        layout = bases.hostile_home_base(tmp_path / "hostile", home)
        before = bases.tree_state(canary), bases.checkout_owners()
        cp = testimages.make("e2b-rt", out, "image", f"base=oci:{layout}:{bases.REF}", "pack=0")
        assert cp.returncode != 0
        assert f"the base's account 'user' has its home at {home}" in cp.stderr, cp.stderr[-4000:]
        assert (bases.tree_state(canary), bases.checkout_owners()) == before
    finally:
        shutil.rmtree(canary, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
