"""Test trees for the tree pin (NAR hash) tests, and ways to pack them.
Nothing here computes a NAR hash: Nix's own tools are the reference."""
import os
import pathlib
import random
import shutil
import subprocess

NIX = ["nix", "--extra-experimental-features", "nix-command"]


def nix_sri(path) -> str:
    """`nix hash path`: the SRI form, as a lock's tree_sha256 carries it."""
    return subprocess.run([*NIX, "hash", "path", "--type", "sha256", str(path)],
                          capture_output=True, text=True, check=True).stdout.strip()


def nix_hex(path) -> str:
    return subprocess.run(["nix-hash", "--type", "sha256", str(path)],
                          capture_output=True, text=True, check=True).stdout.strip()


def have_nix() -> bool:
    return shutil.which("nix-hash") is not None and shutil.which("nix") is not None


def write(path: pathlib.Path, data: bytes, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


def tree_exec_bits(root):
    write(root / "run.sh", b"#!/bin/sh\necho hi\n", 0o755)
    write(root / "owner-only-x", b"x", 0o700)
    write(root / "group-x-only", b"x", 0o654)  # no owner x: not executable to Nix
    write(root / "plain", b"plain\n")


def tree_symlinks(root):
    write(root / "target", b"t")
    (root / "sub").mkdir()
    os.symlink("target", root / "rel")
    os.symlink("../target", root / "sub" / "up")
    os.symlink("/etc/passwd", root / "abs")
    os.symlink("does/not/exist", root / "dangling")
    os.symlink("sub", root / "dirlink")


def tree_empty_dirs(root):
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "e").mkdir()
    write(root / "a" / "f", b"")


def tree_deep(root):
    p = root
    for i in range(60):
        p = p / f"d{i}"
    write(p / "leaf", b"deep")


def tree_names(root):
    # Byte order and locale order disagree: "B" < "a" < "b" < "Ä" < "é" bytewise.
    for name in ["a", "B", "b", "Ä", "é", "z", "Z", "_x", "-y", "a.b", "a-b", "a b", "日本語", "ﬁ", "a.b.c",
                 "\u00e9", "e\u0301"]:
        write(root / name, name.encode())
    (root / "a-dir").mkdir()
    write(root / "a-dir" / "x", b"1")
    (root / "a.dir").mkdir()
    write(root / "a.dir" / "x", b"2")


def tree_sizes(root):
    write(root / "empty", b"")
    for n in (1, 7, 8, 9, 4095, 4096, 4097, 131071, 131072, 131073):
        write(root / f"size-{n}", bytes(range(256)) * (n // 256) + bytes(n % 256))
    rnd = random.Random(11)
    write(root / "large", rnd.randbytes(9 * 1024 * 1024 + 3))


def tree_mixed(root):
    """One of everything, for the packing tests."""
    tree_exec_bits(root)
    tree_symlinks(root / "links")
    tree_empty_dirs(root / "dirs")
    for name in ["a", "B", "Ä", "é", "日本語"]:
        write(root / "names" / name, name.encode())
    write(root / "blob", random.Random(5).randbytes(300000))


def tree_nar_vs_git(root):
    """Names that git (and a sort of whole paths) orders differently from NAR:
    git puts "foo/" after "foo.txt" and "foo-bar", NAR puts "foo" first."""
    write(root / "foo" / "x", b"in foo")
    write(root / "foo" / "sub" / "y", b"deeper", 0o755)
    write(root / "foo.txt", b"foo.txt")
    write(root / "foo-bar", b"")
    os.symlink("foo/x", root / "foo.link")
    (root / "foo0").mkdir()


TREES = {
    "exec_bits": tree_exec_bits, "nar_vs_git": tree_nar_vs_git, "symlinks": tree_symlinks, "empty_dirs": tree_empty_dirs,
    "deep": tree_deep, "names": tree_names, "sizes": tree_sizes, "mixed": tree_mixed,
    "empty_root": lambda root: None,
}


def make_tree(kind: str, root: pathlib.Path) -> pathlib.Path:
    root.mkdir(parents=True)
    TREES[kind](root)
    return root


def entries(src: pathlib.Path, reverse=False):
    """Every path under src (relative, with src's name as the top), in byte
    order or reversed: two entry orders for the same tree."""
    out = [src.name]
    for dirpath, dirnames, filenames in os.walk(src):
        rel = pathlib.Path(dirpath).relative_to(src.parent)
        out += [str(rel / n) for n in dirnames + filenames]
    return sorted(out, key=os.fsencode, reverse=reverse)


def nar_order(src: pathlib.Path):
    """Every path under src in NAR order: each directory's names sorted by
    bytes, a directory's contents right after it."""
    out = [src.name]

    def walk(d: pathlib.Path):
        for name in sorted(os.listdir(d), key=os.fsencode):
            p = d / name
            out.append(str(p.relative_to(src.parent)))
            if p.is_dir() and not p.is_symlink():
                walk(p)
    walk(src)
    return out


def pack_forge(src: pathlib.Path, archive: pathlib.Path) -> pathlib.Path:
    """A tar.gz as forges serve them: GNU tar's own name sort (`--sort=name`)."""
    subprocess.run(["tar", "--sort=name", "-czf", str(archive), src.name], cwd=src.parent, check=True)
    return archive


def pack(src: pathlib.Path, archive: pathlib.Path, kind: str, level: int, reverse=False, names=None) -> pathlib.Path:
    """Packs src (as the archive's single top-level directory) with real tools,
    its entries in byte order of whole paths, reversed, or in the order given."""
    names = names or entries(src, reverse)
    listing = archive.with_suffix(".list")
    listing.write_bytes(b"\0".join(map(os.fsencode, names)) + b"\0")
    env = dict(os.environ, GZIP=f"-{level}", XZ_OPT=f"-{level}")
    if kind == "zip":
        # zip -y stores symlinks as symlinks; -D would drop directory entries.
        subprocess.run(["zip", "-q", "-y", f"-{level}", "-@", str(archive)], cwd=src.parent, check=True,
                       input=b"\n".join(map(os.fsencode, names)) + b"\n", env=env)
    else:
        flag = {"tar.gz": "-z", "tar.xz": "-J", "tar": None}[kind]
        cmd = ["tar", "-c", "--no-recursion", "--null", "-T", str(listing), "-f", str(archive)]
        if flag:
            cmd.insert(1, flag)
        subprocess.run(cmd, cwd=src.parent, check=True, env=env)
    listing.unlink()
    return archive
