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


STREAMED = "tree hashed while unpacking"
WALKED = "tree hashed after unpacking, not while"


@pytest.mark.parametrize("kind", sorted(trees.TREES))
def test_hashed_while_unpacking_in_nar_order_else_after(tools, tmp_path, kind):
    """The NAR hash is computed while unpacking when the entries come in NAR
    order (as forges and `tar --sort=name` write them), else from the
    unpacked tree. Either way the pin is Nix's; --verbose says which way."""
    src = trees.make_tree(kind, tmp_path / "src" / "project-1.0")
    want = trees.nix_sri(src)
    nar = trees.nar_order(src)
    archives = {
        "tar --sort=name": (trees.pack_forge(src, tmp_path / "forge.tar.gz"), True),
        "zip in NAR order": (trees.pack(src, tmp_path / "nar.zip", "zip", 6, names=nar), True),
        "tar.xz in NAR order": (trees.pack(src, tmp_path / "nar.tar.xz", "tar.xz", 1, names=nar), True),
        # Reversed: every entry before its parent's, every name before a smaller one.
        "reversed": (trees.pack(src, tmp_path / "rev.tar.gz", "tar.gz", 6, reverse=True), len(nar) <= 2),
        # Whole paths in byte order (git's order): NAR order unless names like "foo" and "foo.txt" meet.
        "git order": (trees.pack(src, tmp_path / "git.tar.gz", "tar.gz", 6), None if kind != "nar_vs_git" else False),
    }
    for label, (archive, streams) in archives.items():
        cp = hash_tree(tools, archive, "--verbose", tmpdir=tmp_path)
        assert pin_of(cp) == want, f"{kind}, {label}: pinfetch and `nix hash path` disagree\n{cp.stderr}"
        assert (STREAMED in cp.stderr) != (WALKED in cp.stderr), cp.stderr
        if streams is not None:
            assert (STREAMED in cp.stderr) == streams, f"{kind}, {label}: {cp.stderr}"
    if kind == "nar_vs_git":
        cp = hash_tree(tools, archives["git order"][0], "--verbose", tmpdir=tmp_path)
        assert 'entry "foo/sub" is out of NAR order' in cp.stderr, cp.stderr  # after foo.txt: foo was closed


def test_a_hardlink_is_hashed_after_unpacking(tools, tmp_path):
    src = trees.make_tree("exec_bits", tmp_path / "src" / "project-1.0")
    os.link(src / "plain", src / "plain-again")
    archive = trees.pack_forge(src, tmp_path / "forge.tar.gz")
    cp = hash_tree(tools, archive, "--verbose", tmpdir=tmp_path)
    assert pin_of(cp) == trees.nix_sri(src)
    assert 'is a hardlink' in cp.stderr and WALKED in cp.stderr, cp.stderr


def test_git_archive_pax_header_is_not_an_entry(tools, tmp_path):
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


def zip_bytes(members):
    """A zip written with Python's zipfile: (name, data, unix mode) triples."""
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            z.writestr(info, data)
    return buf.getvalue()


ZIP_HOSTILE = {
    "zip_dotdot": ([("top/", b"", 0o40755), ("top/../../evil", b"x", 0o100644)], "top/../../evil", '".."'),
    "zip_absolute": ([("top/", b"", 0o40755), ("/tmp/evil", b"x", 0o100644)], "/tmp/evil", "absolute"),
    "zip_through_symlink": ([("top/", b"", 0o40755), ("top/l", b"/tmp", 0o120777), ("top/l/evil", b"x", 0o100644)],
                            "top/l/evil", "through the symlink"),
    "zip_setuid": ([("top/", b"", 0o40755), ("top/su", b"x", 0o104755)], "top/su", "setuid"),
}



def hostile_archive(case):
    """(bytes, file suffix, entry, reason) of one hostile archive, tar.gz or zip."""
    if case in ZIP_HOSTILE:
        members, entry, why = ZIP_HOSTILE[case]
        return zip_bytes(members), "zip", entry, why
    members, entry, why = HOSTILE[case]
    return tar_bytes(members), "tar.gz", entry, why


