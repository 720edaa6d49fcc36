#!/usr/bin/python3
"""Builder mode's base image: check it, unpack it, say what it is.

    builder_base.py --base oci:PATH[:REF] | docker-archive:FILE --dest DIR [--relative-to DIR [--confine]]

An image of one's own (a team's `python:3.12` derivative, say) becomes the
root our runtime is installed onto (os-image/build.sh, mkosi BaseTrees=).
Everything that can be wrong with it is found here, before mkosi, and named:

  * the base does not exist, is not an OCI layout or docker archive, has no
    such REF (the refs it has are listed), is an index of several platforms,
    or is not linux/amd64;
  * the unpacked root has no dpkg and apt (/usr/bin/dpkg, /usr/bin/apt-get,
    /var/lib/dpkg/status): Alpine, distroless, busybox;
  * its /etc/os-release is not Debian, or a Debian release this build cannot
    serve (SUPPORTED).
  * a directory mkosi works in from the build machine is a symlink
    (MKOSI_HOST_PATHS);
  * (--confine, a template's base) it is not inside the template directory.

The layers are applied in order by umoci (whiteouts and opaque directories
included) into DIR/bundle/rootfs; a docker-archive is first copied to an OCI
layout in DIR with skopeo. The user's layout is only read.

A base is hostile input (template/README.md, "What a template or a base
cannot reach"): every operation on its unpacked tree resolves paths inside
that tree (inroot.py), every byte of it or of skopeo's and umoci's stderr is
escaped before it reaches the terminal (termsafe.py), and a template's base
(--confine) is a relative PATH that stays inside the template directory,
symlinks resolved.

On success it prints one JSON object: name and digest (for the labels
org.opencontainers.image.base.name/.base.digest and manifest.json), distro,
release and os (from os-release), rootfs (the unpacked root). The digest is
the one `skopeo inspect` reports for the base: the manifest digest that
index.json names for REF, or for a docker archive the digest of its image
manifest. The name is the image's own reference: `<layout dir name>:<REF>`,
or the archive's first RepoTag (else its file name). No path of the build
machine goes into a label, so the labels are the same on every machine.

Exit 0 ok, 1 the base is refused (one message naming it and why), 2 usage.
"""
import argparse
import json
import os
import re
import stat
import subprocess
import sys
import tarfile

from sandbox import inroot, termsafe

# The releases a base may be: those our flavors build (package names differ
# between them, libssl3 in bookworm and libssl3t64 in trixie, and
# os-image/mkosi.conf.d/ picks by the release the base sets). Ubuntu's
# archive cannot be reached from our build machines: its bases are refused.
SUPPORTED = {"debian": ("trixie", "bookworm")}
NEEDS = ("/usr/bin/dpkg", "/usr/bin/apt-get", "/var/lib/dpkg/status")
# What mkosi itself does to the root from the build machine, outside any
# sandbox: it removes these files where they exist (after the packages) and
# rewrites usr/lib/os-release (ImageId=). A symlink among the directories on
# the way would aim that at the build machine's own files, so a base with
# one there is refused (the last part is removed, not followed).
MKOSI_HOST_PATHS = ("var/lib/systemd/random-seed", "var/lib/systemd/credential.secret", "etc/machine-info",
                    "var/lib/dbus/machine-id", "usr/lib/os-release")
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")


class Refused(Exception):
    pass


def parse(spec: str, relative_to: str) -> tuple[str, str, str]:
    """oci:PATH[:REF] | docker-archive:FILE -> (transport, absolute path, ref)."""
    if spec.startswith("oci:"):
        rest, ref = spec[4:], "latest"
        if ":" in rest:
            rest, ref = rest.rsplit(":", 1)
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", ref):
                raise Refused(f"base {spec}: '{ref}' is not a ref name (oci:PATH[:REF], REF like latest)")
        transport = "oci"
    elif spec.startswith("docker-archive:"):
        rest, ref, transport = spec[15:], "", "docker-archive"
    else:
        raise Refused(f"base {spec}: not oci:PATH[:REF] or docker-archive:FILE")
    if not rest:
        raise Refused(f"base {spec}: no path")
    return transport, os.path.normpath(os.path.join(relative_to, rest)), ref


