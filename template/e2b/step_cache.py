#!/usr/bin/python3
"""The step cache of E2B templates, on the build host (template/README.md,
"The step cache"). template/template.sh stages it before mkosi and
os-image/build.sh stores what the build made after; template/e2b/layers.py
is its half inside the build.

    python3 -m template.e2b.step_cache stage --steps STEPS --tree TREE --scope DIR [--tenant NAME]
                                             --base-id ID --cache DIR --max-mb N --config CONFIG --out DIR
    python3 -m template.e2b.step_cache store --config CONFIG --made DIR --log LOG

stage's inputs: the staged steps.json and extra tree, the template's folder
and the operator's tenant name (make tenant=; together the keys' scope),
what names the base (flavor, distro, release, ...; a fromImage's digest),
the cache's folder and its cap. It writes them to CONFIG with the keys it
made, for store.

Each step at position N (from 1, across a fromTemplate chain) has a key, a
sha256 chain: the format's version, the scope (the tenant, when given, and
the folder), the base id and the starting ENVs, then for each step up to N
its type, its args, whether it starts a template, and for a COPY the digest
of its staged files. The keys are made here, from what this host staged,
never inside the build. An entry, CACHE/KEY/{layer.tar,meta.json}, holds the
layer the step at N made.

stage: hardlinks (else copies) the entries of the first steps, up to the
first without one or the first with force (a step's, or the template's
force for all of its steps), as DIR/NNNN.tar and NNNN.json.

store: for each step that ran, keeps DIR/NNNN.{tar,json} only when LOG (the
build log, which the build cannot reach) has exactly one line
`e2b-step-cache: step NNNN tar=SHA256 meta=SHA256` and the files have those
digests, and only for the steps before the first
`e2b-step-cache: recording stopped at step NNNN` (template/e2b/layers.py
prints it when recording a layer fails, and records nothing after): a step
that writes a layer of its own, or prints a line of its own, gets nothing
kept. DIR is the build's output, which a step can write: it is read only as
a directory of its own (not through a link), and a layer only as a regular
file of at most the cache's cap. Entries are renamed into place whole; the
least recently used go first when the cache is over its cap.
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

from regcache.shared import Shared
from sandbox.termsafe import escape
from template.e2b.layers import VERSION, content_digest, walk

KEY = re.compile(r"[0-9a-f]{64}")
LINE = re.compile(rb"e2b-step-cache: step (\d{4}) tar=([0-9a-f]{64}) meta=([0-9a-f]{64})\r?")
STOPPED = re.compile(rb"e2b-step-cache: recording stopped at step (\d{4})")
TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class CacheError(Exception):
    pass


def tree_digest(path: str) -> str:
    """A COPY's staged entry, a file, a link or a directory and what is in it."""
    st = os.lstat(path)
    entries = {".": st}
    if stat.S_ISDIR(st.st_mode):
        entries.update(walk(path, ()))
    return content_digest(path, entries)


def chain_keys(cfg: dict, portable: bool = False) -> list:
    """[(key, forced)] for each step position, in order. PORTABLE: the keys
    of the shared cache's registry, scoped by the tenant and the template's
    name instead of its folder, so that every build host has the same."""
    with open(cfg["steps"], encoding="utf-8") as f:
        t = json.load(f)
    if portable:
        head = {"version": VERSION, "registry": 1, "tenant": cfg["tenant"],
                "template": os.path.basename(cfg["scope"]), "base": cfg["base_id"], "env": t.get("env", {})}
    else:
        head = {"version": VERSION, "scope": cfg["scope"], "base": cfg["base_id"], "env": t.get("env", {})}
        if cfg.get("tenant"):
            head["tenant"] = cfg["tenant"]
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


