#!/usr/bin/python3
"""What decides how the guard and envd start, recorded before a template's
build steps and checked after them (issue 37, finding 5):

    python3 -m sandbox.guard_record record ROOT UNITS_DIR OUT   the record of ROOT, to OUT (JSON)
    python3 -m sandbox.guard_record check ROOT RECORD LOG       ROOT against RECORD, which LOG vouches for

Every path is read inside ROOT (inroot.py: openat2 RESOLVE_IN_ROOT), never
followed out of it. The record holds, each under the rule it belongs to:

  guard       the guard's, envd's and the relays' files (usr/bin, etc/e2b)
  units       every entry, at any depth of every systemd unit path, named
              for one of our units (units/: a unit file, a mask, its drop-in
              directory) or a drop-in for all units of a type or prefix
              (service.d, envd-.service.d); .wants/.requires links are
              the enablement, checked on their own
  generators  everything in the generator directories
  presets     everything in the preset directories
  manager     systemd's own configuration (system.conf and its drop-ins)
  linker      ld.so.preload, ld.so.conf and ld.so.conf.d
  nss         nsswitch.conf (glibc loads a libnss_X.so.2 for each service it
              names, PID 1 included)
  libraries   every file that could serve a library of the guard's, envd's
              relays', systemd's or nft's: their ELF closure by DT_NEEDED
              (read with binutils' readelf), the sonames their .note.dlopen
              notes name (systemd's dlopen()ed libkmod, libbpf, ...), the NSS
              modules, and those libraries' own closures; each name in every
              directory the loader searches and in each directory's
              glibc-hwcaps/x86-64-v2, -v3 and -v4 (the loader picks by the
              CPU it runs on, so every level counts), so a copy planted
              earlier in its path counts
  cache       what etc/ld.so.cache maps each of those names to (its paths,
              flags and hwcaps), parsed by sandbox/loader.py: a cache that
              sends a name elsewhere, or that the parser cannot vouch for

`record` runs in template.postinst before the first build step, which then
prints the record's sha256 on the build log ("e2b-guard-record: sha256=…").
`check` runs on the host after mkosi, outside the build's reach: LOG (the
raw build log, kept outside the sandbox) must carry exactly one such line,
and it must be RECORD's hash, so a build step can neither rewrite the
record nor forge a line of its own.
"""
import hashlib
import json
import os
import re
import stat
import subprocess
import sys

from sandbox import inroot, loader
from sandbox.termsafe import escape

LOG_PREFIX = "e2b-guard-record: sha256="
GUARD_FILES = ("usr/bin/envd", "usr/bin/envd-guard", "usr/bin/vsock-relay",
               "usr/bin/mmds-serve", "usr/bin/e2b-clone", "etc/envd-version", "etc/e2b")
# systemd's system unit path (systemd.unit(5)), /lib too for a split /usr.
UNIT_DIRS = ("etc/systemd/system.control", "run/systemd/system.control", "run/systemd/transient",
             "run/systemd/generator.early", "etc/systemd/system", "etc/systemd/system.attached",
             "run/systemd/system", "run/systemd/system.attached", "run/systemd/generator",
             "usr/local/lib/systemd/system", "usr/lib/systemd/system", "lib/systemd/system",
             "run/systemd/generator.late")
PREFIXES = ("etc/systemd", "run/systemd", "usr/local/lib/systemd", "usr/lib/systemd", "lib/systemd")
GENERATOR_DIRS = tuple(f"{p}/{g}" for p in PREFIXES for g in ("system-generators", "system-environment-generators"))
PRESET_DIRS = tuple(f"{p}/system-preset" for p in PREFIXES)
MANAGER = ("etc/systemd/system.conf",) + tuple(f"{p}/system.conf.d" for p in PREFIXES)
LINKER = ("etc/ld.so.preload", "etc/ld.so.conf", "etc/ld.so.conf.d")
NSS = ("etc/nsswitch.conf",)
LD_CACHE = "etc/ld.so.cache"
UNIT_TYPES = ("service", "socket", "target", "device", "mount", "automount", "swap", "path", "timer",
              "slice", "scope")
ENABLEMENT = (".wants", ".requires", ".upholds")
# The programs whose libraries count: ours, and the manager that starts them.
ELF_ROOTS = ("usr/bin/envd-guard", "usr/bin/vsock-relay", "usr/bin/mmds-serve",
             "usr/bin/e2b-clone", "usr/lib/systemd/systemd", "usr/sbin/nft")
