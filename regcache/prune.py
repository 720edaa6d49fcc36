"""Pruning the shared cache's registry repository (regcache/README.md,
"Eviction"): the entries pushed more than DAYS ago go, each by its
manifest's digest; the registry's own garbage collection then frees their
blobs. An entry in use is pushed again by the next build that makes it.

    python3 -m regcache prune --older-than-days DAYS [--kind step|pin|envd] [--tenant NAME] [--dry-run]
"""
import datetime
import hashlib
import json
import sys

from regcache.entry import CREATED, KIND, TENANT
from regcache.registry import Miss, Registry

PREFIX = {"step": "step-", "pin": "pin-", "envd": "envd-"}


def prune(reg: Registry, days: int, kind: str | None, tenant: str | None, dry_run: bool) -> int:
    now = datetime.datetime.now(datetime.timezone.utc)
    kept = gone = 0
    for tag in sorted(reg.tags()):
        if not tag.startswith(tuple(PREFIX.values())) or (kind and not tag.startswith(PREFIX[kind])):
            continue
        try:
            body = reg.get_manifest(tag)
        except Miss:
            continue
        try:
            ann = json.loads(body).get("annotations") or {}
            created = datetime.datetime.strptime(ann[CREATED], "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.timezone.utc)
        except (ValueError, KeyError, AttributeError):
            print(f"prune: {reg.ref}:{tag}: not a cache entry's manifest, left alone", file=sys.stderr)
            continue
        if (tenant and ann.get(TENANT) != tenant) or ann.get(KIND) is None \
                or now - created < datetime.timedelta(days=days):
            kept += 1
            continue
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        print(f"prune: {reg.ref}:{tag} ({ann.get(KIND)}, pushed {ann[CREATED]})"
              f"{' would go' if dry_run else ''}", file=sys.stderr)
        if not dry_run:
            try:
                reg.delete_manifest(digest)
            except Miss:
                pass   # another prune took it
        gone += 1
    print(f"prune: {reg.ref}: {gone} entries {'would go' if dry_run else 'removed'}, {kept} kept; "
          "the registry's garbage collection frees their blobs", file=sys.stderr)
    return 0
