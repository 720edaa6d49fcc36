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

Hostile bases (issue 37): what a tenant can hand a build host that builds
as root. escaping_links() are symlinks that lead out of an image root (to
the build machine's /etc, the checkout), absolute and through `..`;
apt_escape_layout() puts them where builder_base.py empties apt's state,
mkosi_escape_layout() where mkosi itself removes files from the build
machine, finalize_escape_base() (a real Debian base) where mkosi.finalize
writes;
escaping_tree() is a fake unpacked root with them where mkosi.finalize
removes and writes; trojan_getent() is a base binary the build runs as
root that tries the build host through /proc (finalize_escape_base(reach=)
carries it); hostile_home_base() has an account `user` whose home is in
the checkout; escape_layout() and escape_tag_archive() carry
terminal escape sequences in PRETTY_NAME and RepoTags. tree_state() is
what the tests compare before and after: nothing outside the build may
change.
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
    add_layer(dest, ref, files, links)
    return dest


def add_layer(dest: pathlib.Path, ref: str, files: dict, links: dict | None = None) -> None:
    """One more layer on DEST:REF holding FILES and LINKS (as tiny_layout)."""
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


# A window title, a bell, "clear the screen" and a C1 CSI ("red"): what a
# hostile base puts where the build prints it.
ESCAPES = "\x1b]0;e2b-owned\x07\x1b[2J\u009b31m"
DEBIAN_TRIXIE = {"/usr/bin/dpkg": "#!/bin/sh\n", "/usr/bin/apt-get": "#!/bin/sh\n", "/var/lib/dpkg/status": "",
                 "/etc/os-release": "ID=debian\nVERSION_CODENAME=trixie\n"}


def escaping_links(outside: pathlib.Path, where: str) -> dict:
    """{path in an image: symlink target} leading out of the image's root to
    OUTSIDE (a directory standing for the build machine's files and the
    checkout), absolute or climbing with `..`. WHERE "apt": apt's state, as
    reproduced (`var/lib -> /etc`); "finalize": what mkosi.finalize empties
    and writes (`usr/share/lintian -> /work/src`, the checkout in mkosi's
    script sandbox)."""
    up = "../" * 12 + str(outside).lstrip("/")
    if where == "apt":
        return {"/var/lib": f"{outside}/etc", "/var/cache": f"{up}/cache"}
    return {"/usr/share/lintian": f"{outside}/checkout", "/usr/share/man": f"{up}/checkout",
            "/etc/machine-id": f"{outside}/checkout/Makefile", "/etc/.updated": f"{up}/checkout/README.md"}


def outside_files(outside: pathlib.Path) -> pathlib.Path:
    """OUTSIDE filled with what escaping_links() aims at: an apt state and
    cache, and a checkout's files."""
    for rel, text in {"etc/apt/sources.list": "deb the build machine's own\n",
                      "etc/apt/lists/keep": "x\n", "etc/apt/extended_states": "x\n", "cache/apt/archives/keep.deb": "x\n",
                      "checkout/Makefile": "all:\n", "checkout/README.md": "# the checkout\n",
                      "checkout/sub/file": "x\n"}.items():
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_text(text)
    return outside


def tree_state(top: pathlib.Path) -> dict:
    """Everything under TOP (itself included): type, mode, owner and bytes
    or link target of each path; equal before and after means untouched."""
    state = {}
    for p in [top, *sorted(top.rglob("*"))]:
        st = p.lstat()
        what = (os.readlink(p) if p.is_symlink() else
                hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "")
        state[str(p.relative_to(top))] = (st.st_mode, st.st_uid, st.st_gid, what)
    return state


def checkout_owners() -> dict:
    """The checkout's top directory and each tracked file, and their owners
    (a lost file shows as None)."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    owners = {".": (ROOT.stat().st_uid, ROOT.stat().st_gid)}
    for name in filter(None, names.decode().split("\0")):
        p = ROOT / name
        owners[name] = (p.lstat().st_uid, p.lstat().st_gid) if p.exists() or p.is_symlink() else None
    return owners


def apt_escape_layout(dest: pathlib.Path, outside: pathlib.Path) -> pathlib.Path:
    """DEST: a layout whose /var/lib and /var/cache lead to OUTSIDE, where
    builder_base.py empties var/lib/apt and var/cache/apt on unpacking; it
    is refused after the unpack (the test is cheap)."""
    return tiny_layout(dest, {"/etc/os-release": DEBIAN_TRIXIE["/etc/os-release"]},
                       links=escaping_links(outside, "apt"))


def mkosi_escape_layout(dest: pathlib.Path, outside: pathlib.Path) -> pathlib.Path:
    """DEST: a base that passes the other checks, whose /var/lib/dbus leads
    to OUTSIDE/dbus (with a machine-id): mkosi removes
    /var/lib/dbus/machine-id from the build machine, outside any sandbox."""
    (outside / "dbus").mkdir(parents=True, exist_ok=True)
    (outside / "dbus/machine-id").write_text("the build machine's\n")
    return tiny_layout(dest, DEBIAN_TRIXIE, links={"/var/lib/dbus": f"{outside}/dbus"})


def escaping_tree(root: pathlib.Path, outside: pathlib.Path) -> pathlib.Path:
    """ROOT: a fake unpacked image root with escaping_links() to OUTSIDE,
    and the few files mkosi.finalize reads (its dpkg list, shadow, git)."""
    for rel, text in {"etc/dpkg/dpkg.cfg.d/02-e2b-git-server": (ROOT / "os-image/mkosi.extra/etc/dpkg/dpkg.cfg.d/"
                                                                "02-e2b-git-server").read_text(),
                      "etc/shadow": "root:*:20000:0:99999:7:::\n", "etc/passwd-": "old\n",
                      "usr/bin/git": "git\n", "usr/lib/git-core/git": "git\n", "usr/lib/git-core/git-shell": "x\n",
                      "usr/share/doc/git/copyright": "c\n", "tmp/scratch": "x\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    os.symlink("../../common-licenses/GPL-2", root / "usr/share/doc/git/COPYING")
    for path, target in escaping_links(outside, "finalize").items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / path.lstrip("/"))
    return root


def finalize_escape_base(dest: pathlib.Path, target: str, reach: tuple = ()) -> pathlib.Path:
    """DEST: the Debian base (debian_base) with one more layer in which
    /etc/.updated and /var/.updated, which mkosi.finalize writes, are
    symlinks to TARGET/precious and TARGET/sub/file (TARGET absolute:
    /work/src/… is the checkout in mkosi's script sandbox). No package owns
    either path and nothing before finalize writes them, so the links are
    still there when finalize runs. With REACH, its /usr/bin/getent is
    trojan_getent(REACH)."""
    debian_base(dest)
    add_layer(dest, REF, {"/usr/bin/getent": trojan_getent(reach)} if reach else {},
              links={"/etc/.updated": f"{target}/precious", "/var/.updated": f"{target}/sub/file"})
    return dest


ESCAPE_LOG = "/etc/e2b-test-escape.log"


def trojan_getent(reach: tuple) -> str:
    """A /usr/bin/getent that first tries what a hostile base's binary run
    as root by the build can try: each path of REACH (absolute, on the
    build machine) through /proc/PID/root of every process it sees, and a
    device node of the disk; it logs each try to ESCAPE_LOG in the image
    ("ran" each time, "wrote PATH" or "mknod" where it got through). Then it
    answers as getent does, from the files (mkosi.postinst and maintainer
    scripts ask it for passwd and group entries, by name or id)."""
    paths = " ".join(reach)
    return f"""#!/bin/sh
echo "ran: getent $*" >> {ESCAPE_LOG}
for r in /proc/[0-9]*/root; do
    for d in {paths}; do
        if echo pwned > "$r$d/precious" 2>/dev/null; then echo "wrote $r$d" >> {ESCAPE_LOG}; fi
    done
done
if mknod /tmp/e2b-disk b 8 0 2>/dev/null; then echo mknod >> {ESCAPE_LOG}; fi
db=$1; shift
[ -f "/etc/$db" ] || exit 1
[ $# -gt 0 ] || {{ cat "/etc/$db"; exit 0; }}
rc=2
for k in "$@"; do
    awk -F: -v k="$k" '$1 == k || $3 == k {{ print; found = 1; exit }} END {{ exit !found }}' "/etc/$db" && rc=0
done
exit $rc
"""


def hostile_home_base(dest: pathlib.Path, home: str) -> pathlib.Path:
    """DEST: the Debian base (debian_base) with one more layer in which the
    account `user` exists with HOME (a path of mkosi's own mounts: the
    checkout at /work/src/…): mkosi.postinst made such a home, owned by
    the base's user, on the build machine."""
    debian_base(dest)
    with tarfile.open(debian_tarball()) as t:
        passwd = t.extractfile("etc/passwd").read().decode()
        group = t.extractfile("etc/group").read().decode()
    add_layer(dest, REF, {"/etc/passwd": passwd + f"user:x:{NODE_UID + 1}:{NODE_UID + 1}::{home}:/bin/bash\n",
                          "/etc/group": group + f"user:x:{NODE_UID + 1}:\n"})
    return dest


def escape_layout(dest: pathlib.Path, debian: bool) -> pathlib.Path:
    """DEST: a layout with dpkg's and apt's files whose PRETTY_NAME carries
    ESCAPES: with DEBIAN, trixie's (it passes builder_base.py's checks),
    else Fedora's ID (refused, naming PRETTY_NAME)."""
    osr = DEBIAN_TRIXIE["/etc/os-release"] if debian else "ID=fedora\n"
    return tiny_layout(dest, {**DEBIAN_TRIXIE, "/etc/os-release": f'{osr}PRETTY_NAME="Evil {ESCAPES} Linux"\n'})


def escape_tag_archive(layout: pathlib.Path, ref: str, dest: pathlib.Path) -> pathlib.Path:
    """DEST: LAYOUT's REF as a docker archive whose manifest.json RepoTags
    carry ESCAPES (docker save writes what it is given there)."""
    plain = dest.with_suffix(".plain.tar")
    docker_archive(layout, ref, plain, "team/app:1")
    with tarfile.open(plain) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name == "manifest.json":
                entries = json.loads(data)
                entries[0]["RepoTags"] = [f"team/app{ESCAPES}:1"]
                data = json.dumps(entries).encode()
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)
    plain.unlink()
    return dest


if __name__ == "__main__":
    # By hand and in ci/image.yml: bases.py DIR writes the Debian base's
    # layout to DIR (ref v1), for `make flavor=e2b-rt base=oci:DIR:v1`.
    if len(sys.argv) != 2:
        sys.exit("usage: bases.py DIR")
    print(f"oci:{debian_base(pathlib.Path(sys.argv[1]).resolve())}:{REF}")
