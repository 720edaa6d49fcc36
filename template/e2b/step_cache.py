#!/usr/bin/python3
"""The step cache of E2B templates, on the build host (template/README.md,
"The step cache"). template/template.sh stages it before mkosi and
os-image/build.sh stores what the build made after; template/e2b/layers.py
is its half inside the build.

    python3 -m template.e2b.step_cache stage --steps STEPS --tree TREE --scope DIR --base-id ID
                                             --cache DIR --max-mb N --config CONFIG --out DIR
    python3 -m template.e2b.step_cache store --config CONFIG --made DIR --log LOG

stage's inputs: the staged steps.json and extra tree, the template's folder
(the keys' scope), what names the base (flavor, distro, release, ...; a
fromImage's digest), the cache's folder and its cap. It writes them to
CONFIG with the keys it made, for store.

Each step at position N (from 1, across a fromTemplate chain) has a key, a
sha256 chain: the format's version, the scope, the base id and the starting
ENVs, then for each step up to N its type, its args, whether it starts a
template, and for a COPY the digest of its staged files. The keys are made
here, from what this host staged, never inside the build. An entry,
CACHE/KEY/{layer.tar,meta.json}, holds the layer the step at N made.

stage: hardlinks (else copies) the entries of the first steps, up to the
first without one or the first with force (a step's, or the template's
force for all of its steps), as DIR/NNNN.tar and NNNN.json.

store: for each step that ran, keeps DIR/NNNN.{tar,json} only when LOG (the
build log, which the build cannot reach) has exactly one line
`e2b-step-cache: step NNNN tar=SHA256 meta=SHA256` and the files have those
digests: a step that writes a layer of its own, or prints a line of its own,
gets nothing kept. Entries are renamed into place whole; the least recently
used go first when the cache is over its cap.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time

from sandbox.termsafe import escape
from template.e2b.layers import VERSION, content_digest, walk

KEY = re.compile(r"[0-9a-f]{64}")
LINE = re.compile(rb"e2b-step-cache: step (\d{4}) tar=([0-9a-f]{64}) meta=([0-9a-f]{64})\r?")


class CacheError(Exception):
    pass


def tree_digest(path: str) -> str:
    """A COPY's staged entry, a file, a link or a directory and what is in it."""
    st = os.lstat(path)
    entries = {".": st}
    if stat.S_ISDIR(st.st_mode):
        entries.update(walk(path, ()))
    return content_digest(path, entries)


def chain_keys(cfg: dict) -> list:
    """[(key, forced)] for each step position, in order."""
    with open(cfg["steps"], encoding="utf-8") as f:
        t = json.load(f)
    head = {"version": VERSION, "scope": cfg["scope"], "base": cfg["base_id"], "env": t.get("env", {})}
    prev = hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()
    keys, forced = [], False
    for tpl in t["templates"]:
        for i, step in enumerate(tpl["steps"]):
            forced = forced or bool(step.get("force")) or bool(tpl.get("force"))
            link = {"prev": prev, "type": step["type"], "args": step["args"], "template_start": i == 0}
            if step["type"] == "COPY":
                link["files"] = tree_digest(os.path.join(cfg["tree"], step["staged"].lstrip("/")))
            prev = hashlib.sha256(json.dumps(link, sort_keys=True).encode()).hexdigest()
            keys.append((prev, forced))
    return keys


def link_or_copy(src: str, dest: str) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def stage(cfg: dict, out: str) -> int:
    """Also sets cfg["keys"], for store."""
    keys = cfg["keys"] = chain_keys(cfg)
    os.makedirs(out, exist_ok=True)
    found = 0
    for pos, (key, forced) in enumerate(keys, 1):
        entry = os.path.join(cfg["cache"], key)
        if forced or not all(os.path.isfile(os.path.join(entry, n)) for n in ("layer.tar", "meta.json")):
            break
        link_or_copy(os.path.join(entry, "layer.tar"), os.path.join(out, f"{pos:04d}.tar"))
        link_or_copy(os.path.join(entry, "meta.json"), os.path.join(out, f"{pos:04d}.json"))
        os.utime(entry)   # least recently used goes first
        found += 1
    why = " (force from there on)" if found < len(keys) and keys[found][1] else ""
    print(f"template: step cache: {found} of {len(keys)} steps found{why}", file=sys.stderr)
    return 0


def vouched(log: str) -> dict:
    """{position: (tar sha256, meta sha256)} for the positions with exactly one line on the log."""
    seen = {}
    with open(log, "rb") as f:
        for line in f:
            m = LINE.fullmatch(line.rstrip(b"\n"))
            if m:
                seen.setdefault(int(m.group(1)), []).append((m.group(2).decode(), m.group(3).decode()))
    return {pos: v[0] for pos, v in seen.items() if len(v) == 1}


