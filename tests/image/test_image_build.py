"""The built e2b-rt image: its tree, OCI layout, ext4 image and manifest.

One real mkosi build (the `built` session fixture), then checks against the
tree mkosi produced, the OCI layer that was packed from it, and the ext4
image, with real tools (skopeo, umoci, e2fsck, debugfs, systemctl --root,
chroot).
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import tarfile

import pytest

import testimages
from image_helpers import (  # noqa: F401  (fixtures are used by name; tree is re-exported)
    FLAVOR, ROOT, built, make_image, real_envd, sha256_file, tree, unit, words,
)

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

GUARDED_UNITS = ("envd.service", "mmds.socket", "mmds-vsock.socket", "mmds.service")


@pytest.fixture(scope="module")
def layer(built):
    """{name: TarInfo} of the OCI layer, plus the tarfile for content reads."""
    m = built.manifest["outputs"]["oci"]
    blob = built.dir / "oci/blobs/sha256" / m["layers"][0]["digest"].split(":")[1]
    t = tarfile.open(blob, "r:gz")
    members = {mi.name: mi for mi in t.getmembers()}
    yield members, t
    t.close()


# --- outputs -------------------------------------------------------------

def test_outputs_exist(built):
    for p in ("oci/index.json", "oci/oci-layout", "rootfs.ext4", "manifest.json"):
        assert (built.dir / p).is_file(), p


def test_oci_layout_passes_skopeo(built):
    if not shutil.which("skopeo"):
        pytest.skip("skopeo not installed")
    cp = subprocess.run(["skopeo", "inspect", f"oci:{built.dir / 'oci'}:latest"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    info = json.loads(cp.stdout)
    oci = built.manifest["outputs"]["oci"]
    assert info["Digest"] == oci["manifest"]["digest"]
    assert info["Layers"] == [oci["layers"][0]["digest"]]
    assert info["Architecture"] == "amd64" and info["Os"] == "linux"
    cfg = subprocess.run(["skopeo", "inspect", "--config", f"oci:{built.dir / 'oci'}:latest"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(cfg.stdout)["rootfs"]["diff_ids"] == [oci["layers"][0]["diff_id"]]


def test_oci_layout_passes_umoci(built):
    if not shutil.which("umoci"):
        pytest.skip("umoci not installed")
    cp = subprocess.run(["umoci", "stat", "--image", f"{built.dir / 'oci'}:latest"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr


def test_oci_blobs_match_their_digests(built):
    blobs = built.dir / "oci/blobs/sha256"
    for b in blobs.iterdir():
        assert sha256_file(b) == b.name, f"blob {b.name} does not hash to its name"
    index = json.loads((built.dir / "oci/index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "latest"
    manifest_blob = blobs / entry["digest"].split(":")[1]
    assert entry["size"] == manifest_blob.stat().st_size


def test_labels_read_back_with_skopeo(built):
    labels = testimages.check_labels(built, "e2b-rt", "e2b-rt", "10000,10052,10053,49983")
    assert labels["org.e2b-images.ready"] == "url http://127.0.0.1:49983/health"
    # A flavor's base is the archive it was installed from, pinned by its InRelease.
    suite = built.manifest["archive"]["suites"][0]
    assert labels["org.opencontainers.image.base.digest"] == "sha256:" + suite["inrelease_sha256"]


def test_ext4_passes_e2fsck(built):
    img = built.dir / "rootfs.ext4"
    cp = subprocess.run(["e2fsck", "-fn", str(img)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def debugfs(img, request):
    return subprocess.run(["debugfs", "-R", request, str(img)], capture_output=True,
                          text=True, timeout=120).stdout


def test_ext4_holds_the_image(built, real_envd):
    img = built.dir / "rootfs.ext4"
    assert debugfs(img, "cat /etc/envd-version") == real_envd[1]
    st = debugfs(img, "stat /usr/bin/envd")
    assert re.search(r"Mode:\s+0755", st), st
    assert re.search(r"User:\s+0\s+Group:\s+0", st), st
    home = debugfs(img, "stat /home/user")
    assert re.search(r"User:\s+1000\s+Group:\s+1000", home), home
    sudo = debugfs(img, "stat /etc/sudoers.d/user")
    assert re.search(r"Mode:\s+0440", sudo), sudo
    # Times are the commit's, not the build's.
    epoch = built.manifest["source_date_epoch"]
    assert f"ctime: 0x{epoch:08x}" in st and f"mtime: 0x{epoch:08x}" in st, st


def test_ext4_superblock_is_fixed(built):
    img = built.dir / "rootfs.ext4"
    sb = subprocess.run(["dumpe2fs", "-h", str(img)], capture_output=True, text=True,
                        timeout=60).stdout
    m = built.manifest["outputs"]["rootfs.ext4"]
    assert f"Filesystem UUID:          {m['uuid']}" in sb
    assert "orphan_file" not in sb and "metadata_csum_seed" not in sb


# --- manifest ------------------------------------------------------------

def test_manifest_fields(built, real_envd):
    m = built.manifest
    assert (m["flavor"], m["distro"], m["release"]) == (FLAVOR, "debian", "trixie")
    suites = {s["suite"]: s for s in m["archive"]["suites"]}
    assert set(suites) == {"trixie", "trixie-updates", "trixie-security"}
    for s in suites.values():
        assert re.fullmatch(r"[0-9a-f]{64}", s["inrelease_sha256"] or ""), s
        assert s["date"], s
    pkgs = {p["name"]: p["version"] for p in m["packages"]}
    for name in ("systemd", "sudo", "libnftnl11", "libjansson4", "socat", "iptables"):
        assert pkgs.get(name), f"{name} missing from manifest packages"
    status = (built.tree / "var/lib/dpkg/status").read_text()
    installed = re.findall(r"^Package: (\S+)\n(?:.+\n)*?Status: install ok installed", status, re.M)
    assert sorted(set(installed)) == sorted(pkgs)
    (envd,) = [a for a in m["artifacts"] if a["name"] == "envd"]
    assert envd["sha256"] == sha256_file(real_envd[0])
    assert envd["path"] == "/usr/bin/envd" and envd["version"] == real_envd[1].strip()


def test_manifest_records_envd_source_go_and_modules(built):
    """envd=source: the source pin, the commit, the Go version and every module
    with its version and go.sum hash, as `go version -m` reads them from the
    shipped binary itself."""
    (envd,) = [a for a in built.manifest["artifacts"] if a["name"] == "envd"]
    pin = testimages.lock_stanza(testimages.SHIPPED_ENVD_LOCK, "envd-source")
    assert envd["built_from"] == {k: pin[k] for k in ("commit", "name", "tree_sha256", "url", "version")}
    assert envd["go"] == testimages.make_var("go_toolchain")
    assert envd["build_settings"]["CGO_ENABLED"] == "0" and envd["build_settings"]["-trimpath"] == "true"
    go = subprocess.run(["bash", str(ROOT / "mk/find-go.sh")], capture_output=True, text=True, check=True).stdout.strip()
    cp = subprocess.run([go, "version", "-m", "-json", str(built.tree / "usr/bin/envd")],
                        capture_output=True, text=True, check=True, timeout=60)
    deps = json.loads(cp.stdout)["Deps"]
    assert [(m["path"], m["version"], m.get("sum")) for m in envd["modules"]] == \
        [(d["Path"], d["Version"], d.get("Sum")) for d in deps]
    # Every module outside the tree is pinned by its go.sum hash.
    assert all(m.get("sum", "").startswith("h1:") or m.get("replace") for m in envd["modules"]), envd["modules"]
    assert {m["path"] for m in envd["modules"]} >= {"connectrpc.com/connect", "github.com/creack/pty"}


def test_manifest_outputs(built):
    o = built.manifest["outputs"]
    assert o["rootfs.ext4"]["sha256"] == sha256_file(built.dir / "rootfs.ext4")
    layer = o["oci"]["layers"][0]
    blob = built.dir / "oci/blobs/sha256" / layer["digest"].split(":")[1]
    assert layer["size"] == blob.stat().st_size


def test_layer_within_size_target(built):
    # 60 MiB until git (the SDKs' sbx.git) came in: git and the perl it
    # depends on add ~28 MiB to the layer, ~19 MiB once mkosi.finalize has
    # dropped git's server helpers (os-image/README.md, "Tools").
    size = built.manifest["outputs"]["oci"]["layers"][0]["size"]
    assert size <= 70 * 1024 * 1024, f"compressed layer {size / 2**20:.1f} MiB > 70 MiB"


# --- contents ------------------------------------------------------------

def test_envd_version_matches_binary(tree, real_envd):
    assert (tree / "etc/envd-version").read_text() == real_envd[1]
    out = subprocess.run([str(tree / "usr/bin/envd"), "-version"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    assert out == (tree / "etc/envd-version").read_text()


def test_binaries_and_modes(layer, real_envd):
    members, t = layer
    for name in ("usr/bin/envd", "usr/bin/envd-guard", "usr/bin/mmds-serve"):
        mi = members[name]
        assert mi.isfile() and stat.S_IMODE(mi.mode) == 0o755 and (mi.uid, mi.gid) == (0, 0), name
    data = t.extractfile(members["usr/bin/envd"]).read()
    assert hashlib.sha256(data).hexdigest() == sha256_file(real_envd[0])
    for name in ("etc/shadow", "etc/gshadow"):
        assert stat.S_IMODE(members[name].mode) & 0o007 == 0, name


def test_git_is_a_client_without_server_helpers(tree):
    """git runs in the image (the SDKs' sbx.git), with what clone, fetch,
    push and pull use over file://, ssh and http(s); the server-side helpers
    dpkg is told to leave out (02-e2b-git-server) are gone, and git's second
    copy of itself is the same inode."""
    # git opens /dev/null: the host's /dev, bound in a mount namespace of its own.
    cp = subprocess.run(["unshare", "--mount", "sh", "-c", 'mount --bind /dev "$1/dev" && chroot "$1" git --version',
                         "sh", str(tree)], capture_output=True, text=True, timeout=30)
    assert re.fullmatch(r"git version 2\.\d+\.\d+\n", cp.stdout), cp.stdout + cp.stderr
    for helper in ("git-upload-pack", "git-receive-pack", "git-remote-https", "git-remote-http", "git-http-fetch"):
        assert (tree / "usr/lib/git-core" / helper).exists(), helper
    excluded = [line.split()[1] for line in
                (tree / "etc/dpkg/dpkg.cfg.d/02-e2b-git-server").read_text().splitlines()
                if line.startswith("path-exclude ")]
    assert "/usr/lib/git-core/git-daemon" in excluded
    assert [p for p in excluded if (tree / p.lstrip("/")).exists()] == []
    assert (tree / "usr/bin/git").stat().st_ino == (tree / "usr/lib/git-core/git").stat().st_ino


def test_guest_tools_link_against_image_libraries(tree):
    """Compiled inside the image: they run there (chroot), with its libc."""
    for tool, arg in (("envd-guard", "--help"), ("mmds-serve", "--help")):
        cp = subprocess.run(["chroot", str(tree), f"/usr/bin/{tool}", arg],
                            capture_output=True, text=True, timeout=30)
        assert "error while loading shared libraries" not in cp.stderr, cp.stderr
        assert "not found" not in cp.stderr, cp.stderr
        assert cp.returncode in (0, 2), (tool, cp.returncode, cp.stderr)
    needed = subprocess.run(["readelf", "-d", str(tree / "usr/bin/envd-guard")],
                            capture_output=True, text=True, check=True).stdout
    assert "libnftnl.so" in needed and "libmnl.so" in needed


def test_units_installed_ordered_and_guard_required(tree):
    envd = unit(tree, "envd.service")
    assert words(envd, "Service", "ExecStart")[0] == "/usr/bin/envd"
    assert "-isnotfc" not in words(envd, "Service", "ExecStart")
    assert "envd-guard.service" in words(envd, "Unit", "Requires")
    assert "envd-guard.service" in words(envd, "Unit", "After")
    assert {"mmds.socket", "mmds.service"} <= set(words(envd, "Unit", "After"))
    assert envd.get("Service", "Restart") == "always"
    for name in GUARDED_UNITS:
        u = unit(tree, name)
        assert "envd-guard.service" in words(u, "Unit", "Requires"), name
        assert "envd-guard.service" in words(u, "Unit", "After"), name
    guard = unit(tree, "envd-guard.service")
    assert words(guard, "Service", "ExecStart")[0] == "/usr/bin/envd-guard"


def test_units_enabled(tree):
    for name in ("envd-guard.service", "mmds.socket", "envd.service"):
        cp = subprocess.run(["systemctl", f"--root={tree}", "is-enabled", name],
                            capture_output=True, text=True, timeout=30)
        assert cp.stdout.strip() == "enabled", (name, cp.stdout, cp.stderr)
        # ... and by the symlink its [Install] section asks for.
        u = unit(tree, name)
        for target in words(u, "Install", "WantedBy"):
            link = tree / "etc/systemd/system" / f"{target}.wants" / name
            assert link.is_symlink(), link
            dest = pathlib.Path(os.readlink(link))
            assert dest.name == name
            assert (tree / str(dest).lstrip("/")).is_file() or \
                   (tree / "usr" / str(dest).lstrip("/")).is_file(), dest


def test_clone_step_resident(tree):
    """The clone step ships as a socket and one resident service, both
    enabled (the service at boot, so every snapshot has it running), with
    its tmpfiles; no per-connection template any more."""
    system = tree / "usr/lib/systemd/system"
    assert not (system / "e2b-clone@.service").exists()
    assert words(unit(tree, "e2b-clone.socket"), "Socket", "Accept") == ["no"]
    svc = unit(tree, "e2b-clone.service")
    assert words(svc, "Service", "Restart") == ["always"]
    assert words(svc, "Service", "ExecStart")[0] == "/usr/bin/e2b-clone"
    for name, target in (("e2b-clone.socket", "sockets.target"), ("e2b-clone.service", "multi-user.target")):
        cp = subprocess.run(["systemctl", f"--root={tree}", "is-enabled", name],
                            capture_output=True, text=True, timeout=30)
        assert cp.stdout.strip() == "enabled", (name, cp.stdout, cp.stderr)
        assert (tree / "etc/systemd/system" / f"{target}.wants" / name).is_symlink(), name
    assert "d /run/e2b 0755 root root -" in (tree / "usr/lib/tmpfiles.d/e2b-clone.conf").read_text()
    assert os.access(tree / "usr/bin/e2b-clone", os.X_OK)


def enabled_units(tree):
    names = set()
    for base in ("etc/systemd/system", "usr/lib/systemd/system"):
        for wants in (tree / base).glob("*.wants"):
            names.update(p.name for p in wants.iterdir())
        for wants in (tree / base).glob("*.requires"):
            names.update(p.name for p in wants.iterdir())
    return names


def unit_path(tree, name):
    for base in ("etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"):
        p = tree / base / name
        if p.exists():
            return p
    return None


LOOPBACK = re.compile(r"^(127\.[0-9.]+|\[::1\]|localhost)(:\d+)?$")


def test_no_stray_listeners(tree):
    """Every enabled socket unit listens on a unix/netlink socket, loopback, or
    (mmds.socket only) 169.254.169.254, which the guard protects, or (mmds-vsock.socket
    only) vsock port 10052, the host API that mmds-serve admits the host to alone."""
    offenders = []
    for name in sorted(enabled_units(tree)):
        if not name.endswith(".socket"):
            continue
        # An instance (vsock-proxy@49983.socket) is read from its template.
        instance = name.split("@", 1)[1].rsplit(".", 1)[0] if "@" in name else ""
        p = unit_path(tree, name) or unit_path(tree, name.replace(f"@{instance}.", "@."))
        assert p is not None, name
        for line in p.read_text().splitlines():
            k, _, v = line.strip().partition("=")
            if k not in ("ListenStream", "ListenDatagram", "ListenSequentialPacket"):
                continue
            v = v.strip().replace("%i", instance)
            if not v or v.startswith("/") or v.startswith("@") or LOOPBACK.match(v):
                continue
            # vsock reaches only the host of this VM, never a network.
            if v.startswith("vsock:"):
                continue
            if name == "mmds.socket" and v == "169.254.169.254:80":
                continue
            if name == "mmds-vsock.socket" and v == "vsock::10052":
                continue  # the host API, host peers only (mmds-serve's CID policy)
            offenders.append(f"{name}: {k}={v}")
    assert not offenders, offenders
    # No daemons that listen on the network by default. (rpcbind comes with
    # nfs-common and is never started: test_nfs_volume_mounts_need_no_rpcbind.)
    for path in ("usr/sbin/sshd", "usr/sbin/inetd", "usr/sbin/avahi-daemon",
                 "usr/sbin/exim4", "usr/sbin/dnsmasq", "usr/sbin/nginx"):
        assert not (tree / path).exists(), path
    pkgs = set(re.findall(r"^Package: (\S+)", (tree / "var/lib/dpkg/status").read_text(), re.M))
    assert not pkgs & {"openssh-server", "avahi-daemon", "exim4-daemon-light",
                       "postfix", "dnsmasq", "cups"}
    # resolved: the loopback stub only, no LLMNR/mDNS responders.
    conf = "\n".join(p.read_text() for p in (tree / "etc/systemd/resolved.conf.d").glob("*.conf"))
    assert "LLMNR=no" in conf and "MulticastDNS=no" in conf


def test_nfs_volume_mounts_need_no_rpcbind(tree):
    """envd mounts E2B volumes with `mount -t nfs` (tests/sdk's
    test_envd_volumes.py). nfs-common's rpcbind and statd would listen on
    every address: none of their units is enabled, and the image's mount.nfs,
    given envd's own options, mounts nolock, so it never starts statd (which
    would start rpcbind). `mount -f` shows the options mount.nfs would pass."""
    for name in ("rpcbind.socket", "rpcbind.service", "nfs-client.target"):
        cp = subprocess.run(["systemctl", f"--root={tree}", "is-enabled", name],
                            capture_output=True, text=True, timeout=30)
        assert cp.stdout.strip() == "disabled", (name, cp.stdout, cp.stderr)
    # statd's units are static: only start-statd (a mount with locks) starts them.
    assert [n for n in enabled_units(tree) if n.startswith(("rpc", "nfs"))] == []
    sys.path.insert(0, str(ROOT / "tests" / "sdk"))  # expectations.py holds envd's options
    from expectations import NFS_MOUNT_OPTIONS
    script = ('mount -t proc proc "$1/proc" && mount -t tmpfs tmpfs "$1/run" && mount -t tmpfs tmpfs "$1/mnt" && '
              'exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
              'mount -f -v -t nfs -o "$2" 127.0.0.1:/e2b-volume /mnt')
    cp = subprocess.run(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script, "sh", str(tree),
                         NFS_MOUNT_OPTIONS], capture_output=True, text=True, timeout=60)
    tried = re.findall(r"^mount\.nfs: trying text-based options '([^']*)'$", cp.stdout, re.M)
    assert cp.returncode == 0 and len(tried) == 1, cp.stdout + cp.stderr
    assert "nolock" in tried[0].split(","), tried


def test_user_home_and_sudo(built, tree, layer):
    passwd = {l.split(":")[0]: l.split(":") for l in (tree / "etc/passwd").read_text().splitlines()}
    user = passwd["user"]
    assert user[2:4] == ["1000", "1000"] and user[5:7] == ["/home/user", "/bin/bash"]
    shadow = {l.split(":")[0]: l.split(":") for l in (tree / "etc/shadow").read_text().splitlines()}
    epoch_day = str(built.manifest["source_date_epoch"] // 86400)
    assert shadow["user"][2] == epoch_day and shadow["root"][2] == epoch_day, "shadow dates"
    group = {l.split(":")[0]: l.split(":") for l in (tree / "etc/group").read_text().splitlines()}
    assert group["user"][2] == "1000"
    members, _ = layer
    home = members["home/user"]
    assert home.isdir() and (home.uid, home.gid) == (1000, 1000)
    rule = members["etc/sudoers.d/user"]
    assert stat.S_IMODE(rule.mode) == 0o440 and (rule.uid, rule.gid) == (0, 0)
    cp = subprocess.run(["chroot", str(tree), "visudo", "-c"], capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = subprocess.run(["chroot", str(tree), "sudo", "-n", "-l", "-U", "user"],
                        capture_output=True, text=True, timeout=30)
    assert "NOPASSWD: ALL" in cp.stdout, cp.stdout + cp.stderr


def test_no_docs_caches_logs_or_machine_id(tree):
    assert not any((tree / "usr/share/man").rglob("*")) if (tree / "usr/share/man").exists() else True
    docs = [p for p in (tree / "usr/share/doc").rglob("*") if p.is_file()] \
        if (tree / "usr/share/doc").exists() else []
    assert all(p.name == "copyright" for p in docs), [str(p) for p in docs if p.name != "copyright"][:5]
    assert not [p for p in (tree / "var/lib/apt/lists").rglob("*") if p.is_file()]
    assert not [p for p in (tree / "var/cache/apt").rglob("*") if p.is_file()]
    assert not [p for p in (tree / "var/log").rglob("*") if p.is_file()]
    assert not (tree / "var/cache/ldconfig/aux-cache").exists()
    assert (tree / "etc/machine-id").read_text() == ""
    assert not (tree / "var/lib/dbus/machine-id").exists()
    locales = tree / "usr/share/locale"
    assert not locales.exists() or not any(p.is_file() for p in locales.rglob("*"))


def test_apt_sources_are_the_build_sources(tree):
    files = sorted(p.name for p in (tree / "etc/apt/sources.list.d").iterdir())
    assert files == ["e2b.sources"]
    text = (tree / "etc/apt/sources.list.d/e2b.sources").read_text()
    assert "debian-debug" not in text and "deb-src" not in text
    assert "Suites: trixie trixie-updates" in text


# --- reproducibility -----------------------------------------------------

def test_second_build_is_identical(built):
    """A second build of the same commit, in another directory, with the warm
    caches, gives the same OCI manifest/config/layer digests and ext4 bytes.
    (`make repro` does the stricter variant: two builds without the cached
    package installation.)"""
    out2 = ROOT / "out" / "test-image-2"
    shutil.rmtree(out2, ignore_errors=True)
    cp = make_image(out2, testimages.sources().recipes(FLAVOR), *testimages.sources().make_args(FLAVOR))
    assert cp.returncode == 0, cp.stderr[-6000:]
    cmp = subprocess.run(["/usr/bin/python3", str(ROOT / "os-image/compare.py"),
                          str(built.dir), str(out2 / FLAVOR)],
                         capture_output=True, text=True, timeout=600)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert "repro: identical" in cmp.stdout
    shutil.rmtree(out2, ignore_errors=True)


def test_guard_and_relay_read_one_list_of_guarded_ports(tree):
    """In the built image: /etc/e2b/guarded-ports is the repository's list, and
    both envd-guard.service and vsock-relay.service take their ports from it
    (one variable, so a drop-in cannot change one without the other)."""
    shipped = (tree / "etc/e2b/guarded-ports").read_text()
    assert shipped == (ROOT / "os-image/mkosi.extra/etc/e2b/guarded-ports").read_text()
    assert re.search(r"^E2B_GUARDED_PORTS=49983,49999,8888$", shipped, re.M), shipped
    for unit, flag in (("envd-guard.service", "--ports"), ("vsock-relay.service", "--guarded")):
        text = (tree / "usr/lib/systemd/system" / unit).read_text()
        assert "EnvironmentFile=/etc/e2b/guarded-ports" in text.splitlines(), unit
        assert f"{flag} ${{E2B_GUARDED_PORTS}}" in text, unit