def confine(spec: str, path: str, inside: str) -> str:
    """A template's base: PATH, every symlink resolved, inside the template
    directory INSIDE, and so is every symlink in it (an OCI layout's blobs),
    so a template cannot name another tenant's image on the build machine.
    Returns the resolved path, which the build then uses."""
    top = os.path.realpath(inside)
    real = os.path.realpath(path)

    def within(p: str) -> bool:
        return p.startswith(top + os.sep)

    if not within(real):
        raise Refused(f"base {spec}: {path} leads outside the template directory {top} (to {real}); "
                      "a template's base must be inside its directory: copy the image there")
    for d, dirs, files in os.walk(real):
        for n in dirs + files:
            p = os.path.join(d, n)
            if os.path.islink(p) and not within(os.path.realpath(p)):
                raise Refused(f"base {spec}: {p} is a symlink to {os.path.realpath(p)}, outside the template "
                              f"directory {top}; a template's base must be inside its directory: copy the "
                              "image there")
    return real


def skopeo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["skopeo", *args], capture_output=True, text=True)


def oci_refs(path: str) -> list[str]:
    with open(os.path.join(path, "index.json"), encoding="utf-8") as f:
        index = json.load(f)
    return sorted(m.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
                  for m in index.get("manifests", [])) or ["(none)"]


def locate(spec: str, transport: str, path: str, ref: str) -> str:
    """The skopeo reference of an existing base, or Refused naming what is wrong."""
    if transport == "oci":
        if not os.path.isdir(path):
            what = "is not a directory" if os.path.exists(path) else "does not exist"
            raise Refused(f"base {spec}: {path} {what}; give an OCI image layout directory "
                          "(e.g. one `skopeo copy … oci:DIR:REF` wrote)")
        if not (os.path.isfile(os.path.join(path, "oci-layout")) and os.path.isfile(os.path.join(path, "index.json"))):
            raise Refused(f"base {spec}: {path} is not an OCI image layout (no oci-layout and index.json in it)")
        try:
            refs = oci_refs(path)
        except (OSError, ValueError) as e:
            raise Refused(f"base {spec}: {path}/index.json cannot be read: {e}") from None
        if ref not in refs:
            raise Refused(f"base {spec}: {path} has no ref '{ref}'; its refs: {', '.join(refs)}")
        return f"oci:{path}:{ref}"
    if not os.path.isfile(path):
        what = "is not a file" if os.path.exists(path) else "does not exist"
        raise Refused(f"base {spec}: {path} {what}; give a docker archive (as `docker save` writes it)")
    return f"docker-archive:{path}"


def inspect(spec: str, ref: str) -> dict:
    """skopeo's view of the base: Digest, RepoTags, Architecture, Os."""
    raw = skopeo("inspect", "--raw", ref)
    if raw.returncode != 0:
        raise Refused(f"base {spec}: skopeo cannot read it: {raw.stderr.strip()}")
    try:
        media = json.loads(raw.stdout).get("mediaType", "")
    except ValueError:
        media = ""
    if media in INDEX_TYPES:
        raise Refused(f"base {spec}: an index of several platforms; copy the linux/amd64 image alone "
                      "(skopeo copy --override-arch amd64 … oci:DIR:REF) and give that")
    cp = skopeo("inspect", ref)
    if cp.returncode != 0:
        raise Refused(f"base {spec}: skopeo cannot read it: {cp.stderr.strip()}")
    info = json.loads(cp.stdout)
    plat = f"{info.get('Os', '?')}/{info.get('Architecture', '?')}"
    if plat != "linux/amd64":
        raise Refused(f"base {spec}: an image for {plat}; this build makes linux/amd64 images")
    return info


