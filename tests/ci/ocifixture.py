"""A small but real OCI image layout, as `make flavor=` leaves it in out/<flavor>/
(index.json -> manifest -> config + one gzip layer, and manifest.json naming
the manifest digest), so publish/templates tests need no full image build."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import pathlib
import tarfile


def _blob(oci: pathlib.Path, data: bytes) -> tuple[str, int]:
    h = hashlib.sha256(data).hexdigest()
    (oci / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (oci / "blobs" / "sha256" / h).write_bytes(data)
    return f"sha256:{h}", len(data)


def make_flavor_dir(out: pathlib.Path, flavor: str, payload: bytes = b"hello\n") -> str:
    fdir = out / flavor
    oci = fdir / "oci"
    oci.mkdir(parents=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("etc/e2b-fixture")
        info.size, info.mtime, info.mode = len(payload), 0, 0o644
        tar.addfile(info, io.BytesIO(payload))
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    layer, lsize = _blob(oci, gzip.compress(raw.getvalue(), mtime=0))
    config, csize = _blob(oci, json.dumps({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}}, sort_keys=True).encode())
    manifest, msize = _blob(oci, json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": csize},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": lsize}],
    }, sort_keys=True).encode())
    (oci / "index.json").write_text(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest,
                       "size": msize, "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}))
    (oci / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (fdir / "manifest.json").write_text(json.dumps(
        {"flavor": flavor, "outputs": {"oci": {"manifest": {"digest": manifest, "size": msize}}}}))
    return manifest
