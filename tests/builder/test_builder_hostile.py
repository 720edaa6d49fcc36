"""Issue 37, finding 4, end to end: a real builder build (`make flavor=e2b-rt
base=oci:…`, real mkosi, stopped after mkosi with pack=0) of the Debian base
with /etc/.updated and /var/.updated made symlinks to files of
/work/src/out/<canary> (bases.finalize_escape_base): inside mkosi's script
sandbox, where mkosi.finalize runs outside the image's chroot, /work/src is
the checkout, and finalize writes both stamps. The
canary directory in the checkout keeps every file; the checkout keeps every
tracked file and its owner. (Other sessions edit the checkout meanwhile, so
its bytes are compared where this build could have written: the canary.)
The cheap version of the same, on a fake root, is test_builder_tree.py."""
import pathlib
import secrets
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT


def checkout_owners() -> dict:
    """Each tracked file of the checkout and its owner (a lost file shows as None)."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    owners = {}
    for name in filter(None, names.decode().split("\0")):
        p = ROOT / name
        owners[name] = (p.lstat().st_uid, p.lstat().st_gid) if p.exists() or p.is_symlink() else None
    return owners


def test_finalize_does_not_follow_a_base_link_into_the_checkout(tmp_path):
    canary = ROOT / "out" / f"e2b-test-canary-{secrets.token_hex(4)}"
    (canary / "sub").mkdir(parents=True)
    (canary / "precious").write_text("the checkout's\n")
    (canary / "sub" / "file").write_text("the checkout's too\n")
    out = tmp_path / "out"
    try:
        target = f"/work/src/{canary.relative_to(ROOT)}"
        layout = bases.finalize_escape_base(tmp_path / "hostile", target)
        canary_before, owners_before = bases.tree_state(canary), checkout_owners()
        cp = testimages.make("e2b-rt", out, "image", f"base=oci:{layout}:{bases.REF}", "pack=0")
        assert cp.returncode == 0, cp.stderr[-4000:]
        tree = out / "e2b-rt" / "work" / "mkosi-out" / "image"
        assert bases.tree_state(canary) == canary_before
        assert checkout_owners() == owners_before
        # The image has its stamps, as files in place of the base's links.
        for stamp in ("etc/.updated", "var/.updated"):
            assert not (tree / stamp).is_symlink() and "TIMESTAMP_NSEC=" in (tree / stamp).read_text()
    finally:
        shutil.rmtree(canary, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
