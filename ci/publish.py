#!/usr/bin/python3
"""Pushes out/<flavor>/oci with skopeo and records the pushed digest.

    publish.py --registry DEST --tag TAG [--out-dir OUT] [--cert-dir DIR] FLAVOR...

DEST is a registry (host[:port][/path], or docker://...) -> docker://DEST/<flavor>:<tag>,
or another skopeo transport ending in a directory (oci:DIR, dir:DIR) ->
oci:DIR/<flavor>:<tag> (dir:DIR/<flavor>-<tag>).
Credentials never come from the command line or the repo: when
E2B_REGISTRY_USER and E2B_REGISTRY_PASSWORD are set (CI secrets) they go into
a private, temporary auth file (--dest-authfile; not argv, which `ps` shows);
otherwise skopeo's own auth file (REGISTRY_AUTH_FILE, ~/.docker/config.json) applies.
TLS verification stays on; --cert-dir adds a CA (skopeo --dest-cert-dir).

Writes OUT/<flavor>/published.json {registry, tag, reference, digest} and
fails unless the pushed manifest digest equals the built one.
Exit 0 ok, 1 push or digest failure, 2 usage.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ocidigest import DigestError, built_digest  # noqa: E402


def destination(dest: str, flavor: str, tag: str) -> tuple[str, str]:
    """(skopeo destination, registry name recorded in published.json)."""
    if dest.startswith("oci:"):
        return f"oci:{dest[4:].rstrip('/')}/{flavor}:{tag}", dest
    if dest.startswith("dir:"):
        return f"dir:{dest[4:].rstrip('/')}/{flavor}-{tag}", dest
    reg = dest.removeprefix("docker://").rstrip("/")
    if not reg or "://" in reg or "@" in reg or " " in reg:
        raise ValueError(f"registry {dest!r}: expected host[:port][/path]")
    return f"docker://{reg}/{flavor}:{tag}", reg


def publish(flavor: str, dest: str, tag: str, out_dir: pathlib.Path, cert_dir: str | None) -> dict:
    fdir = out_dir / flavor
    digest = built_digest(fdir)
    target, registry = destination(dest, flavor, tag)
    with tempfile.TemporaryDirectory(prefix="e2b-publish-") as tmp:
        digestfile = pathlib.Path(tmp) / "digest"
        argv = ["skopeo", "copy", "--quiet", "--digestfile", str(digestfile)]
        if target.startswith("docker://"):
            if cert_dir:
                argv += ["--dest-cert-dir", cert_dir]
            user, pw = os.environ.get("E2B_REGISTRY_USER"), os.environ.get("E2B_REGISTRY_PASSWORD")
            if user and pw:
                auth = pathlib.Path(tmp) / "auth.json"
                fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                token = base64.b64encode(f"{user}:{pw}".encode()).decode()
                with os.fdopen(fd, "w") as f:
                    json.dump({"auths": {registry.split("/")[0]: {"auth": token}}}, f)
                argv += ["--dest-authfile", str(auth)]
        argv += [f"oci:{fdir / 'oci'}:latest", target]
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        if cp.returncode != 0:
            # skopeo's message names the destination; never echo argv (creds).
            raise RuntimeError(f"skopeo copy to {target}: {cp.stderr.strip()}")
        pushed = digestfile.read_text().strip()
    if pushed != digest:
        raise DigestError(f"{target}: pushed digest {pushed} != built {digest} (the push rewrote the manifest)")
    rec = {"registry": registry, "tag": tag, "reference": target, "digest": pushed}
    (fdir / "published.json").write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description="push the built OCI layout and record its digest")
    ap.add_argument("--registry", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--out-dir", type=pathlib.Path, default=pathlib.Path("out"))
    ap.add_argument("--cert-dir")
    ap.add_argument("flavors", nargs="+")
    a = ap.parse_args()
    if not a.tag or any(c in a.tag for c in "/:@ "):
        print(f"publish: tag {a.tag!r}: not a valid tag", file=sys.stderr)
        return 2
    for flavor in a.flavors:
        try:
            rec = publish(flavor, a.registry, a.tag, a.out_dir, a.cert_dir)
        except ValueError as e:
            print(f"publish: {flavor}: {e}", file=sys.stderr)
            return 2
        except (DigestError, RuntimeError) as e:
            print(f"publish: {flavor}: {e}", file=sys.stderr)
            return 1
        print(f"publish: {flavor}: {rec['reference']} {rec['digest']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
