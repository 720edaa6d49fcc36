"""Tree pins: pinfetch's NAR hash of unpacked trees against Nix's own
implementation (nix-bin: `nix hash path`, `nix-hash`), the same tree packed in
several ways giving one pin, and hostile archives refused with nothing left
behind. Both builds (release and ASan+UBSan)."""
import io
import os
import pathlib
import stat
import subprocess
import sys
import tarfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import trees  # noqa: E402

pytestmark = pytest.mark.skipif(not trees.have_nix(), reason="nix-bin (nix-hash, nix) is not installed: make deps")


def hash_tree(tools, path, *extra, tmpdir=None):
    env = dict(os.environ, TMPDIR=str(tmpdir)) if tmpdir else None
    return tools.run("pinfetch", "--hash-tree", path, *extra, env=env)


def pin_of(cp):
    assert cp.returncode == 0, cp.stderr
    sri, _, _ = cp.stdout.partition("  ")
    return sri


@pytest.mark.parametrize("kind", sorted(trees.TREES))
def test_directory_pin_equals_nix(tools, tmp_path, kind):
    root = trees.make_tree(kind, tmp_path / kind)
    ours = pin_of(hash_tree(tools, root))
    assert ours == trees.nix_sri(root), f"{kind}: pinfetch and `nix hash path` disagree"
    # And the base-16 form nix-hash prints, decoded from ours.
    import base64
    assert base64.b64decode(ours[len("sha256-"):]).hex() == trees.nix_hex(root)


def test_hash_changes_with_content_mode_and_name(tools, tmp_path):
    root = trees.make_tree("mixed", tmp_path / "t")
    base = pin_of(hash_tree(tools, root))
    os.chmod(root / "plain", 0o755)
    x = pin_of(hash_tree(tools, root))
    os.chmod(root / "plain", 0o644)
    (root / "plain").write_bytes(b"plain!\n")
    c = pin_of(hash_tree(tools, root))
    (root / "plain").rename(root / "plain2")
    n = pin_of(hash_tree(tools, root))
    assert len({base, x, c, n}) == 4
    assert n == trees.nix_sri(root)


PACKINGS = [("tar.gz", 1, False), ("tar.gz", 9, True), ("tar.xz", 0, False), ("tar.xz", 6, True),
            ("zip", 0, False), ("zip", 9, True), ("tar", 0, True)]


def test_one_pin_for_every_packing(tools, tmp_path):
    src = trees.make_tree("mixed", tmp_path / "src" / "project-1.0")
    want = trees.nix_sri(src)
    got = {}
    for kind, level, reverse in PACKINGS:
        archive = trees.pack(src, tmp_path / f"p-{level}-{int(reverse)}.{kind}", kind, level, reverse)
        got[archive.name] = pin_of(hash_tree(tools, archive, tmpdir=tmp_path))
    assert set(got.values()) == {want}, got
    # Different bytes, one tree.
    sizes = {(tmp_path / name).stat().st_size for name in got}
    assert len(sizes) > 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("pinfetch-tree-")], "temporary tree left"


def test_git_archive_pax_header_and_upstream(tools, tmp_path):
    """A `git archive` tar carries a pax global header (the commit id); it is
    not an entry and does not change the tree."""
    repo = tmp_path / "repo"
    trees.make_tree("exec_bits", repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    archive = tmp_path / "a.tar.gz"
    with open(archive, "wb") as f:
        subprocess.run([*git, "archive", "--format=tar.gz", "--prefix=repo-abc/", "HEAD"], stdout=f, check=True)
    checkout = tmp_path / "co"
    checkout.mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(checkout)], check=True)
    assert pin_of(hash_tree(tools, archive, tmpdir=tmp_path)) == trees.nix_sri(checkout / "repo-abc")


# Hostile archives, written with Python's tarfile (a third, independent writer).
def tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def ti(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, (data if kind == tarfile.REGTYPE else None)


TOP = ti("top/", tarfile.DIRTYPE, mode=0o755)
HOSTILE = {
    "absolute": ([TOP, ti("/tmp/evil")], "/tmp/evil", "absolute path"),
    "dotdot": ([TOP, ti("top/../../evil")], "top/../../evil", '".."'),
    "through_symlink": ([TOP, ti("top/l", tarfile.SYMTYPE, link="/tmp"), ti("top/l/evil", data=b"x")],
                        "top/l/evil", "through the symlink"),
    "symlink_then_replace": ([TOP, ti("top/l", tarfile.SYMTYPE, link="/etc/passwd"), ti("top/l", data=b"x")],
                             "top/l", "twice"),
    "hardlink_outside": ([TOP, ti("top/h", tarfile.LNKTYPE, link="/etc/passwd")], "top/h", "outside the tree"),
    "hardlink_dotdot": ([TOP, ti("top/h", tarfile.LNKTYPE, link="top/../../etc/passwd")], "top/h", "outside"),
    "char_device": ([TOP, ti("top/null", tarfile.CHRTYPE)], "top/null", "device node"),
    "block_device": ([TOP, ti("top/sda", tarfile.BLKTYPE)], "top/sda", "device node"),
    "fifo": ([TOP, ti("top/fifo", tarfile.FIFOTYPE)], "top/fifo", "FIFO"),
    "setuid": ([TOP, ti("top/su", data=b"x", mode=0o4755)], "top/su", "setuid"),
    "setgid": ([TOP, ti("top/sg", data=b"x", mode=0o2755)], "top/sg", "setgid"),
    "two_tops": ([TOP, ti("top/a"), ti("other/b")], "other/b", "top-level"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_refused(tools, tmp_path, case):
    members, entry, why = HOSTILE[case]
    archive = tmp_path / f"{case}.tar.gz"
    archive.write_bytes(tar_bytes(members))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    cp = hash_tree(tools, archive, tmpdir=scratch)
    assert cp.returncode == 1, cp.stderr
    assert f'entry "{entry}' in cp.stderr and why in cp.stderr and str(archive) in cp.stderr, cp.stderr
    assert list(scratch.iterdir()) == [], "left behind"
    assert not pathlib.Path("/tmp/evil").exists()


def test_bombs_refused_by_the_caps(tools, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    big = tmp_path / "big.tar.gz"  # 64 MiB of zeros, ~64 KiB packed
    big.write_bytes(tar_bytes([TOP, ti("top/zeros", data=bytes(64 << 20))]))
    assert big.stat().st_size < 1 << 20
    cp = hash_tree(tools, big, "--max-unpacked", str(8 << 20), tmpdir=scratch)
    assert cp.returncode == 1 and 'entry "top/zeros"' in cp.stderr and "cap" in cp.stderr, cp.stderr
    many = tmp_path / "many.tar.gz"
    many.write_bytes(tar_bytes([TOP] + [ti(f"top/f{i}") for i in range(2000)]))
    cp = hash_tree(tools, many, "--max-entries", "1000", tmpdir=scratch)
    assert cp.returncode == 1 and 'entry "top/f999"' in cp.stderr and "1000 entries" in cp.stderr, cp.stderr
    assert list(scratch.iterdir()) == []
    # Under the caps, the same archives are fine.
    assert hash_tree(tools, many, tmpdir=scratch).returncode == 0


def test_not_an_archive(tools, tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(1000))
    cp = hash_tree(tools, junk, tmpdir=tmp_path)
    assert cp.returncode == 1 and str(junk) in cp.stderr and "refused" in cp.stderr, cp.stderr