def unpack(spec: str, transport: str, ref: str, skopeo_ref: str, dest: str) -> str:
    """The base's layers applied in order (umoci: whiteouts included) -> rootfs."""
    if transport == "docker-archive":
        layout = os.path.join(dest, "layout")
        cp = skopeo("copy", "--quiet", skopeo_ref, f"oci:{layout}:base")
        if cp.returncode != 0:
            raise Refused(f"base {spec}: skopeo cannot copy it to an OCI layout: {cp.stderr.strip()}")
        image = f"{layout}:base"
    else:
        image = skopeo_ref[len("oci:"):]
    bundle = os.path.join(dest, "bundle")
    cp = subprocess.run(["umoci", "unpack", "--image", image, bundle], capture_output=True, text=True)
    if cp.returncode != 0:
        raise Refused(f"base {spec}: umoci cannot unpack it: {cp.stderr.strip()[-2000:]}")
    root = os.path.join(bundle, "rootfs")
    drop_special_files(root)
    drop_apt_state(root)
    return root


def drop_apt_state(root: str) -> None:
    """The base's apt state and caches go (the images drop their lists
    anyway): mkosi 24 gives apt the archive's package lists only when the
    root's /var/lib/apt and /var/cache/apt are empty, and otherwise finds no
    package at all. Its dpkg database stays; what goes with the state is apt's
    auto-installed marks (extended_states), so every package of the base
    counts as installed by hand, which no autoremove touches. The paths are
    resolved inside the root, as apt in the image sees them: a base's symlink
    (var/lib -> /etc) never leads to the build machine's files."""
    rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for sub in ("var/lib/apt", "var/cache/apt"):
            inroot.empty(rootfd, sub)
    finally:
        os.close(rootfd)


def drop_special_files(root: str) -> None:
    """Device nodes, fifos and sockets go (a debootstrap-made image has
    /dev/null and friends): the guest's /dev is a devtmpfs, and mkosi's copy
    of a base tree reads every file's contents, which a device or fifo has
    not. Walked by directory descriptors, following no symlink."""
    for _, dirs, files, dirfd in os.fwalk(root, follow_symlinks=False):
        for n in files + dirs:
            mode = os.stat(n, dir_fd=dirfd, follow_symlinks=False).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.unlink(n, dir_fd=dirfd)


def exists(rootfd: int, path: str) -> bool:
    """PATH is in the root, its symlinks resolved inside it."""
    try:
        os.close(inroot.open_in(rootfd, path, os.O_PATH))
        return True
    except OSError:
        return False


def os_release(rootfd: int) -> dict:
    """The image's os-release (often an absolute symlink), read inside the root."""
    for p in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = inroot.read(rootfd, p, limit=64 * 1024).decode("utf-8", errors="replace")
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            m = re.fullmatch(r'([A-Z0-9_]+)=(.*)', line.strip())
            if m:
                fields[m.group(1)] = m.group(2).strip('"\'')
        return fields
    return {}


def check_host_paths(spec: str, root: str) -> None:
    """Refused: a symlink among the directories of MKOSI_HOST_PATHS, checked
    from the root down without following one."""
    for path in MKOSI_HOST_PATHS:
        parts = path.split("/")
        for i in range(1, len(parts)):
            sub = "/".join(parts[:i])
            full = os.path.join(root, sub)
            if os.path.islink(full):
                raise Refused(f"base {spec}: /{sub} is a symlink (to {os.readlink(full)}); mkosi works on /{path} "
                              "from the build machine, outside the image, and would follow it there: the base "
                              f"must have a directory at /{sub}")
            if not os.path.isdir(full):
                break


def supported_text() -> str:
    return ", ".join(f"{d} {r}" for d, rs in SUPPORTED.items() for r in rs)