TRUSTED_LIB_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib",
                    "usr/local/lib", "usr/local/lib/x86_64-linux-gnu")
# systemd's own libraries (its RUNPATH).
PRIVATE_LIB_DIRS = ("usr/lib/x86_64-linux-gnu/systemd", "lib/x86_64-linux-gnu/systemd")
# Where glibc (2.33 on) looks first in each directory it searches, by CPU level.
HWCAPS = ("", "/glibc-hwcaps/x86-64-v2", "/glibc-hwcaps/x86-64-v3", "/glibc-hwcaps/x86-64-v4")
# What the build machine reads of an image file at most: the record, a
# file's bytes (a larger one is described by its size, unread), a cache.
RECORD_MAX = 16 << 20
FILE_MAX = 256 << 20


class CheckFailed(Exception):
    pass


def describe(rootfd, path):
    """One entry, not followed if a link: its kind, mode, owner, bytes' hash or target."""
    parent, name = inroot.split(path)
    try:
        dfd = inroot.open_in(rootfd, parent, os.O_PATH | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        own = f"{stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid}"
        if stat.S_ISLNK(st.st_mode):
            return f"link {os.readlink(name, dir_fd=dfd)}"
        if stat.S_ISDIR(st.st_mode):
            return f"dir {own}"
        if stat.S_ISREG(st.st_mode):
            if st.st_size > FILE_MAX:
                return f"file {own} size:{st.st_size} (over {FILE_MAX} bytes: not read)"
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            return f"file {own} {sha256_of(fd)}"
        return f"special {stat.S_IFMT(st.st_mode):o} {own}"
    finally:
        os.close(dfd)


def sha256_of(fd):
    """sha256:HEX of the regular file FD (closed here), at most FILE_MAX bytes."""
    h, n = hashlib.sha256(), 0
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        while (chunk := f.read(1 << 20)) and n <= FILE_MAX:
            h.update(chunk)
            n += len(chunk)
    return f"sha256:{h.hexdigest()}" if n <= FILE_MAX else f"over {FILE_MAX} bytes: not read"


def walk(rootfd, top, keep=lambda rel, name: True):
    """TOP (in ROOT) and, if a directory (not through a link), everything
    under it that KEEP(path, name) admits; a kept directory keeps all below."""
    out = {}
    d = describe(rootfd, top)
    if d is None:
        return out
    out[top] = d
    if not d.startswith("dir "):
        return out
    fd = inroot.open_dir(rootfd, top, missing_ok=True)
    if fd is None:
        return out
    try:
        names = sorted(os.listdir(fd))
    finally:
        os.close(fd)
    for name in names:
        rel = f"{top}/{name}"
        below = walk(rootfd, rel) if keep(rel, name) else walk(rootfd, rel, keep)
        if not keep(rel, name):
            below.pop(rel, None)
        out.update(below)
    return out


def unit_matcher(units):
    exact, instances, prefixes = set(), set(), set()
    for u in units:
        base, _, kind = u.rpartition(".")
        if base.endswith("@"):
            instances.add((base, kind))
        exact.add(u)
        # A prefix drop-in (foo-.service.d) applies to every unit named foo-….
        parts = base.split("-")
        for i in range(1, len(parts)):
            prefixes.add("-".join(parts[:i]) + "-." + kind)

    def ours(name):
        n = name[:-2] if name.endswith(".d") else name
        if n in exact or (name.endswith(".d") and (n in UNIT_TYPES or n in prefixes)):
            return True
        base, _, kind = n.rpartition(".")
        return any(base.startswith(i) and kind == k for i, k in instances)

    def keep(rel, name):
        parent = rel.rsplit("/", 2)[-2]
        return ours(name) and not parent.endswith(ENABLEMENT)
    return keep


def search_dirs(rootfd, runpaths=()):
    dirs = list(runpaths)
    fd = inroot.open_dir(rootfd, "etc/ld.so.conf.d", missing_ok=True)
    confs = []
    if fd is not None:
        try:
            confs = sorted(n for n in os.listdir(fd) if n.endswith(".conf"))
        finally:
            os.close(fd)
    for c in confs:
        try:
            text = inroot.read(rootfd, f"etc/ld.so.conf.d/{c}", 1 << 16).decode(errors="replace")
        except OSError:
            continue
        dirs += [ln.strip().strip("/") for ln in text.splitlines() if ln.strip().startswith("/")]
    dirs += TRUSTED_LIB_DIRS
    return list(dict.fromkeys(d for d in dirs if d))


def elf_info(rootfd, path):
    """(NEEDED names, RUNPATH dirs, interpreter, dlopen sonames) of the ELF
    file PATH in ROOT (a regular file, or nothing is read)."""
    try:
        fd = inroot.open_regular(rootfd, path)
    except OSError:
        return [], [], None, []
    try:
        cp = subprocess.run(["readelf", "-d", "-l", "-W", f"/proc/self/fd/{fd}"], pass_fds=(fd,),
                            capture_output=True, text=True, errors="replace", check=False)
        try:
            dlopened = loader.dlopen_sonames(lambda n, off: os.pread(fd, n, off))
        except OSError:
            dlopened = []
    finally:
        os.close(fd)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]/]+)\]", cp.stdout)
    runpath = [d.strip("/") for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]",
                                                cp.stdout) for d in m.split(":") if d.startswith("/")]
    interp = re.search(r"Requesting program interpreter: (/[^\]]+)\]", cp.stdout)
    return needed, runpath, interp.group(1).strip("/") if interp else None, dlopened


