#!/usr/bin/python3
"""Turn mkosi's directory output into the deterministic products of a flavor:

  OUT/oci/            OCI image layout (one gzip layer, ref "latest")
  OUT/rootfs.ext4     ext4 root file system
  OUT/manifest.json   distro, archive state, packages, pinned artifacts, digests

Determinism (same tree and SOURCE_DATE_EPOCH -> same bytes):
  * the layer tar is written by GNU tar with --sort=name, numeric owners,
    mtimes clamped to the epoch and no atime/ctime PAX records; gzip -n;
  * JSON is serialized with sorted keys and fixed separators;
  * the ext4 image is populated from a fresh tmpfs copy extracted from that
    sorted tar (so readdir order, hence inode numbering, is the tar's order,
    not the build host's directory hash order), with a UUID and hash seed
    derived from flavor+epoch, E2FSPROGS_FAKE_TIME for superblock times, and
    every inode's times reset to the epoch with debugfs afterwards (mke2fs -d
    copies ctime, which no one can set on the source files).

The tree may be a template's or a base's (hostile input): what the manifest
reads of it (dpkg's status, the venv's metadata, the kernelspecs) is read
inside the tree (sandbox/inroot.py), regular files only, bounded; a dpkg
status that is not a regular file of the image (a link out of it, a fifo)
stops the pack, naming it, rather than list another system's packages.

Only the Python standard library and e2fsprogs, GNU tar and gzip are used.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import labels as image_labels
from sandbox import inroot

MiB = 1024 * 1024
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
HERE = os.path.dirname(os.path.abspath(__file__))
UUID_NS = uuid.UUID("7d1f3c1e-8a52-4b8c-9a57-5f0c1b2e6a01")  # e2b-images' own namespace


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(cmd, **kw):
    kw.setdefault("check", True)
    return subprocess.run(cmd, **kw)


def write_layer(tree, workdir, epoch):
    """tree -> (layer.tar path, layer.tar.gz path)."""
    tar_path = os.path.join(workdir, "layer.tar")
    # Top-level names sorted in C order; --sort=name handles everything below.
    names = sorted(os.listdir(tree), key=lambda n: n.encode())
    env = dict(os.environ, LC_ALL="C")
    run([
        "tar", "--create", "--file", tar_path, "--directory", tree,
        "--format=posix", "--sort=name", "--numeric-owner",
        f"--mtime=@{epoch}", "--clamp-mtime", "--no-acls", "--no-selinux",
        "--xattrs", "--xattrs-include=security.capability",
        "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
        "--", *names,
    ], env=env)
    gz_path = tar_path + ".gz"
    with open(gz_path, "wb") as out:
        run(["gzip", "-n", "-6", "-c", tar_path], stdout=out)
    return tar_path, gz_path


def put_blob(oci, data_or_path):
    blobs = os.path.join(oci, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)
    if isinstance(data_or_path, bytes):
        digest = hashlib.sha256(data_or_path).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data_or_path)
        size = len(data_or_path)
    else:
        digest = sha256_file(data_or_path)
        size = os.path.getsize(data_or_path)
        shutil.move(data_or_path, os.path.join(blobs, digest))
    return f"sha256:{digest}", size


def write_oci(oci, tar_path, gz_path, flavor, epoch, labels):
    if os.path.exists(oci):
        shutil.rmtree(oci)
    os.makedirs(oci)
    diff_id = "sha256:" + sha256_file(tar_path)
    layer_digest, layer_size = put_blob(oci, gz_path)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["/sbin/init"],
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": f"e2b-images os-image ({flavor})"}],
    }
    config_digest, config_size = put_blob(oci, canonical_json(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": layer_size}],
        "annotations": labels,
    }
    manifest_digest, manifest_size = put_blob(oci, canonical_json(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": OCI_MANIFEST, "digest": manifest_digest, "size": manifest_size,
            "annotations": {"org.opencontainers.image.ref.name": "latest"},
        }],
    }
    with open(os.path.join(oci, "index.json"), "wb") as f:
        f.write(canonical_json(index))
    with open(os.path.join(oci, "oci-layout"), "wb") as f:
        f.write(canonical_json({"imageLayoutVersion": "1.0.0"}))
    return {
        "manifest": {"digest": manifest_digest, "size": manifest_size},
        "config": {"digest": config_digest, "size": config_size},
        "layers": [{"digest": layer_digest, "size": layer_size, "diff_id": diff_id,
                    "uncompressed_size": os.path.getsize(tar_path)}],
        "ref": "latest",
    }


def write_ext4(tar_path, dest, flavor, epoch, headroom_mb):
    """Populate an ext4 image from the sorted tar, deterministically."""
    fs_uuid = uuid.uuid5(UUID_NS, f"{flavor}:{epoch}:fs")
    hash_seed = uuid.uuid5(UUID_NS, f"{flavor}:{epoch}:hash")
    tar_size = os.path.getsize(tar_path)
    size_mb = (tar_size * 5 // 4 + MiB - 1) // MiB + 64 + headroom_mb
    tmp_parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="e2b-pack-", dir=tmp_parent) as tmp:
        root = os.path.join(tmp, "root")
        os.mkdir(root, 0o755)
        # Extraction follows the tar's (sorted) order; tmpfs lists entries in
        # creation order, independent of names or the host's hash seed.
        run(["tar", "--extract", "--file", tar_path, "--directory", root,
             "--numeric-owner", "--same-owner", "--preserve-permissions",
             "--xattrs", "--xattrs-include=security.capability"])
        os.chown(root, 0, 0)
        os.chmod(root, 0o755)
        os.utime(root, (epoch, epoch))
        if os.path.exists(dest):
            os.unlink(dest)
        env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(epoch), SOURCE_DATE_EPOCH=str(epoch),
                   MKE2FS_CONFIG=os.path.join(HERE, "mke2fs.conf"), LC_ALL="C")
        run([
            "mke2fs", "-q", "-F", "-t", "ext4", "-T", "ext4", "-L", flavor[:16], "-U", str(fs_uuid),
            "-E", f"hash_seed={hash_seed},root_owner=0:0,lazy_itable_init=0,"
                  "lazy_journal_init=0,nodiscard",
            "-d", root, dest, f"{size_mb}M",
        ], env=env)
    reset_inode_times(dest, epoch, env)
    run(["e2fsck", "-fn", dest], env=env, stdout=subprocess.DEVNULL)
    return {"sha256": sha256_file(dest), "size": os.path.getsize(dest),
            "uuid": str(fs_uuid), "size_mb": size_mb}


def reset_inode_times(image, epoch, env):
    """Set atime/ctime/mtime/crtime of every used inode to the epoch.

    mke2fs -d copies the source files' ctime and atime (set by extraction, now);
    debugfs' set_inode_field by inode number fixes them without a mount."""
    out = run(["debugfs", "-R", "stats", image], env=env, capture_output=True, text=True).stdout
    count = next(int(l.split(":")[1]) for l in out.splitlines() if l.startswith("Inode count:"))
    # Inodes in use: ask icheck-free way: list via "ls -p" is slow; instead set
    # every inode that has a non-zero link count, found with "ncheck"-less scan.
    used = used_inodes(image, count, env)
    fields = ("atime", "ctime", "mtime", "crtime")
    cmds = []
    for ino in used:
        for fld in fields:
            cmds.append(f"set_inode_field <{ino}> {fld} @{epoch}\n")
            if fld != "crtime":
                cmds.append(f"set_inode_field <{ino}> {fld}_extra 0\n")
        cmds.append(f"set_inode_field <{ino}> crtime_extra 0\n")
    with tempfile.NamedTemporaryFile("w", suffix=".debugfs") as script:
        script.writelines(cmds)
        script.flush()
        run(["debugfs", "-w", "-f", script.name, image], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def used_inodes(image, count, env):
    """Inode numbers marked in use in the inode bitmaps (from dumpe2fs)."""
    out = run(["dumpe2fs", image], env=env, capture_output=True, text=True).stdout
    free = set()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Free inodes:"):
            spec = line.split(":", 1)[1].strip()
            for part in filter(None, (p.strip() for p in spec.split(","))):
                lo, _, hi = part.partition("-")
                free.update(range(int(lo), int(hi or lo) + 1))
    # Inodes 1..10 are reserved; 2 is the root, 11 usually lost+found.
    return [i for i in range(1, count + 1) if i not in free and (i == 2 or i >= 11)]


DPKG_STATUS = "var/lib/dpkg/status"
STATUS_MAX = 256 << 20


class PackError(Exception):
    pass


def dpkg_packages(rootfd, tree):
    pkgs = []
    try:
        text = inroot.read_regular(rootfd, DPKG_STATUS, STATUS_MAX).decode("utf-8", "replace")
    except FileNotFoundError:
        return pkgs
    except OSError as e:
        raise PackError(f"{tree}/{DPKG_STATUS}: {e.strerror}: the image's dpkg status must be a regular file "
                        "of the image (a step replaced it with a link out of it, or a fifo?); no manifest "
                        "lists another system's packages") from None
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        if fields.get("Status", "").endswith(" installed"):
            pkgs.append({"name": fields.get("Package", ""), "version": fields.get("Version", ""),
                         "architecture": fields.get("Architecture", "")})
    return sorted(pkgs, key=lambda p: (p["name"], p["architecture"]))


def venv_packages(rootfd, venv="usr/lib/e2b-code-interpreter/venv"):
    """Name and version of each distribution in e2b-ci's pydeps=pip venv, from
    its .dist-info/METADATA ([] without a venv), read inside the tree."""
    pkgs = []
    lib = f"{venv}/lib"
    for py in image_labels.listing(rootfd, lib):
        if not py.startswith("python3"):
            continue
        site = f"{lib}/{py}/site-packages"
        for info in image_labels.listing(rootfd, site):
            if not info.endswith(".dist-info"):
                continue
            try:
                text = image_labels.read_text(rootfd, f"{site}/{info}/METADATA")
            except OSError:
                continue
            fields = {}
            for line in text.splitlines():
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                fields.setdefault(k, v.strip())
            pkgs.append({"name": fields.get("Name", ""), "version": fields.get("Version", "")})
    return sorted(pkgs, key=lambda p: p["name"].lower())


def apt_list_name(uri, suite):
    """apt's file name for an archive's InRelease in its lists directory."""
    rest = uri.split("://", 1)[-1].rstrip("/")
    return f"{rest}/dists/{suite}/InRelease".replace("/", "_")


def archive_state(archives, lists_root):
    """Pin the archive state: each suite's InRelease Date and sha256."""
    candidates = {}
    for p in glob.glob(os.path.join(lists_root, "**", "*_InRelease"), recursive=True):
        candidates.setdefault(os.path.basename(p), []).append(p)
    state = []
    for a in archives["archives"]:
        name = apt_list_name(a["uri"], a["suite"])
        entry = {"uri": a["uri"], "suite": a["suite"]}
        paths = sorted(candidates.get(name, []), key=os.path.getmtime)
        if paths:
            data = open(paths[-1], "rb").read()
            entry["inrelease_sha256"] = hashlib.sha256(data).hexdigest()
            for line in data.decode("utf-8", "replace").splitlines():
                if line.startswith("Date:"):
                    entry["date"] = line.split(":", 1)[1].strip()
                    break
        else:
            entry["inrelease_sha256"] = None
        state.append(entry)
    return {"snapshot": archives.get("snapshot"), "suites": state}


def main(argv):
    ap = argparse.ArgumentParser(prog="pack.py")
    ap.add_argument("--tree", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--flavor", required=True)
    ap.add_argument("--distro", required=True)
    ap.add_argument("--release", required=True)
    ap.add_argument("--epoch", type=int, required=True)
    ap.add_argument("--archives", required=True)
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--apt-lists", required=True)
    ap.add_argument("--headroom-mb", type=int, default=256)
    ap.add_argument("--meta", required=True, help="build.sh's label inputs (labels.META_KEYS)")
    ap.add_argument("--base", help="builder mode: os-image/builder_base.py's JSON (the base image)")
    ap.add_argument("--kernels", help="e2b-ci: the kernels= list the tree must register, in order")
    a = ap.parse_args(argv)
    try:
        rootfd = os.open(a.tree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        print(f"pack: {a.tree}: {e.strerror} (mkosi's output must be a directory of its own)", file=sys.stderr)
        return 1
    try:
        return pack(a, rootfd)
    except PackError as e:
        print(f"pack: {e}", file=sys.stderr)
        return 1
    finally:
        os.close(rootfd)


def pack(a, rootfd):
    # What the manifest reads of the tree, first: a refusal leaves the outputs as they were.
    packages, venv = dpkg_packages(rootfd, a.tree), venv_packages(rootfd)
    tree_kernels = image_labels.kernels(rootfd)
    ours = [k for k in tree_kernels if k in image_labels.KERNEL_ORDER]
    if a.kernels is not None and ",".join(ours) != a.kernels:
        print(f"pack: kernels: {a.tree} registers {','.join(ours) or 'none'} of upstream's kernels, but "
              f"kernels={a.kernels} was asked for (a kernel's install step failed?)", file=sys.stderr)
        return 1
    with open(a.archives, encoding="utf-8") as f:
        archive = archive_state(json.load(f), a.apt_lists)
    try:
        labels = image_labels.labels(a.tree, image_labels.read_meta(a.meta), a.epoch, a.distro,
                                     a.release, archive)
    except (image_labels.LabelError, OSError, ValueError) as e:
        print(f"pack: labels: {e}", file=sys.stderr)
        return 1

    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pack-", dir=a.out) as work:
        tar_path, gz_path = write_layer(a.tree, work, a.epoch)
        ext4 = write_ext4(tar_path, os.path.join(a.out, "rootfs.ext4"), a.flavor, a.epoch,
                          a.headroom_mb)
        oci = write_oci(os.path.join(a.out, "oci"), tar_path, gz_path, a.flavor, a.epoch,
                        labels)

    with open(a.artifacts, encoding="utf-8") as f:
        artifacts = [json.loads(l) for l in f if l.strip()]
    manifest = {
        "flavor": a.flavor,
        "distro": a.distro,
        "release": a.release,
        "source_date_epoch": a.epoch,
        "archive": archive,
        "packages": packages,
        "artifacts": sorted(artifacts, key=lambda x: x["name"]),
        "labels": labels,
        "outputs": {"oci": oci, "rootfs.ext4": ext4},
    }
    if tree_kernels:
        manifest["kernels"] = tree_kernels
    if venv:
        manifest["python_packages"] = venv
    if a.base:
        # The image our runtime was installed onto (builder mode); no path of
        # the build machine, so manifests of the same base compare equal.
        with open(a.base, encoding="utf-8") as f:
            b = json.load(f)
        manifest["base"] = {k: b[k] for k in ("name", "digest", "os", "distro", "release")}
    with open(os.path.join(a.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, sort_keys=True, indent=2)
        f.write("\n")
    print(f"pack: oci manifest {oci['manifest']['digest']}, layer {oci['layers'][0]['size']} bytes, "
          f"ext4 sha256:{ext4['sha256']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