@pytest.mark.parametrize("case", sorted(HOSTILE) + sorted(ZIP_HOSTILE))
def test_hostile_archive_refused(tools, tmp_path, case):
    data, suffix, entry, why = hostile_archive(case)
    archive = tmp_path / f"{case}.{suffix}"
    archive.write_bytes(data)
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


def test_default_unpacked_cap_is_2_gib(tools, tmp_path):
    """A source tree needs far less than 2 GiB (e2b-dev/infra, the biggest we
    unpack, is about 30 MiB): by default an archive that unpacks to 3 GiB (a
    sparse file, a few KiB packed) is refused before it is written. The
    default was 16 GiB, and pinfetch unpacked and hashed the 3 GiB."""
    src = tmp_path / "src" / "top"
    src.mkdir(parents=True)
    with open(src / "huge", "wb") as f:
        f.truncate(3 << 30)
    bomb = tmp_path / "bomb.tar.gz"
    subprocess.run(["tar", "--sparse", "-czf", str(bomb), "-C", str(tmp_path / "src"), "top"], check=True)
    assert bomb.stat().st_size < 1 << 20
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    cp = hash_tree(tools, bomb, tmpdir=scratch)
    assert cp.returncode == 1, cp.stderr
    assert 'entry "top/huge"' in cp.stderr and "over the cap of 2147483648 bytes" in cp.stderr, cp.stderr
    assert list(scratch.iterdir()) == []


def test_not_an_archive(tools, tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(1000))
    cp = hash_tree(tools, junk, tmpdir=tmp_path)
    assert cp.returncode == 1 and str(junk) in cp.stderr and "refused" in cp.stderr, cp.stderr


# -- pinfetch fetching a tree pin: lock key tree_sha256, cache, mirrors ----

import base64  # noqa: E402
import hashlib  # noqa: E402
import shutil  # noqa: E402

