"""`make flavor=e2b-rt base=docker-archive:FILE`: builder mode without a
template, from a docker archive (as `docker save` writes one; made here by
skopeo from a debootstrap-made base of bases.py) of Debian 12 (bookworm),
the other release we serve, whose package names differ from trixie's
(libssl3, not libssl3t64: os-image/mkosi.conf.d/). The result is e2b-rt on
that image: its labels are e2b-rt's, with the base's tag and digest; the
base's files, packages and accounts are kept; our tools, compiled inside
the image, run there. (The trixie template build on an OCI layout, and its
boot, are test_builder_build.py and builder_boot.py.)"""
import json
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

OUT = testimages.ROOT / "out" / "test-builder-flavor"
TAG = "team/node:22"
RELEASE = "bookworm"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("flavor-base")
    layout = bases.debian_base(d / "layout", RELEASE)
    archive = bases.docker_archive(layout, bases.REF, d / "team-node.tar", TAG)
    digest = json.loads(subprocess.run(["skopeo", "inspect", f"docker-archive:{archive}"], capture_output=True,
                                       text=True, check=True).stdout)["Digest"]
    shutil.rmtree(OUT, ignore_errors=True)
    cp = testimages.make("e2b-rt", OUT, "image", f"base=docker-archive:{archive}")
    b = testimages.Built("e2b-rt", OUT / "e2b-rt", cp)
    if not b.ok or cp.returncode != 0:
        pytest.fail(b.failure())
    b.base_digest = digest
    b.base_name = bases.archive_tag(archive)
    return b


def test_labels_are_e2b_rt_on_the_base(built):
    labels = testimages.check_labels(built, "e2b-rt", "e2b-rt", "10000,10052,10053,49983")
    # The archive's own tag: TAG as skopeo (like `docker save`) normalized it.
    assert built.base_name.endswith("/" + TAG)
    assert labels["org.opencontainers.image.base.name"] == built.base_name
    assert labels["org.opencontainers.image.base.digest"] == built.base_digest
    assert labels["org.opencontainers.image.description"].endswith(f", installed onto the image {built.base_name}")
    assert labels["org.e2b-images.ready"] == "url http://127.0.0.1:49983/health"
    assert built.manifest["base"]["digest"] == built.base_digest
    assert labels["org.e2b-images.distro"] == f"debian/{RELEASE}"
    assert built.manifest["base"]["os"] == "Debian GNU/Linux 12 (bookworm)"


def test_base_kept_and_runtime_added(built):
    t = built.tree
    assert (t / bases.MARKER.lstrip("/")).read_text() == bases.MARKER_TEXT
    assert not (t / bases.DOOMED.lstrip("/")).exists()
    pkgs = {p["name"] for p in built.manifest["packages"]}
    assert {"jq", "systemd", "sudo", "libssl3"} <= pkgs and "libssl3t64" not in pkgs
    assert (t / "etc/debian_version").read_text().startswith("12.")
    for tool, arg in (("envd-guard", "--help"), ("mmds-serve", "--help")):
        cp = subprocess.run(["chroot", str(t), f"/usr/bin/{tool}", arg], capture_output=True, text=True,
                            timeout=30)
        assert cp.returncode in (0, 2) and "error while loading shared libraries" not in cp.stderr, cp.stderr
    passwd = {l.split(":")[0]: l.split(":") for l in (t / "etc/passwd").read_text().splitlines()}
    assert passwd["node"][2] == str(bases.NODE_UID) and passwd["user"][2] != str(bases.NODE_UID)
    assert (t / "etc/envd-version").read_text().strip() == built.manifest["labels"]["org.e2b-images.envd-version"]
    for tool in ("envd", "envd-guard", "mmds-serve", "vsock-relay", "e2b-clone"):
        assert (t / "usr/bin" / tool).is_file(), tool
    for unit in ("envd-guard.service", "envd.service"):
        # (links to /usr/lib/…, absolute: dangling from the host, so no glob)
        assert [w for w in (t / "etc/systemd/system").glob("*.wants") if (w / unit).is_symlink()], \
            f"{unit} not enabled"
    # The base's device nodes (debootstrap made /dev/null and friends) are
    # not in the image: the guest's /dev is a devtmpfs.
    assert bases.first_device_node(bases.debian_tarball(RELEASE)) == "dev/console"  # the base has them
    devices = [p for p in (t / "dev").rglob("*")
               if stat.S_ISCHR(p.lstat().st_mode) or stat.S_ISBLK(p.lstat().st_mode)]
    assert devices == [], devices[:10]