def check_root(spec: str, root: str) -> dict:
    check_host_paths(spec, root)
    rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        missing = [p for p in NEEDS if not exists(rootfd, p)]
        osr = os_release(rootfd)
    finally:
        os.close(rootfd)
    pretty = osr.get("PRETTY_NAME") or osr.get("ID") or "no /etc/os-release"
    if missing:
        raise Refused(f"base {spec} ({pretty}): no {' and no '.join(missing)}; builder mode installs our runtime "
                      f"with apt and dpkg, so the base must be a Debian with both ({supported_text()}); "
                      "Alpine, distroless and busybox images cannot be used")
    distro, release = osr.get("ID", ""), osr.get("VERSION_CODENAME", "")
    if distro not in SUPPORTED:
        extra = (" (Ubuntu's archive cannot be reached from our build machines, so Ubuntu bases are untested "
                 "and refused)" if distro == "ubuntu" else "")
        raise Refused(f"base {spec}: its /etc/os-release says {pretty} (ID={distro or 'none'}), not Debian{extra}; "
                      f"supported bases: {supported_text()}")
    if release not in SUPPORTED[distro]:
        raise Refused(f"base {spec}: {pretty} (VERSION_CODENAME={release or 'none'}) is a release this build "
                      f"cannot serve; supported bases: {supported_text()}")
    return {"distro": distro, "release": release, "os": pretty}


def repo_tags(path: str) -> list:
    """The RepoTags of a docker archive's manifest.json (skopeo 1.9's inspect
    does not report them for this transport); [] if it has none."""
    try:
        with tarfile.open(path) as tar:
            member = tar.extractfile("manifest.json")
            entries = json.load(member) if member else []
    except (OSError, KeyError, ValueError, tarfile.TarError):
        return []
    return [t for e in entries if isinstance(e, dict) for t in (e.get("RepoTags") or []) if isinstance(t, str)]


def base_name(transport: str, path: str, ref: str) -> str:
    if transport == "oci":
        return f"{os.path.basename(path)}:{ref}"
    tags = repo_tags(path)
    return tags[0] if tags else os.path.basename(path)


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="builder_base.py")
    ap.add_argument("--base", required=True, help="oci:PATH[:REF] or docker-archive:FILE")
    ap.add_argument("--dest", required=True, help="an empty work directory for the unpacked base")
    ap.add_argument("--relative-to", default=os.getcwd(), help="where a relative PATH starts")
    ap.add_argument("--confine", action="store_true",
                    help="a template's base: PATH must be relative and stay inside --relative-to")
    ap.add_argument("--check-only", action="store_true", help="stop after locating and inspecting")
    ap.add_argument("--name", help="the base's name for the labels, when it came from a registry "
                                   "(template/e2b/pull.py): the repository, not the cache's path")
    ap.add_argument("--digest", help="with --name: the registry's digest it was pulled by (a pull into an "
                                     "OCI layout may convert a Docker manifest, whose digest then differs)")
    a = ap.parse_args(argv)
    try:
        transport, path, ref = parse(a.base, a.relative_to)
        if a.confine:
            path = confine(a.base, path, a.relative_to)
        # A pulled base is named as the registry has it, not by the cache's path.
        shown = a.base
        if a.name:
            if not (a.digest and re.fullmatch(r"sha256:[0-9a-f]{64}", a.digest)):
                raise Refused(f"base {a.base}: --name needs the sha256 --digest it was pulled by")
            shown = f"{a.name}@{a.digest}"
        skopeo_ref = locate(shown, transport, path, ref)
        info = inspect(shown, skopeo_ref)
        digest = info.get("Digest", "")
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise Refused(f"base {shown}: skopeo reports no sha256 digest for it ({digest!r})")
        out = {"spec": shown, "name": a.name or base_name(transport, path, ref), "digest": a.digest or digest}
        if not a.check_only:
            root = unpack(shown, transport, ref, skopeo_ref, a.dest)
            out.update(check_root(shown, root))
            out["rootfs"] = root
    except Refused as e:
        # A base's os-release, tags and refs and skopeo's and umoci's stderr
        # are the base's bytes: escaped for the terminal.
        print(f"base: {termsafe.escape(str(e))}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
