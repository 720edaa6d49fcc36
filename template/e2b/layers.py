#!/usr/bin/python3
"""The step cache's half inside the build (template/README.md, "The step
cache"): template/e2b/steps.py, in mkosi's postinst sandbox, records what
each step changed in the image as a layer, and restores the layers the host
found for this template's steps instead of running them again.

A layer, NNNN for the step at position NNNN (from 1, across a fromTemplate
chain):
  NNNN.tar   what the step made or changed (paths, owners, modes, xattrs),
             written by the image's own tar through mkosi-chroot, so a path
             resolves inside the image whatever a step left in it
  NNNN.json  {"version", "base", "ctx", "removed"}: the digest of the image
             before the first step, the context after this step (user,
             workdir, ENVs), the paths it removed

The sandbox decides nothing about the cache. The keys are the host's
(template/e2b/step_cache.py, from the staged steps and files); a layer is
kept only when the build log has exactly one line for it,
`e2b-step-cache: step NNNN tar=SHA256 meta=SHA256`, and the files match it.
A layer is used only when the image before the first step has the digest it
was made on. When a layer cannot be recorded, nothing is recorded from that
step on, and the log says so (`e2b-step-cache: recording stopped at step
NNNN`), so no line a later step prints keeps a layer of its own.
"""
import hashlib
import json
import os
import stat
import subprocess
import sys
import threading

VERSION = 1
# Staged inputs of the build (a COPY's files, steps.json), not the image;
# mkosi-chroot's mount point for the build sources.
NOT_IMAGE = ("usr/lib/e2b-template-build", "work")
# What differs between two builds of the same base for reasons that do not
# change what a step sees: logs, caches, scratch space, the machine id.
VOLATILE = ("var/log", "var/cache/ldconfig", "tmp", "var/tmp", "var/lib/dbus/machine-id", "run")
STOPPED_LINE = "e2b-step-cache: recording stopped at step "
TAR_META = ["--numeric-owner", "--format=posix", "--pax-option=delete=atime,delete=ctime",
            "--xattrs", "--xattrs-include=*"]


class LayerError(Exception):
    pass


def walk(root: str, skip: tuple) -> dict:
    """Every path under root (relative, not following links, not crossing
    into another file system) and its lstat."""
    out = {}
    dev = os.lstat(root).st_dev
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            for e in it:
                p = f"{rel}/{e.name}" if rel else e.name
                if p in skip:
                    continue
                st = e.stat(follow_symlinks=False)
                out[p] = st
                if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                    stack.append(p)
    return out


def content_digest(root: str, entries: dict) -> str:
    """ENTRIES' (walk()'s, relative to root; "." is root itself) names,
    types, modes, owners, link targets and bytes."""
    h = hashlib.sha256()
    for p, st in sorted(entries.items()):
        h.update(f"{p!r} {st.st_mode:o} {st.st_uid} {st.st_gid}".encode())
        full = root if p == "." else os.path.join(root, p)
        if stat.S_ISLNK(st.st_mode):
            h.update(b" -> " + os.fsencode(os.readlink(full)))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as f:
                h.update(b" " + hashlib.file_digest(f, "sha256").digest())
        h.update(b"\n")
    return h.hexdigest()


def base_digest(root: str) -> str:
    """The image's content before the first step (the VOLATILE paths left out)."""
    return content_digest(root, walk(root, NOT_IMAGE + VOLATILE))


