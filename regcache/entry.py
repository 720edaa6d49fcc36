"""One cache entry in the registry (regcache/README.md, "Entries"): a few
named files under one tag, as an OCI image manifest whose config binds the
tag's key to the files.

    manifest  config: application/vnd.e2b-images.cache.entry.v1+json
              layers: one per file, application/vnd.e2b-images.cache.file.v1,
                      titled by org.opencontainers.image.title
    config    {"kind", "key", "files": [{"name", "digest", "size"}, ...]}

A pull is used only when every check holds: the manifest is an OCI manifest
of this shape; the config's bytes have the manifest's digest and name this
kind and this key (so another entry's manifest under this tag is refused);
the config's files are the manifest's layers and the names the caller
expects; each file's bytes have their digest and size. The files are
written into a fresh directory, which the caller renames into place whole.
"""
import datetime
import hashlib
import json
import os
import tempfile

from regcache.registry import MEDIA_MANIFEST, Refused, Registry

MEDIA_CONFIG = "application/vnd.e2b-images.cache.entry.v1+json"
MEDIA_FILE = "application/vnd.e2b-images.cache.file.v1"
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"
KIND = "org.e2b-images.cache.kind"
TENANT = "org.e2b-images.cache.tenant"


def file_digest(path: str) -> tuple:
    with open(path, "rb") as f:
        h = hashlib.file_digest(f, "sha256")
        return "sha256:" + h.hexdigest(), os.fstat(f.fileno()).st_size


def push(reg: Registry, tag: str, kind: str, key: str, files: list, tenant: str | None = None) -> None:
    """FILES: [(name, path)]; blobs first, the manifest last, so a tag
    never names what is not there."""
    described = []
    for name, path in files:
        digest, size = file_digest(path)
        reg.put_blob(digest, size, path=path)
        described.append({"name": name, "digest": digest, "size": size})
    config = json.dumps({"kind": kind, "key": key, "files": described}, sort_keys=True).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    reg.put_blob(config_digest, len(config), data=config)
    annotations = {CREATED: datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), KIND: kind}
    if tenant:
        annotations[TENANT] = tenant
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": MEDIA_FILE, "digest": d["digest"], "size": d["size"],
                    "annotations": {TITLE: d["name"]}} for d in described],
        "annotations": annotations,
    }
    reg.put_manifest(tag, json.dumps(manifest, sort_keys=True).encode())


def verified_manifest(reg: Registry, tag: str, body: bytes, kind: str, key: str, names: list) -> list:
    """The [{"name", "digest", "size"}] the entry under TAG holds, once its
    manifest and config hold this kind, key and file names."""
    try:
        m = json.loads(body)
        cfg_desc, layers = m["config"], m["layers"]
        ok = (m.get("schemaVersion") == 2 and m.get("mediaType", MEDIA_MANIFEST) == MEDIA_MANIFEST
              and cfg_desc["mediaType"] == MEDIA_CONFIG and isinstance(layers, list))
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise Refused(f"tag {tag}: not a cache entry's manifest")
    size = cfg_desc.get("size")
    if not isinstance(size, int) or not 0 < size <= 1 << 20:
        raise Refused(f"tag {tag}: a config of {size!r} bytes")
    with tempfile.TemporaryFile() as f:
        reg.get_blob(cfg_desc["digest"], size, f)
        f.seek(0)
        try:
            cfg = json.loads(f.read())
            files = cfg["files"]
            got = [(d["name"], d["digest"], d["size"]) for d in files]
        except (ValueError, KeyError, TypeError):
            raise Refused(f"tag {tag}: its config is not a cache entry's") from None
    if cfg.get("kind") != kind or cfg.get("key") != key:
        raise Refused(f"tag {tag}: it holds the entry of {cfg.get('kind')} {cfg.get('key')}, not of this {kind}")
    listed = [(ly.get("annotations", {}).get(TITLE), ly.get("digest"), ly.get("size")) for ly in layers
              if isinstance(ly, dict)]
    if got != listed or [n for n, _, _ in got] != list(names):
        raise Refused(f"tag {tag}: its config and its manifest do not name the same files ({', '.join(names)})")
    if not all(isinstance(s, int) and s >= 0 for _, _, s in got):
        raise Refused(f"tag {tag}: a file with no size")
    return files


def pull(reg: Registry, tag: str, kind: str, key: str, names: list, parent: str, cap: int) -> str:
    """A fresh directory in PARENT holding the entry's NAMES, verified; the
    caller renames it into place (or removes it). Miss when the tag is not
    there; Refused when the entry does not verify; Unavailable."""
    files = verified_manifest(reg, tag, reg.get_manifest(tag), kind, key, names)
    total = sum(d["size"] for d in files)
    if total > cap:
        raise Refused(f"tag {tag}: {total >> 20} MiB, over the cap of {cap >> 20} MiB")
    tmp = tempfile.mkdtemp(prefix=".pull-", dir=parent)
    try:
        for d in files:
            with open(os.path.join(tmp, d["name"]), "xb") as out:
                reg.get_blob(d["digest"], d["size"], out)
        return tmp
    except BaseException:
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)
        raise
