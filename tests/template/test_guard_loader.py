"""The guard record follows the dynamic loader (issue 49, finding 5): besides
each library's name in every directory the loader searches, its copies in
those directories' glibc-hwcaps levels, what etc/ld.so.cache maps it to,
the sonames an ELF's .note.dlopen names, and the NSS modules and
nsswitch.conf that PID 1 loads through. And the host reads the record only
as a regular file (finding 10).

On fake roots made here from real parts: the build machine's own nft and
its libraries (nft is one of the record's ELF roots), the machine's glibc
`ldconfig -r` making the cache, binutils' objcopy adding a .note.dlopen,
and sandbox/guard_record.py record and check run as template.postinst and
build.sh run them. The same rules in a real template build:
tests/template/test_template_build.py."""
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import testimages  # noqa: E402
from sandbox import loader  # noqa: E402

ROOT = testimages.ROOT
LIBDIR = "usr/lib/x86_64-linux-gnu"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def guard(*args, timeout=60):
    return subprocess.run(["/usr/bin/python3", "-m", "sandbox.guard_record", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=timeout)


def ldconfig(root: pathlib.Path, *args):
    cp = subprocess.run(["/sbin/ldconfig", "-r", str(root), *args], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr


@pytest.fixture
def root(tmp_path):
    """nft, its libraries and its loader, an ld.so.conf, an nsswitch.conf,
    and the cache the machine's ldconfig makes of them."""
    r = tmp_path / "root"
    (r / "usr/sbin").mkdir(parents=True)
    (r / LIBDIR).mkdir(parents=True)
    (r / "lib64").mkdir()
    (r / "etc/ld.so.conf.d").mkdir(parents=True)
    shutil.copy("/usr/sbin/nft", r / "usr/sbin/nft")
    ldd = subprocess.run(["ldd", "/usr/sbin/nft"], capture_output=True, text=True, check=True).stdout
    for lib in re.findall(r"=> (/\S+)", ldd):
        shutil.copy(lib, r / LIBDIR / os.path.basename(lib))
    shutil.copy(os.path.realpath("/lib64/ld-linux-x86-64.so.2"), r / "lib64/ld-linux-x86-64.so.2")
    (r / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    # The guard and envd enabled, as in every image (the check wants them so).
    for wants, unit in (("sysinit.target.wants", "envd-guard.service"), ("multi-user.target.wants", "envd.service")):
        (r / "etc/systemd/system" / wants).mkdir(parents=True)
        (r / "etc/systemd/system" / wants / unit).symlink_to(f"/usr/lib/systemd/system/{unit}")
    (r / "etc/nsswitch.conf").write_text("passwd: files systemd\ngroup: files [NOTFOUND=return] systemd\n"
                                         "hosts: files dns\n")
    ldconfig(r)
    return r


def record(root: pathlib.Path, tmp: pathlib.Path):
    """The record and a build log carrying its one line, as template.postinst makes them."""
    rec = tmp / "record.json"
    cp = guard("record", root, ROOT / "units", rec)
    assert cp.returncode == 0, cp.stderr
    log = tmp / "build.log"
    log.write_text("mkosi's output\n" + cp.stderr)
    return rec, log


def refused(root, rec, log) -> list:
    """check's named differences (none when it passes)."""
    cp = guard("check", root, rec, log)
    lines = [ln[len("template:   "):] for ln in cp.stderr.splitlines() if ln.startswith("template:   ")]
    assert (cp.returncode == 0) == (not lines and not cp.stderr), cp.stderr
    return lines


def test_an_unchanged_root_passes_and_the_record_has_the_loaders_view(root, tmp_path):
    rec, log = record(root, tmp_path)
    assert refused(root, rec, log) == []
    r = json.loads(rec.read_text())
    assert {"libnftnl.so.11", "libnftables.so.1", "libnss_systemd.so.2"} <= set(r["libraries"])
    assert r["view"]["cache"][f"etc/ld.so.cache libnftnl.so.11"] == \
        f"/{LIBDIR}/libnftnl.so.11 flags=0x303 hwcap=0x0"
    assert r["view"]["cache"]["etc/ld.so.cache libnss_systemd.so.2"] == "none"


def test_a_copy_in_any_glibc_hwcaps_level_is_named(root, tmp_path):
    """The loader takes glibc-hwcaps/x86-64-vN/ first on a CPU of that
    level, whichever CPU the build host has: every level counts."""
    rec, log = record(root, tmp_path)
    for level in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        (root / LIBDIR / "glibc-hwcaps" / level).mkdir(parents=True)
        shutil.copy(root / LIBDIR / "libnftnl.so.11", root / LIBDIR / "glibc-hwcaps" / level)
    ldconfig(root)
    got = refused(root, rec, log)
    for level in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        assert f"libraries: /{LIBDIR}/glibc-hwcaps/{level}/libnftnl.so.11 added" in got, got
    assert "cache: /etc/ld.so.cache libnftnl.so.11 changed" in got, got


def test_a_cache_that_sends_a_name_elsewhere_is_named(root, tmp_path):
    """The loader believes the cache: one made with a directory that
    ld.so.conf does not name (as a replaced ldconfig could write it) maps
    libnftnl.so.11 to /opt/evil first. No file the record watches changed."""
    rec, log = record(root, tmp_path)
    (root / "opt/evil").mkdir(parents=True)
    shutil.copy(root / LIBDIR / "libnftnl.so.11", root / "opt/evil")
    (root / "etc/evil.conf").write_text("/opt/evil\n")
    ldconfig(root, "-f", "/etc/evil.conf")
    assert loader.cache_view((root / "etc/ld.so.cache").read_bytes(), ["libnftnl.so.11"])["libnftnl.so.11"] \
        .startswith("/opt/evil/libnftnl.so.11 ")
    assert refused(root, rec, log) == ["cache: /etc/ld.so.cache libnftnl.so.11 changed"]


def test_the_parser_reads_what_ldconfig_wrote(root):
    """parse_cache against glibc's own reading of the same file (ldconfig
    -p), with a glibc-hwcaps entry in it."""
    (root / LIBDIR / "glibc-hwcaps/x86-64-v3").mkdir(parents=True)
    shutil.copy(root / LIBDIR / "libnftnl.so.11", root / LIBDIR / "glibc-hwcaps/x86-64-v3")
    ldconfig(root)
    cache = root / "etc/ld.so.cache"
    listed = subprocess.run(["/sbin/ldconfig", "-p", "-C", str(cache)], capture_output=True, text=True,
                            check=True).stdout
    theirs = re.findall(r"^\t(\S+) \(([^)]*)\) => (\S+)$", listed, re.M)
    ours = loader.parse_cache(cache.read_bytes())
    assert [(n, p) for n, _, p in theirs] == [(n, p) for n, p, *_ in ours]
    assert [('hwcap: "x86-64-v3"' in f) for _, f, _ in theirs] == [sub == "x86-64-v3" for *_, sub in ours]
    assert any(sub == "x86-64-v3" for *_, sub in ours)


def hostile_caches(good: bytes) -> dict:
    nlibs = struct.unpack_from("<I", good, 20)[0]
    big_count = bytearray(good)
    struct.pack_into("<I", big_count, 20, 0xFFFFFFFF)
    far_key = bytearray(good)
    struct.pack_into("<I", far_key, 48 + 4, len(good) + 100)
    # Cut inside the last name or path an entry points at, and no NUL after it.
    last = max(max(struct.unpack_from("<II", good, 48 + 24 * i + 4)) for i in range(nlibs))
    no_nul = good[:last + 2] + b"x" * 5000
    far_ext = bytearray(good)
    struct.pack_into("<I", far_ext, 32, len(good) + 8)
    swapped = bytearray(good)
    end = 48 + 24 * (nlibs - 1)
    swapped[48:72], swapped[end:end + 24] = good[end:end + 24], good[48:72]
    return {
        "garbage": b"\x00\xff" * 1000,
        "truncated header": good[:30],
        "truncated entries": good[:48 + 24 * (nlibs // 2)],
        "a count beyond the file": bytes(big_count),
        "a name offset beyond the file": bytes(far_key),
        "strings without an end": no_nul,
        "an extension beyond the file": bytes(far_ext),
        "entries out of the loader's order": bytes(swapped),
        "old format only": b"ld.so-1.7.0\x00" + struct.pack("<I", 0),
    }


def test_a_malformed_cache_is_refused_not_crashed(root, tmp_path):
    """A hostile cache never crashes or holds the check: every one is an
    error of the parser's own, and the check names the cache."""
    rec, log = record(root, tmp_path)
    cache = root / "etc/ld.so.cache"
    good = cache.read_bytes()
    assert len(loader.parse_cache(good)) >= 2
    for what, data in hostile_caches(good).items():
        with pytest.raises(loader.LoaderError):
            loader.parse_cache(data)
        cache.write_bytes(data)
        got = refused(root, rec, log)
        assert "cache: /etc/ld.so.cache added" in got and "cache: /etc/ld.so.cache libnftnl.so.11 removed" in got, \
            (what, got)
    # Not a regular file: a fifo (no writer: an open would wait), a link to /dev/zero (endless), a
    # directory. Each read inside the root, none blocking.
    for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero"), os.mkdir):
        cache.unlink()
        make(cache)
        got = refused(root, rec, log)
        assert "cache: /etc/ld.so.cache added" in got, got


def test_nsswitch_and_its_modules_count(root, tmp_path):
    """glibc loads libnss_X.so.2 for each service nsswitch.conf names, in
    PID 1 too (User= is an NSS lookup): a service added, or a module
    planted earlier on the loader's path, is named."""
    rec, log = record(root, tmp_path)
    (root / "usr/local/lib").mkdir(parents=True)
    shutil.copy(root / LIBDIR / "libnftnl.so.11", root / "usr/local/lib/libnss_systemd.so.2")
    with open(root / "etc/nsswitch.conf", "a") as f:
        f.write("shadow: files evil\n")
    got = refused(root, rec, log)
    assert "nss: /etc/nsswitch.conf changed" in got, got
    assert "libraries: /usr/local/lib/libnss_systemd.so.2 added" in got, got


def dlopen_note(sonames: list) -> bytes:
    """A .note.dlopen as systemd writes it (owner FDO, type 0x407c0c0a, a JSON array)."""
    desc = json.dumps([{"feature": "test", "description": "a test", "priority": "suggested",
                        "soname": sonames}]).encode() + b"\0"
    desc += b"\0" * (-len(desc) % 4)
    return struct.pack("<III", 4, len(desc), loader.NOTE_DLOPEN) + b"FDO\0" + desc


def test_a_library_named_by_a_dlopen_note_counts(root, tmp_path):
    """systemd dlopen()s libkmod, libbpf and more, named in .note.dlopen
    notes of its libraries: a library in the closure with such a note (here
    nft's libnftnl, given one with objcopy) brings the names it lists, and
    their own closures, into the record."""
    note = tmp_path / "note.bin"
    note.write_bytes(dlopen_note(["libkmod.so.2"]))
    lib = root / LIBDIR / "libnftnl.so.11"
    cp = subprocess.run(["objcopy", "--add-section", f".note.dlopen={note}", "--set-section-flags",
                         ".note.dlopen=alloc,readonly,contents", str(lib), str(tmp_path / "noted.so")],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    shutil.copy(tmp_path / "noted.so", lib)
    # The machine's own libkmod, and what it needs that nft does not (libzstd among them).
    for name in ("libkmod.so.2", "libzstd.so.1", "liblzma.so.5", "libcrypto.so.3"):
        shutil.copy(f"/lib/x86_64-linux-gnu/{name}", root / LIBDIR / name)
    ldconfig(root)
    rec, log = record(root, tmp_path)
    assert {"libkmod.so.2", "libzstd.so.1"} <= set(json.loads(rec.read_text())["libraries"])
    shutil.copy(root / LIBDIR / "libzstd.so.1", root / LIBDIR / "libkmod.so.2")
    (root / "usr/local/lib").mkdir(parents=True)
    shutil.copy(root / LIBDIR / "libzstd.so.1", root / "usr/local/lib/libzstd.so.1")
    got = refused(root, rec, log)
    assert f"libraries: /{LIBDIR}/libkmod.so.2 changed" in got, got
    assert "libraries: /usr/local/lib/libzstd.so.1 added" in got, got


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
def test_the_record_is_read_only_as_a_regular_file(root, tmp_path, kind):
    """The record lies in mkosi's output, which a build step can write: a
    link there to /dev/zero (read without end) or a fifo (an open waits
    for a writer) is refused at once, naming the record."""
    rec, log = record(root, tmp_path)
    rec.unlink()
    if kind == "fifo":
        os.mkfifo(rec)
    else:
        rec.symlink_to("/dev/zero")
    cp = guard("check", root, rec, log, timeout=30)
    assert cp.returncode == 1 and f"the guard record {rec}" in cp.stderr, cp.stderr