def copy_checked(src: str, dest: str, want: str) -> None:
    """src (a regular file, not through a link) to dest, whose bytes must hash to want."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f, open(dest, "xb") as out:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise CacheError(f"{src}: not a regular file")
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
            out.write(chunk)
    if h.hexdigest() != want:
        raise CacheError(f"{src}: its sha256 is not the one on the build log")


def put(cache: str, key: str, made: str, pos: int, sums: tuple) -> None:
    tmp = tempfile.mkdtemp(prefix=".new-", dir=cache)
    try:
        copy_checked(os.path.join(made, f"{pos:04d}.tar"), os.path.join(tmp, "layer.tar"), sums[0])
        copy_checked(os.path.join(made, f"{pos:04d}.json"), os.path.join(tmp, "meta.json"), sums[1])
        entry = os.path.join(cache, key)
        old = None
        if os.path.lexists(entry):
            old = tempfile.mkdtemp(prefix=".old-", dir=cache)
            os.rename(entry, os.path.join(old, key))
        os.rename(tmp, entry)
        tmp = None
        if old:
            shutil.rmtree(old)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def prune(cache: str, max_mb: int) -> int:
    """Removes the least recently used entries until the cache fits max_mb; returns its size in bytes."""
    entries, total = [], 0
    for n in os.listdir(cache):
        p = os.path.join(cache, n)
        if n.startswith((".new-", ".old-")) and os.lstat(p).st_mtime < time.time() - 3600:
            shutil.rmtree(p, ignore_errors=True)   # left by a build that was killed
            continue
        if not KEY.fullmatch(n) or not os.path.isdir(p):
            continue
        size = sum(os.lstat(os.path.join(p, f)).st_size for f in os.listdir(p))
        entries.append((os.lstat(p).st_mtime, size, p))
        total += size
    for _, size, p in sorted(entries):
        if total <= max_mb << 20:
            break
        shutil.rmtree(p, ignore_errors=True)
        total -= size
    return total


def store(cfg: dict, made: str, log: str) -> int:
    """CFG as stage left it, with its keys."""
    keys = cfg["keys"]
    sums = vouched(log)
    os.makedirs(cfg["cache"], exist_ok=True)
    kept = refused = 0
    # None made when every step came from the cache.
    for n in sorted(os.listdir(made)) if os.path.isdir(made) else []:
        m = re.fullmatch(r"(\d{4})\.tar", n)
        if not m:
            continue
        pos = int(m.group(1))
        if not 1 <= pos <= len(keys) or pos not in sums:
            print(f"template: step cache: step {pos}'s layer is not kept: the build log does not vouch for it "
                  f"with exactly one line", file=sys.stderr)
            refused += 1
            continue
        try:
            put(cfg["cache"], keys[pos - 1][0], made, pos, sums[pos])
            kept += 1
        except (CacheError, OSError) as e:
            print(escape(f"template: step cache: step {pos}'s layer is not kept: {e}"), file=sys.stderr)
            refused += 1
    total = prune(cfg["cache"], int(cfg["max_mb"]))
    print(f"template: step cache: {kept} layers kept, {refused} refused; {cfg['cache']} holds "
          f"{total / 2**20:.0f} MB (cap {cfg['max_mb']} MB)", file=sys.stderr)
    return 0


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.step_cache")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage", help="the cached layers for this build's steps, to DIR")
    s.add_argument("--steps", required=True, help="the staged steps.json")
    s.add_argument("--tree", required=True, help="the staged extra tree (a COPY's files)")
    s.add_argument("--scope", required=True, help="the template's folder")
    s.add_argument("--base-id", required=True, help="what names the base")
    s.add_argument("--cache", required=True, help="the cache's folder")
    s.add_argument("--max-mb", required=True, type=int, help="the cache's cap")
    s.add_argument("--config", required=True, help="written: these and the keys, for store")
    s.add_argument("--out", required=True)
    s = sub.add_parser("store", help="keep the layers the build made, as its log vouches for them")
    s.add_argument("--config", required=True, help="what stage wrote")
    s.add_argument("--made", required=True)
    s.add_argument("--log", required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "stage":
            cfg = {"steps": a.steps, "tree": a.tree, "scope": os.path.realpath(a.scope), "base_id": a.base_id,
                   "cache": a.cache, "max_mb": a.max_mb}
            rc = stage(cfg, a.out)
            with open(a.config, "w", encoding="utf-8") as f:
                json.dump(cfg, f, indent=1)
            return rc
        with open(a.config, encoding="utf-8") as f:
            return store(json.load(f), a.made, a.log)
    except (OSError, ValueError, KeyError, CacheError) as e:
        print(escape(f"template: step cache ({a.config}): {e}"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
