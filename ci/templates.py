#!/usr/bin/python3
"""Writes the pool templates: one JSON per flavor, the image pinned by digest.

    templates.py --registry REG [--tag TAG] [--out-dir OUT] [--dest DIR]
                 [--host-warmup uds|cid] FLAVOR...

The digest is the one pushed by `make publish` (OUT/<flavor>/published.json)
when that push went to REG, else the built one (OUT/<flavor>/oci); either way
it must equal the built digest. Exit 0 ok, 1 on a missing/inconsistent image,
2 usage.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ocidigest import DigestError, built_digest  # noqa: E402
from template_warmup import template_spec  # noqa: E402

# Budgets fit the boot times measured by tests/boot (bench/README.md, "Boot"):
# envd answers well inside the pool's 200 x 50 ms; the e2b-ci API server
# (after Jupyter) needs tens of seconds under emulation, seconds under KVM.
# The contract's envd warmup, verbatim.
ENVD_WARMUP = ("for i in $(seq 1 200); do curl -sf -o /dev/null http://127.0.0.1:49983/health && exit 0; "
               "sleep 0.05; done; exit 1")
# e2b-ci: the same envd budget, then the code interpreter (which starts after
# Jupyter) with CI_TRIES x 100 ms.
CI_TRIES = 1200
CI_WARMUP = ("ok=0; for i in $(seq 1 200); do curl -sf -o /dev/null http://127.0.0.1:49983/health && "
             "{ ok=1; break; }; sleep 0.05; done; [ $ok = 1 ] || exit 1; "
             f"for i in $(seq 1 {CI_TRIES}); do curl -sf -o /dev/null http://127.0.0.1:49999/health && exit 0; "
             "sleep 0.1; done; exit 1")

# The same readiness from the pool's host over vsock (e2b-hostlink, built by
# `make tools`, see hostlink/README.md), for pools that would rather not run
# curl in the clone. The pool substitutes the clone's vsock address:
# {vsock_uds} (Firecracker/cloud-hypervisor: the VMM's hybrid-vsock socket)
# or {vsock_cid} (QEMU vhost-vsock: the guest CID). Budgets as above.
HOST_TRANSPORT = {"uds": ["--uds", "{vsock_uds}"], "cid": ["--cid", "{vsock_cid}"]}
# After every restore, one command (hostlink/README.md, "restore"): the clone
# step (host entropy, the host's clock, fresh tokens, the clone's document;
# README.md, "Pools: after every restore"), then envd's /health, its /init
# with the clone's access token, and an authenticated call that proves envd
# took it; a clone that was not reseeded, or whose envd does not take the
# token, fails its warmup and is destroyed. The pool substitutes
# {clone_generation} (1 for a clone of a template snapshot; one more for each
# snapshot of a clone restored), {clone_document} (a file with the clone's
# metadata document, whose accessTokenHash is the token's hex SHA-512) and
# {access_token_file} (a file with the clone's access token: never argv).
RESTORE_BUDGET_S = 30
RESTORE = ["restore", "--generation", "{clone_generation}", "--document", "{clone_document}",
           "--token-file", "{access_token_file}"]


def host_warmup(flavor: str, transport: str, init: list = ()) -> list:
    """FLAVOR: the image's flavor (a template's base flavor); INIT: envd's
    /init defaults (template_warmup.init_args), quoted for the shell."""
    hl = " ".join(["e2b-hostlink", *HOST_TRANSPORT[transport]])
    steps = [f"{hl} --timeout {RESTORE_BUDGET_S} {' '.join([*RESTORE, *map(shlex.quote, init)])}"]
    if flavor == "e2b-ci":
        steps.append(f"{hl} --timeout {CI_TRIES // 10} wait 49999")
    return ["sh", "-c", " && ".join(steps)]


FLAVORS = {
    "e2b-rt": {"size": "small", "warm": 4, "warmup": ["sh", "-c", ENVD_WARMUP]},
    "e2b-base": {"size": "small", "warm": 4, "warmup": ["sh", "-c", ENVD_WARMUP]},
    "e2b-ci": {"size": "medium", "warm": 2, "warmup": ["sh", "-c", CI_WARMUP]},
}


def reference(registry: str, flavor: str, digest: str) -> str:
    return f"{registry.rstrip('/')}/{flavor}@{digest}"


def template_for(flavor: str, registry: str, tag: str | None, out_dir: pathlib.Path,
                 host: str | None = None) -> dict:
    fdir = out_dir / flavor
    digest = built_digest(fdir)
    pub = fdir / "published.json"
    if pub.exists():
        p = json.loads(pub.read_text())
        if p.get("registry") == registry and (tag is None or p.get("tag") == tag):
            if p.get("digest") != digest:
                raise DigestError(f"{pub}: pushed digest {p.get('digest')} != built {digest}")
    spec = FLAVORS.get(flavor) or template_spec(out_dir, flavor, FLAVORS)
    t = {"template": reference(registry, flavor, digest), "net": "none",
         "size": spec["size"], "warm": spec["warm"], "warmup": list(spec["warmup"])}
    if host:  # a template's own ready check stays in its warmup, in the clone
        t["hostWarmup"] = host_warmup(spec.get("flavor", flavor), host, spec.get("init", []))
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description="write pool templates pinned by digest")
    ap.add_argument("--registry", required=True)
    ap.add_argument("--tag")
    ap.add_argument("--out-dir", type=pathlib.Path, default=pathlib.Path("out"))
    ap.add_argument("--dest", type=pathlib.Path, help="default: OUT/templates")
    ap.add_argument("--host-warmup", choices=sorted(HOST_TRANSPORT),
                    help="also write hostWarmup: e2b-hostlink restore over the clone's vsock")
    ap.add_argument("flavors", nargs="+")
    a = ap.parse_args()
    if not a.registry.strip() or "@" in a.registry or a.registry.startswith(("oci:", "dir:")):
        print(f"templates: registry {a.registry!r}: need a registry name (host[:port][/path])", file=sys.stderr)
        return 2
    dest = a.dest or a.out_dir / "templates"
    dest.mkdir(parents=True, exist_ok=True)
    for flavor in a.flavors:
        if flavor not in FLAVORS and not template_spec(a.out_dir, flavor, FLAVORS):
            print(f"templates: {flavor}: neither a flavor ({', '.join(FLAVORS)}) nor a template built "
                  f"into {a.out_dir}/{flavor}/ (make template=DIR)", file=sys.stderr)
            return 2
        try:
            t = template_for(flavor, a.registry.removeprefix("docker://"), a.tag, a.out_dir, a.host_warmup)
        except DigestError as e:
            print(f"templates: {flavor}: {e}", file=sys.stderr)
            return 1
        path = dest / f"{flavor}.json"
        path.write_text(json.dumps(t, indent=2) + "\n")
        print(f"templates: {path}: {t['template']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