def candidates(rootfd, name, dirs):
    """Every path the loader could take NAME from: each directory, and its
    glibc-hwcaps levels before it."""
    return [p for d in dirs for h in HWCAPS if describe(rootfd, p := f"{d}{h}/{name}") is not None]


def nss_names(rootfd):
    try:
        text = inroot.read_regular(rootfd, NSS[0], 1 << 20).decode("utf-8", "replace")
    except OSError:
        return []
    return loader.nss_modules(text)


def closure(rootfd):
    """Library names the ELF roots load (by DT_NEEDED and dlopen(), and
    PID 1's NSS modules), transitively, and the loaders."""
    names, loaders, seen = set(), set(), set()
    todo = list(ELF_ROOTS)
    for n in nss_names(rootfd):
        names.add(n)
        todo += candidates(rootfd, n, search_dirs(rootfd))
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        needed, runpath, interp, dlopened = elf_info(rootfd, path)
        if interp:
            loaders.add(interp)
        for n in needed:
            names.add(n)
            todo += candidates(rootfd, n, search_dirs(rootfd, runpath))
        # A library PID 1 or nft may dlopen() counts where the image has it
        # when the record is made: every copy of it, an earlier one planted
        # in the loader's path included. One the flavor lacks is the
        # template's to install (gnupg's libgcrypt20, openssh-client's
        # libfido2-1), as any package: a template owns its image, and a
        # service of its own as root could change the firewall anyway.
        for n in dlopened:
            found = candidates(rootfd, n, search_dirs(rootfd, runpath))
            if found:
                names.add(n)
                todo += found
    return sorted(names), sorted(loaders)


def library_entries(rootfd, names, loaders):
    out = {}
    dirs = search_dirs(rootfd) + list(PRIVATE_LIB_DIRS)
    for n in names:
        for p in candidates(rootfd, n, dirs):
            desc = describe(rootfd, p)
            out[p] = desc
            if desc.startswith("link "):
                out[f"{p} (its target's bytes)"] = bytes_through(rootfd, p)
    for lo in loaders:
        out[lo] = describe(rootfd, lo) or "missing"
        out[f"{lo} (its target's bytes)"] = bytes_through(rootfd, lo)
    return out


def bytes_through(rootfd, path):
    """The sha256 of what PATH leads to (its links resolved inside ROOT)."""
    try:
        return sha256_of(inroot.open_regular(rootfd, path))
    except OSError:
        return "missing"


def cache_entries(rootfd, names):
    """{etc/ld.so.cache NAME: what the cache maps NAME to} for every name."""
    try:
        data = inroot.read_regular(rootfd, LD_CACHE, loader.CACHE_MAX)
        mapped = loader.cache_view(data, names)
    except (OSError, loader.LoaderError) as e:
        return {LD_CACHE: f"unreadable: {e.strerror if isinstance(e, OSError) else e}"}
    return {f"{LD_CACHE} {n}": v for n, v in sorted(mapped.items())}


