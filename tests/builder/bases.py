"""Base images for builder mode (`base = oci:PATH[:REF]`), made by the tests
themselves: no container registry can be reached from our machines.

debian_base(): a real Debian trixie made by debootstrap (minbase, plus `jq`,
the package the result must keep, and an account `node` with uid 1000, as
the node images have, which user `user` must not take or break), packed by
umoci into an OCI layout of three layers under the ref `v1`:
  1. the debootstrap tree (with /etc/e2b-test-doomed, removed by layer 3);
  2. the marker file /etc/e2b-test-base-marker (umoci insert);
  3. a whiteout of /etc/e2b-test-doomed (umoci insert --whiteout), so the
     unpack must apply whiteouts.
debootstrap takes minutes, so its tree is cached as a tarball in the test
cache (out/cache/test-bases/), keyed by the inputs below, none of them a
date; the layout itself is made afresh in each session (seconds).

tiny_layout(): a stand-in for an image that is not a Debian with apt and
dpkg (Alpine, distroless, an unsupported release): a one-layer layout of a
few files, made by hand with umoci, only for the refusals, which read
nothing but those files.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import testimages  # noqa: E402

RELEASE = "trixie"
INCLUDE = ("jq",)
MARKER = "/etc/e2b-test-base-marker"
MARKER_TEXT = "made by tests/builder/bases.py\n"
DOOMED = "/etc/e2b-test-doomed"
REF = "v1"
# Bump when the recipe below changes: part of the cache key.
RECIPE = "debootstrap-minbase-3"
NODE_UID = 1000


def run(*cmd, **kw):
    kw.setdefault("check", True)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        return subprocess.run([str(c) for c in cmd], **kw)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({e.returncode}): {e.stderr[-3000:]}") from None


def mirror(release: str = RELEASE) -> str:
    """The Debian archive URI the machine's apt uses, as the build derives it
    (os-image/sources.py): no host name is written in the tests either."""
    cp = run("/usr/bin/python3", ROOT / "os-image/sources.py", "--distro", "debian", "--release", release,
             "--output", os.devnull, "--print-json")
    return json.loads(cp.stdout)["archives"][0]["uri"]


def cache_key(release: str, include: tuple) -> str:
    return hashlib.sha256(json.dumps([RECIPE, release, sorted(include)]).encode()).hexdigest()[:16]


def debian_tarball(release: str = RELEASE, include: tuple = INCLUDE,
                   cache: pathlib.Path = testimages.CACHE) -> pathlib.Path:
    """The debootstrap tree as an uncompressed-order gzip tarball, cached."""
    d = cache / "test-bases"
    out = d / f"debian-{release}-{cache_key(release, include)}.tar.gz"
    if out.is_file():
        return out
    d.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-debootstrap-", dir="/var/tmp"))
    try:
        rootfs = work / "rootfs"
        run("debootstrap", "--variant=minbase", f"--include={','.join(include)}", release, rootfs,
            mirror(release), timeout=1800)
        # Like the official images: no package lists or downloaded .debs.
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for p in (rootfs / sub).glob("*"):
                if p.is_file():
                    p.unlink()
        run("chroot", rootfs, "useradd", "--uid", NODE_UID, "--user-group", "--create-home",
            "--shell", "/bin/bash", "node")
        (rootfs / DOOMED.lstrip("/")).write_text("a whiteout in a later layer removes this\n")
        tmp = out.with_suffix(".part")
        names = sorted(os.listdir(rootfs))
        run("tar", "--create", "--gzip", "--file", tmp, "--directory", rootfs, "--numeric-owner",
            "--sort=name", "--xattrs", "--", *names)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def first_device_node(tarball: pathlib.Path) -> str | None:
    """The first character or block device in TARBALL (debootstrap makes /dev/console, …)."""
    with tarfile.open(tarball, "r:gz") as tar:
        for m in tar:
            if m.ischr() or m.isblk():
                return m.name
    return None


def layout_digest(layout: pathlib.Path, ref: str) -> str:
    """The manifest digest index.json names for REF, read from the layout itself."""
    index = json.loads((layout / "index.json").read_text())
    for m in index["manifests"]:
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref:
            return m["digest"]
    raise KeyError(f"{layout}: no ref {ref}")


def debian_base(dest: pathlib.Path, release: str = RELEASE) -> pathlib.Path:
    """DEST: an OCI layout of the debootstrap base, its three layers under REF."""
    tarball = debian_tarball(release)
    run("umoci", "init", "--layout", dest)
    run("umoci", "new", "--image", f"{dest}:{REF}")
    with tempfile.TemporaryDirectory(prefix="e2b-test-layer-", dir="/var/tmp") as tmp:
        layer = pathlib.Path(tmp) / "layer.tar"
        with open(layer, "wb") as f:
            run("gzip", "-dc", tarball, stdout=f, capture_output=False)
        run("umoci", "raw", "add-layer", "--image", f"{dest}:{REF}", layer)
        marker = pathlib.Path(tmp) / "marker"
        marker.write_text(MARKER_TEXT)
        run("umoci", "insert", "--image", f"{dest}:{REF}", marker, MARKER)
    run("umoci", "insert", "--image", f"{dest}:{REF}", "--whiteout", DOOMED)
    return dest


def tiny_layout(dest: pathlib.Path, files: dict, ref: str = "latest", links: dict | None = None) -> pathlib.Path:
    """DEST: a one-layer OCI layout holding FILES ({path: text}) and LINKS
    ({path: symlink target}), nothing else."""
    run("umoci", "init", "--layout", dest)
    run("umoci", "new", "--image", f"{dest}:{ref}")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 1700000000
            tar.addfile(info, io.BytesIO(data))
        for path, target in sorted((links or {}).items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, 1700000000
            tar.addfile(info)
    with tempfile.NamedTemporaryFile(suffix=".tar", dir="/var/tmp") as f:
        f.write(raw.getvalue())
        f.flush()
        run("umoci", "raw", "add-layer", "--image", f"{dest}:{ref}", f.name)
    return dest


def docker_archive(layout: pathlib.Path, ref: str, dest: pathlib.Path, tag: str) -> pathlib.Path:
    """DEST: the layout's REF as a docker-archive (as `docker save` writes), tagged TAG."""
    run("skopeo", "copy", "--quiet", f"oci:{layout}:{ref}", f"docker-archive:{dest}:{tag}")
    return dest


def archive_tag(archive: pathlib.Path) -> str:
    """The first RepoTag of a docker archive's manifest.json: the name the
    build must report for it (skopeo, like `docker save`, writes TAG there
    normalized with its default registry, so the tests read it back rather
    than spell a registry's name)."""
    with tarfile.open(archive) as t:
        return json.load(t.extractfile("manifest.json"))[0]["RepoTags"][0]


if __name__ == "__main__":
    # By hand and in ci/image.yml: bases.py DIR writes the Debian base's
    # layout to DIR (ref v1), for `make flavor=e2b-rt base=oci:DIR:v1`.
    if len(sys.argv) != 2:
        sys.exit("usage: bases.py DIR")
    print(f"oci:{debian_base(pathlib.Path(sys.argv[1]).resolve())}:{REF}")