def pull(shared: Shared, cfg: dict, pos: int) -> bool:
    """Step POS's layer from the shared cache's registry into the local
    cache, verified (regcache/entry.py); False when the registry has none
    that verifies, or is not in this build's use."""
    if not cfg.get("registry_keys"):
        return False
    rkey = cfg["registry_keys"][pos - 1]

    def place(tmp: str) -> None:
        dest = os.path.join(cfg["cache"], cfg["keys"][pos - 1][0])
        if os.path.lexists(dest):
            shutil.rmtree(dest)   # an incomplete entry of before
        os.rename(tmp, dest)
    return shared.pull(f"step-{rkey}", "step", rkey, ["layer.tar", "meta.json"], cfg["cache"],
                       int(cfg["max_mb"]) << 20, place,
                       lambda e: f"template: step cache: step {pos}'s layer from the registry is refused: {e}; "
                                 "the step runs")


def stage(cfg: dict, out: str) -> int:
    """Also sets cfg["keys"] (and, with the registry, "registry_keys") and
    cfg["origins"], for store."""
    keys = cfg["keys"] = chain_keys(cfg)
    shared = Shared()
    if shared.ref:
        cfg["registry_keys"] = [k for k, _ in chain_keys(cfg, portable=True)]
    os.makedirs(out, exist_ok=True)
    origins = cfg["origins"] = {}
    for pos, (key, forced) in enumerate(keys, 1):
        entry_dir = os.path.join(cfg["cache"], key)
        if forced:
            break
        have = all(os.path.isfile(os.path.join(entry_dir, n)) for n in ("layer.tar", "meta.json"))
        if have:
            origins[str(pos)] = "local"
        elif pull(shared, cfg, pos):
            origins[str(pos)] = "registry"
        else:
            break
        link_or_copy(os.path.join(entry_dir, "layer.tar"), os.path.join(out, f"{pos:04d}.tar"))
        link_or_copy(os.path.join(entry_dir, "meta.json"), os.path.join(out, f"{pos:04d}.json"))
        os.utime(entry_dir)   # least recently used goes first
    found = len(origins)
    why = " (force from there on)" if found < len(keys) and keys[found][1] else ""
    pulled = sum(1 for o in origins.values() if o == "registry")
    print(f"template: step cache: {found} of {len(keys)} steps found{why}"
          f"{f' ({pulled} from the registry)' if pulled else ''}", file=sys.stderr)
    return 0