def view(rootfd, units, names, loaders):
    """{rule: {path: description}} of everything the record covers."""
    v = {"guard": {}, "units": {}, "generators": {}, "presets": {}, "manager": {}, "linker": {}, "nss": {}}
    for p in GUARD_FILES:
        v["guard"].update(walk(rootfd, p))
    keep = unit_matcher(units)
    for d in UNIT_DIRS:
        v["units"].update({k: x for k, x in walk(rootfd, d, keep).items() if k != d})
    for rule, paths in (("generators", GENERATOR_DIRS), ("presets", PRESET_DIRS), ("manager", MANAGER),
                        ("linker", LINKER), ("nss", NSS)):
        for p in paths:
            v[rule].update(walk(rootfd, p))
    v["libraries"] = library_entries(rootfd, names, loaders)
    v["cache"] = cache_entries(rootfd, names)
    return v


def our_units(units_dir):
    return sorted(n for n in os.listdir(units_dir) if n.rpartition(".")[2] in UNIT_TYPES)


def record(rootfd, units_dir, out):
    units = our_units(units_dir)
    names, loaders = closure(rootfd)
    data = {"units": units, "libraries": names, "loaders": loaders, "view": view(rootfd, units, names, loaders)}
    text = json.dumps(data, sort_keys=True, indent=1) + "\n"
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return hashlib.sha256(text.encode()).hexdigest()


def vouched(record_path, log_path):
    """The record, if the log carries exactly one record line, naming its
    hash. The record lies where the build could write: it is read only if
    it is a regular file (not through a link, not a fifo) of at most
    RECORD_MAX bytes."""
    lines = []
    with open(log_path, "rb") as f:
        for ln in f:
            if ln.startswith(LOG_PREFIX.encode()):
                lines.append(ln.rstrip(b"\n"))
    if len(lines) != 1:
        raise CheckFailed(f"the build log has {len(lines)} guard record lines, not one: a build step printed "
                          "one of its own, or the record was never made")
    try:
        fd = os.open(record_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise CheckFailed(f"the guard record {record_path}: {e.strerror} (a build step removed it, or put a "
                          "link in its place?)") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CheckFailed(f"the guard record {record_path} is not a regular file: a build step replaced it")
        raw = f.read(RECORD_MAX + 1)
    if len(raw) > RECORD_MAX:
        raise CheckFailed(f"the guard record {record_path} is larger than {RECORD_MAX} bytes: a build step "
                          "rewrote it")
    if hashlib.sha256(raw).hexdigest() != lines[0][len(LOG_PREFIX):].decode(errors="replace").strip():
        raise CheckFailed("the guard record was changed after it was made (its hash is not the one on the "
                          "build log): a build step rewrote it")
    return json.loads(raw)


def check(rootfd, record_path, log_path):
    rec = vouched(record_path, log_path)
    now = view(rootfd, rec["units"], rec["libraries"], rec["loaders"])
    bad = []
    for rule, was in rec["view"].items():
        cur = now.get(rule, {})
        for p in sorted(set(was) | set(cur)):
            if was.get(p) != cur.get(p):
                what = "added" if p not in was else "removed" if p not in cur else "changed"
                bad.append(f"{rule}: /{p} {what}")
    fd = inroot.open_dir(rootfd, "etc/systemd/system", missing_ok=True)
    wants = []
    if fd is not None:
        try:
            wants = [n for n in os.listdir(fd) if n.endswith(".wants")]
        finally:
            os.close(fd)
    for u in ("envd-guard.service", "envd.service"):
        if not any(describe(rootfd, f"etc/systemd/system/{w}/{u}") for w in wants):
            bad.append(f"units: {u} is no longer enabled")
    return bad


def main(argv):
    if len(argv) != 4 or argv[0] not in ("record", "check"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    op, root = argv[0], argv[1]
    rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if op == "record":
            print(f"\n{LOG_PREFIX}{record(rootfd, argv[2], argv[3])}", file=sys.stderr, flush=True)
            return 0
        bad = check(rootfd, argv[2], argv[3])
    except CheckFailed as e:
        print(escape(f"template: {e}; the guard is not a template's to change"), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"guard_record: {op} {root}: {escape(str(e.filename or ''))}: {e.strerror}", file=sys.stderr)
        return 1
    finally:
        os.close(rootfd)
    if bad:
        print("template: the template changed what decides how the guard or envd start, which is not a "
              "template's to change:", file=sys.stderr)
        for b in bad:
            print(f"template:   {escape(b)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