import pin_httpd as httpd  # noqa: E402


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A tree, its archive (tar.gz) and another packing of it (zip), the two pins."""
    d = tmp_path_factory.mktemp("project")
    src = trees.make_tree("mixed", d / "src" / "project-2.0")
    tgz = trees.pack(src, d / "project.tar.gz", "tar.gz", 6)
    zipped = trees.pack(src, d / "project.zip", "zip", 9, reverse=True)
    return {"src": src, "tgz": tgz.read_bytes(), "zip": zipped.read_bytes(), "tree": trees.nix_sri(src),
            "sha": hashlib.sha256(tgz.read_bytes()).hexdigest()}


def tree_hex(sri):
    return base64.b64decode(sri[len("sha256-"):]).hex()


def write_lock(path, url, sha=None, tree=None, name="proj"):
    text = f"[{name}]\nversion = 2.0\nurl = {url}\n"
    text += f"sha256 = {sha}\n" if sha else ""
    text += f"tree_sha256 = {tree}\n" if tree else ""
    path.write_text(text)
    return path


def fetch_tree(tools, work, lock, *extra, name="proj"):
    return tools.run("pinfetch", "--lock", lock, "--name", name, "--output", work / "out" / name,
                     "--cache", work / "cache", *extra)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "out").mkdir()
    return tmp_path


def assert_nothing_left(work, cache_too=True):
    assert os.listdir(work / "out") == [], os.listdir(work / "out")
    if cache_too and (work / "cache" / "tree").exists():
        assert os.listdir(work / "cache" / "tree") == []


@pytest.mark.parametrize("pins", ["tree", "both"])
def test_fetch_a_tree_pin(tools, work, project, pins):
    with httpd.Server() as s:
        s.routes["/p.tgz"] = httpd.body(project["tgz"])
        lock = write_lock(work / "p.lock", s.url("/p.tgz"), project["sha"] if pins == "both" else None,
                          project["tree"])
        cp = fetch_tree(tools, work, lock)
    assert cp.returncode == 0, cp.stderr
    out = work / "out" / "proj"
    assert out.is_dir() and (out / "run.sh").stat().st_mode & 0o100
    assert trees.nix_sri(out) == project["tree"]
    assert sorted(os.listdir(work / "out")) == ["proj"], "a temporary directory was left"
    # Cached by the tree pin, as the archive (a cache is a mirror).
    assert (work / "cache" / "tree" / tree_hex(project["tree"])).read_bytes() == project["tgz"]
    # Again, with the server gone and the output there: from the cache, replaced whole.
    (out / "stray").write_text("old")
    cp = fetch_tree(tools, work, lock, "--offline")
    assert cp.returncode == 0, cp.stderr
    assert not (out / "stray").exists() and trees.nix_sri(out) == project["tree"]
    assert sorted(os.listdir(work / "out")) == ["proj"]


def test_a_stanza_needs_a_pin(tools, work):
    lock = write_lock(work / "p.lock", "https://example.invalid/p.tgz")
    cp = fetch_tree(tools, work, lock)
    assert cp.returncode == 2 and "sha256" in cp.stderr and "tree_sha256" in cp.stderr, cp.stderr
    lock.write_text("[proj]\nversion = 1\nurl = https://example.invalid/p\ntree_sha256 = sha256-abc=\n")
    cp = fetch_tree(tools, work, lock)
    assert cp.returncode == 2 and "p.lock:4" in cp.stderr and "tree_sha256" in cp.stderr, cp.stderr


def test_every_given_pin_is_checked(tools, work, project):
    other = trees.make_tree("exec_bits", work / "other" / "project-2.0")
    with httpd.Server() as s:
        s.routes["/p.tgz"] = httpd.body(project["tgz"])
        # Right tree, wrong bytes.
        cp = fetch_tree(tools, work, write_lock(work / "a.lock", s.url("/p.tgz"), "0" * 64, project["tree"]))
        assert cp.returncode == 1 and "sha256 mismatch" in cp.stderr, cp.stderr
        assert_nothing_left(work)
        # Right bytes, wrong tree.
        cp = fetch_tree(tools, work, write_lock(work / "b.lock", s.url("/p.tgz"), project["sha"],
                                                trees.nix_sri(other)))
        assert cp.returncode == 1 and "tree_sha256 mismatch" in cp.stderr and project["tree"] in cp.stderr, cp.stderr
        assert trees.nix_sri(other) in cp.stderr
        assert_nothing_left(work)


def test_tree_mirror_with_another_packing_offline(tools, work, project):
    """A mirror holds PREFIX/tree/<hex>: any archive whose tree matches (here a
    zip, where the canonical URL serves a tar.gz)."""
    mirror = work / "mirror"
    (mirror / "tree").mkdir(parents=True)
    (mirror / "tree" / tree_hex(project["tree"])).write_bytes(project["zip"])
    lock = write_lock(work / "p.lock", "https://example.invalid/p.tgz", None, project["tree"])
    cp = fetch_tree(tools, work, lock, "--offline", "--mirror", f"file://{mirror}")
    assert cp.returncode == 0, cp.stderr
    assert trees.nix_sri(work / "out" / "proj") == project["tree"]
    # Offline without the mirror or cache: fails at once, naming it.
    shutil.rmtree(work / "cache")
    shutil.rmtree(work / "out" / "proj")
    cp = fetch_tree(tools, work, lock, "--offline")
    assert cp.returncode == 1 and "proj" in cp.stderr and "offline" in cp.stderr, cp.stderr
    assert_nothing_left(work)


def test_a_bad_mirror_falls_through_to_the_next_source(tools, work, project):
    mirror = work / "mirror"
    (mirror / "tree").mkdir(parents=True)
    evil = tar_bytes([TOP, ti("top/run.sh", data=b"#!/bin/sh\nrm -rf /\n", mode=0o755)])
    (mirror / "tree" / tree_hex(project["tree"])).write_bytes(evil)
    with httpd.Server() as s:
        s.routes["/p.tgz"] = httpd.body(project["tgz"])
        lock = write_lock(work / "p.lock", s.url("/p.tgz"), None, project["tree"])
        cp = fetch_tree(tools, work, lock, "--mirror", f"file://{mirror}")
    assert cp.returncode == 0, cp.stderr
    assert "tree_sha256 mismatch" in cp.stderr and "mirror" in cp.stderr
    assert trees.nix_sri(work / "out" / "proj") == project["tree"]


def test_corrupt_cache_entry_is_dropped(tools, work, project):
    (work / "cache" / "tree").mkdir(parents=True)
    (work / "cache" / "tree" / tree_hex(project["tree"])).write_bytes(project["tgz"][:-100])
    with httpd.Server() as s:
        s.routes["/p.tgz"] = httpd.body(project["tgz"])
        lock = write_lock(work / "p.lock", s.url("/p.tgz"), None, project["tree"])
        cp = fetch_tree(tools, work, lock)
    assert cp.returncode == 0, cp.stderr
    assert "cache" in cp.stderr and "dropped" in cp.stderr
    assert (work / "cache" / "tree" / tree_hex(project["tree"])).read_bytes() == project["tgz"]


@pytest.mark.parametrize("case", sorted(HOSTILE) + sorted(ZIP_HOSTILE))
def test_hostile_archive_fetched_is_refused_and_not_cached(tools, work, case):
    data, _, entry, why = hostile_archive(case)
    with httpd.Server() as s:
        s.routes["/h.tgz"] = httpd.body(data)
        lock = write_lock(work / "h.lock", s.url("/h.tgz"), hashlib.sha256(data).hexdigest(),
                          "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
        cp = fetch_tree(tools, work, lock)
    assert cp.returncode == 1, cp.stderr
    assert "proj" in cp.stderr and f'entry "{entry}' in cp.stderr and why in cp.stderr, cp.stderr
    assert_nothing_left(work)
    assert not pathlib.Path("/tmp/evil").exists()


def test_print_pin_prints_both_pins_for_an_archive(tools, work, project):
    with httpd.Server() as s:
        s.routes["/v2.0/p.tgz"] = httpd.body(project["tgz"])
        s.routes["/v1.0/blob"] = httpd.body(b"not an archive")
        cp = tools.run("pinfetch", "--print-pin", s.url("/v2.0/p.tgz"), "--name", "proj")
        assert cp.returncode == 0, cp.stderr
        assert f"sha256 = {project['sha']}\n" in cp.stdout and f"tree_sha256 = {project['tree']}\n" in cp.stdout
        (work / "p.lock").write_text(cp.stdout)
        blob = tools.run("pinfetch", "--print-pin", s.url("/v1.0/blob"))
        assert blob.returncode == 0 and "tree_sha256" not in blob.stdout and "sha256 = " in blob.stdout
        cp = fetch_tree(tools, work, work / "p.lock")
        assert cp.returncode == 0, cp.stderr  # the printed stanza is a valid lock
    assert trees.nix_sri(work / "out" / "proj") == project["tree"]


def test_tree_directory_fsync_failure_after_the_rename_is_a_warning(tools, work, project, tmp_path_factory):
    """As for files: once renamed, the verified tree IS in place, so a failing
    fsync of its directory is a warning that says so (tests/pin/fsync_dir_fails.c)."""
    so = tmp_path_factory.mktemp("shim") / "fsync_dir_fails.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    str(pathlib.Path(__file__).parent / "fsync_dir_fails.c"), "-ldl"], check=True)
    env = {**os.environ, "LD_PRELOAD": str(so), "ASAN_OPTIONS": "verify_asan_link_order=0"}
    with httpd.Server() as s:
        s.routes["/p.tgz"] = httpd.body(project["tgz"])
        lock = write_lock(work / "p.lock", s.url("/p.tgz"), None, project["tree"])
        cp = tools.run("pinfetch", "--lock", lock, "--name", "proj", "--output", work / "out" / "proj",
                       "--no-cache", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "in place and verified (tree_sha256" in cp.stderr and "syncing its directory failed" in cp.stderr
    assert trees.nix_sri(work / "out" / "proj") == project["tree"]
