"""The built image's digest: the OCI manifest named in out/<flavor>/oci/index.json.

manifest.json (written by the image build) records the same digest under
outputs.oci.manifest.digest; the two must agree, or the layout and its
manifest come from different builds.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import re

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class DigestError(Exception):
    pass


def built_digest(flavor_dir: pathlib.Path) -> str:
    """sha256:… of the image manifest in flavor_dir/oci, checked against its blob
    and against flavor_dir/manifest.json when that exists."""
    oci = flavor_dir / "oci"
    try:
        index = json.loads((oci / "index.json").read_text())
    except (OSError, ValueError) as e:
        raise DigestError(f"{oci}/index.json: {e}") from e
    manifests = [m for m in index.get("manifests", [])
                 if m.get("mediaType", "").endswith("image.manifest.v1+json")]
    if len(manifests) != 1:
        raise DigestError(f"{oci}/index.json: expected one image manifest, found {len(manifests)}")
    digest = manifests[0].get("digest", "")
    if not DIGEST_RE.match(digest):
        raise DigestError(f"{oci}/index.json: malformed digest {digest!r}")
    blob = oci / "blobs" / "sha256" / digest.split(":", 1)[1]
    try:
        actual = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    except OSError as e:
        raise DigestError(f"{blob}: {e}") from e
    if actual != digest:
        raise DigestError(f"{blob}: content hashes to {actual}, index says {digest}")
    mf = flavor_dir / "manifest.json"
    if mf.exists():
        recorded = json.loads(mf.read_text()).get("outputs", {}).get("oci", {}).get("manifest", {}).get("digest")
        if recorded != digest:
            raise DigestError(f"{mf}: outputs.oci.manifest.digest {recorded} != {digest} in {oci}/index.json")
    return digest