def scan(root: str) -> dict:
    """What tells whether a step changed a path: its inode, type, mode,
    owner, size, and its ctime (which no step can set back)."""
    return {p: (st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            for p, st in walk(root, NOT_IMAGE).items()}


def changes(before: dict, after: dict) -> tuple:
    """(changed, removed): the paths new or changed, sorted (a directory
    before what is in it); the paths gone, or replaced by another type,
    only the topmost of each removed tree."""
    changed = sorted(p for p, s in after.items() if before.get(p) != s)
    gone = {p for p in before if p not in after}
    gone |= {p for p in changed if p in before and stat.S_IFMT(before[p][1]) != stat.S_IFMT(after[p][1])}
    removed = sorted(p for p in gone if os.path.dirname(p) not in gone)
    return changed, removed


def record(out_dir: str, pos: int, changed: list, meta: dict) -> str:
    """Writes NNNN.tar and NNNN.json; returns the build log's line for them."""
    tar_path = os.path.join(out_dir, f"{pos:04d}.tar")
    meta_path = os.path.join(out_dir, f"{pos:04d}.json")
    h = hashlib.sha256()
    with open(tar_path, "xb") as out:
        p = subprocess.Popen(["mkosi-chroot", "tar", "--create", "--file=-", "--directory=/", "--no-recursion",
                              "--null", "--files-from=-", *TAR_META],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        names = b"".join(os.fsencode(n) + b"\0" for n in changed)

        def feed():
            try:
                p.stdin.write(names)
            except BrokenPipeError:
                pass
            finally:
                p.stdin.close()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        while chunk := p.stdout.read(1 << 20):
            h.update(chunk)
            out.write(chunk)
        err = p.stderr.read()
        p.wait()
        feeder.join()
    if p.returncode != 0:
        raise LayerError(f"tar exit status {p.returncode}: {err.decode('utf-8', 'replace').strip()[-300:]}")
    body = (json.dumps(meta, sort_keys=True) + "\n").encode()
    with open(meta_path, "xb") as f:
        f.write(body)
    return f"e2b-step-cache: step {pos:04d} tar={h.hexdigest()} meta={hashlib.sha256(body).hexdigest()}"


def cached(in_dir: str, pos: int, base: str) -> dict | None:
    """Layer NNNN's meta, when the host staged it and it was made on this base."""
    try:
        with open(os.path.join(in_dir, f"{pos:04d}.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(meta, dict) and meta.get("version") == VERSION and meta.get("base") == base
    return meta if ok and os.path.isfile(os.path.join(in_dir, f"{pos:04d}.tar")) else None


def restore(in_dir: str, pos: int, meta: dict) -> None:
    """What the step did, done again: its removals, then its tar."""
    removed = meta.get("removed") or []
    if removed:
        names = b"".join(b"/" + os.fsencode(n) + b"\0" for n in removed)
        cp = subprocess.run(["mkosi-chroot", "xargs", "-0", "-r", "rm", "-rf", "--"], input=names,
                            capture_output=True)
        if cp.returncode != 0:
            raise LayerError(f"removing its {len(removed)} paths: {cp.stderr.decode('utf-8', 'replace')[-300:]}")
    with open(os.path.join(in_dir, f"{pos:04d}.tar"), "rb") as f:
        cp = subprocess.run(["mkosi-chroot", "tar", "--extract", "--file=-", "--directory=/", "--same-owner",
                             "--preserve-permissions", *TAR_META], stdin=f, capture_output=True)
    if cp.returncode != 0:
        raise LayerError(f"tar exit status {cp.returncode}: {cp.stderr.decode('utf-8', 'replace').strip()[-300:]}")


class Layers:
    """The cache as steps.py sees it: restore() the staged layers that
    fit, then start()/done() around each step run, recording its layer.
    A layer that cannot be recorded ends recording (the next ones would
    build on it) and never the build."""

    def __init__(self, root: str, cache_in: str | None, cache_out: str | None):
        self.root, self.cache_in, self.cache_out = root, cache_in, cache_out
        self.base = base_digest(root)
        self.before = None

    def restore(self, total: int) -> list:
        """The metas of the layers restored, for positions 1.. in order."""
        metas = []
        if not self.cache_in:
            return metas
        for pos in range(1, total + 1):
            meta = cached(self.cache_in, pos, self.base)
            if meta is None:
                break
            try:
                restore(self.cache_in, pos, meta)
            except LayerError as e:
                # Part of a layer may be in the image: the build cannot go on from it.
                raise LayerError(f"restoring step {pos} from the step cache: {e}") from None
            metas.append(meta)
        return metas

    def start(self) -> None:
        """Before the first step that runs."""
        if self.cache_out and self.before is None:
            self.before = scan(self.root)

    def done(self, pos: int, ctx: dict) -> None:
        if not self.cache_out or self.before is None:
            return
        after = scan(self.root)
        changed, removed = changes(self.before, after)
        self.before = after
        try:
            os.makedirs(self.cache_out, exist_ok=True)
            line = record(self.cache_out, pos, changed,
                          {"version": VERSION, "base": self.base, "ctx": ctx, "removed": removed})
        except (LayerError, OSError) as e:
            for ext in ("tar", "json"):
                try:
                    os.unlink(os.path.join(self.cache_out, f"{pos:04d}.{ext}"))
                except OSError:
                    pass
            # The line tells the host (step_cache.py store) to keep nothing
            # from here on, whatever lines a later step prints of its own.
            print(f"template: step cache: step {pos} not recorded, nor the steps after it: {e}\n"
                  f"{STOPPED_LINE}{pos:04d}", file=sys.stderr, flush=True)
            self.cache_out = None
            return
        print(line, file=sys.stderr, flush=True)