def vouched(log: str) -> tuple:
    """({position: (tar sha256, meta sha256)} for the positions with exactly
    one line on the log, the first position recording stopped at or None)."""
    seen, stopped = {}, None
    with open(log, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            m = LINE.fullmatch(line)
            if m:
                seen.setdefault(int(m.group(1)), []).append((m.group(2).decode(), m.group(3).decode()))
            # Anywhere in a line: a step's output may run into it, and a
            # stop line of a step's own only keeps less.
            m = STOPPED.search(line)
            if m:
                stopped = min(int(m.group(1)), stopped or int(m.group(1)))
    return {pos: v[0] for pos, v in seen.items() if len(v) == 1}, stopped


def copy_checked(made_fd: int, name: str, dest: str, want: str, cap: int) -> None:
    """NAME in the directory MADE_FD (a regular file, not through a link, at
    most CAP bytes) to dest, whose bytes must hash to want."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=made_fd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"{name}: not a regular file")
        if st.st_size > cap:
            raise CacheError(f"{name}: larger than the cache's cap ({cap >> 20} MB)")
        with open(dest, "xb") as out:
            h = hashlib.sha256()
            while chunk := f.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
    if h.hexdigest() != want:
        raise CacheError(f"{name}: its sha256 is not the one on the build log")


def put(cache: str, key: str, made_fd: int, pos: int, sums: tuple, cap: int) -> None:
    tmp = tempfile.mkdtemp(prefix=".new-", dir=cache)
    try:
        copy_checked(made_fd, f"{pos:04d}.tar", os.path.join(tmp, "layer.tar"), sums[0], cap)
        copy_checked(made_fd, f"{pos:04d}.json", os.path.join(tmp, "meta.json"), sums[1], cap)
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


def open_made(made: str) -> int | None:
    """The build's layer folder, a directory of its own (never through a
    link: a step can write the build's output); None when the build made
    none (every step came from the cache)."""
    try:
        return os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CacheError(f"{made}: not a directory of the build's own ({e.strerror}: a step put a link or a "
                         "file in its place?); no layer of this build is kept") from None


def store(cfg: dict, made: str, log: str) -> int:
    """CFG as stage left it, with its keys."""
    keys = cfg["keys"]
    sums, stopped = vouched(log)
    os.makedirs(cfg["cache"], exist_ok=True)
    refused = 0
    made_pos, kept_pos = set(), set()
    made_fd = open_made(made)
    try:
        names = sorted(os.listdir(made_fd)) if made_fd is not None else []
        for n in names:
            m = re.fullmatch(r"(\d{4})\.tar", n)
            if not m:
                continue
            pos = int(m.group(1))
            made_pos.add(pos)
            why = None
            if stopped is not None and pos >= stopped:
                why = f"recording stopped at step {stopped}, and nothing from there on is kept"
            elif not 1 <= pos <= len(keys) or pos not in sums:
                why = "the build log does not vouch for it with exactly one line"
            try:
                if why:
                    raise CacheError(why)
                put(cfg["cache"], keys[pos - 1][0], made_fd, pos, sums[pos], int(cfg["max_mb"]) << 20)
                kept_pos.add(pos)
            except (CacheError, OSError) as e:
                print(escape(f"template: step cache: step {pos}'s layer is not kept: {e}"), file=sys.stderr)
                refused += 1
    finally:
        if made_fd is not None:
            os.close(made_fd)
    share(cfg, made_pos, kept_pos)
    total = prune(cfg["cache"], int(cfg["max_mb"]))
    print(f"template: step cache: {len(kept_pos)} layers kept, {refused} refused; {cfg['cache']} holds "
          f"{total / 2**20:.0f} MB (cap {cfg['max_mb']} MB)", file=sys.stderr)
    return 0


def share(cfg: dict, made_pos: set, kept_pos: set) -> None:
    """The ledger's line for each step, and the registry's share: each
    layer this build kept (replacing what the registry had under its key,
    which this build's base did not take), and each it had locally that the
    registry lacks."""
    shared = Shared()
    origins = cfg.get("origins") or {}
    for pos in range(1, len(cfg["keys"]) + 1):
        shared.got("step", "run" if pos in made_pos else origins.get(str(pos), "run"))
    if not cfg.get("registry_keys"):
        return
    for pos in range(1, len(cfg["keys"]) + 1):
        if pos not in kept_pos and origins.get(str(pos)) != "local":
            continue
        d = os.path.join(cfg["cache"], cfg["keys"][pos - 1][0])
        rkey = cfg["registry_keys"][pos - 1]
        shared.push(f"step-{rkey}", "step", rkey,
                   [("layer.tar", os.path.join(d, "layer.tar")), ("meta.json", os.path.join(d, "meta.json"))],
                   cfg["tenant"], replace=pos in kept_pos)


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.step_cache")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage", help="the cached layers for this build's steps, to DIR")
    s.add_argument("--steps", required=True, help="the staged steps.json")
    s.add_argument("--tree", required=True, help="the staged extra tree (a COPY's files)")
    s.add_argument("--scope", required=True, help="the template's folder")
    s.add_argument("--tenant", help="the operator's tenant name (make tenant=): with the folder, the scope")
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
            if a.tenant is not None and not TENANT.fullmatch(a.tenant):
                raise CacheError(f"tenant '{a.tenant}': not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -, "
                                 "a letter or digit first)")
            if os.environ.get("CACHE_REGISTRY") and os.environ.get("OFFLINE") != "1" and not a.tenant:
                raise CacheError(f"cache_registry={os.environ['CACHE_REGISTRY']}: an E2B template's step layers "
                                 "are shared per tenant, and no tenant= is set: set tenant=NAME (one name for "
                                 "all of a team's builds, another for each tenant whose layers must stay "
                                 "apart), or step_cache=0")
            cfg = {"steps": a.steps, "tree": a.tree, "scope": os.path.realpath(a.scope), "tenant": a.tenant,
                   "base_id": a.base_id, "cache": a.cache, "max_mb": a.max_mb}
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
