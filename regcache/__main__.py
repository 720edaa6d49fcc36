"""The shared cache's commands (regcache/README.md); the environment is
regcache/shared.py's.

    python3 -m regcache check                  CACHE_REGISTRY and CACHE_REGISTRY_PUSH are well formed
    python3 -m regcache pinfetch -- PINFETCH ARGS...   one pinfetch run through the shared cache
    python3 -m regcache envd-pull KEY DIR      envd-KEY into DIR (exit 1: not had)
    python3 -m regcache envd-push KEY DIR
    python3 -m regcache got KIND ORIGIN        a line for the build's ledger
    python3 -m regcache summary LEDGER         the build's line: where each came from
    python3 -m regcache prune --older-than-days N [--kind K] [--tenant T] [--dry-run]
"""
import argparse
import os
import sys

from regcache import artifacts
from regcache.shared import Shared, summary
from regcache.registry import Registry, Unavailable, parse_ref
from sandbox.termsafe import escape


def check() -> int:
    ref = os.environ.get("CACHE_REGISTRY") or ""
    push = os.environ.get("CACHE_REGISTRY_PUSH", "1")
    if push not in ("0", "1"):
        print(f"cache_registry_push={push}: 1 (push what the build made) or 0 (only read the registry)",
              file=sys.stderr)
        return 2
    if ref:
        try:
            parse_ref(ref)
        except ValueError as e:
            print(escape(str(e)), file=sys.stderr)
            return 2
    return 0


def main(argv: list) -> int:
    if argv[:1] == ["pinfetch"]:
        rest = argv[1:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return artifacts.pinfetch(rest) if rest else 2
    ap = argparse.ArgumentParser(prog="python3 -m regcache")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check")
    for name in ("envd-pull", "envd-push"):
        s = sub.add_parser(name)
        s.add_argument("key")
        s.add_argument("dir")
    s = sub.add_parser("got")
    s.add_argument("kind", choices=("step", "artifact", "envd"))
    s.add_argument("origin", choices=("local", "registry", "run", "fetched", "built"))
    s = sub.add_parser("summary")
    s.add_argument("ledger")
    s = sub.add_parser("prune", help="remove the entries pushed more than N days ago")
    s.add_argument("--older-than-days", type=int, required=True)
    s.add_argument("--kind", choices=("step", "pin", "envd"))
    s.add_argument("--tenant")
    s.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "check":
        return check()
    if a.cmd == "envd-pull":
        return artifacts.envd_pull(a.key, a.dir)
    if a.cmd == "envd-push":
        return artifacts.envd_push(a.key, a.dir)
    if a.cmd == "got":
        Shared().got(a.kind, a.origin)
        return 0
    if a.cmd == "summary":
        print(summary(a.ledger, os.environ.get("CACHE_REGISTRY") or None), file=sys.stderr)
        return 0
    from regcache.prune import prune
    ref = os.environ.get("CACHE_REGISTRY") or ""
    if check() or not ref:
        if not ref:
            print("prune: give cache_registry=REGISTRY/REPO", file=sys.stderr)
        return 2
    if a.older_than_days < 0:
        print(f"prune: --older-than-days {a.older_than_days}: a number of days, 0 or more", file=sys.stderr)
        return 2
    try:
        return prune(Registry(ref, os.environ.get("CERT_DIR") or None), a.older_than_days, a.kind, a.tenant,
                     a.dry_run)
    except Unavailable as e:
        print(escape(f"prune: cache registry {ref}: {e}"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
