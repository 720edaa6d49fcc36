"""Builder mode, built for real: our runtime installed onto a Debian image of
one's own (bases.py: debootstrap + umoci, three layers, a whiteout, a marker
file, `jq`, an account `node` on uid 1000), with a template on top
(builder_image.py: `make image template=DIR`, `base = oci:team-node:v1`).

What the base had is still there; what we add is there and is ours; the
labels and manifest.json name the base by its name and the digest of the
test's own layout. The checks of tests/image/test_image_build.py that hold
for any image of ours run here too, against this build: they are imported
by name below, so pytest collects them in this module, where the fixture
`built` (and `tree` and `layer`, imported too, over it) is this build's.
(Not imported: the checks of what a flavor alone decides, uid 1000 for
`user`, no docs, the layer's size, which a base of one's own changes.)"""
import json
import pathlib
import re
import subprocess
import sys

import pytest

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "image"))
import bases  # noqa: E402
import builder_image  # noqa: E402
import testimages  # noqa: E402
from image_helpers import real_envd  # noqa: E402,F401  (a fixture, used by name)
from test_image_build import layer, tree  # noqa: E402,F401  (fixtures over `built`, this build's)
from test_image_build import (  # noqa: E402,F401  (collected here, run against this build)
    test_apt_sources_are_the_build_sources, test_binaries_and_modes, test_envd_version_matches_binary,
    test_ext4_passes_e2fsck, test_ext4_superblock_is_fixed, test_git_is_a_client_without_server_helpers,
    test_guard_and_relay_read_one_list_of_guarded_ports, test_guest_tools_link_against_image_libraries,
    test_manifest_fields, test_manifest_outputs, test_manifest_records_envd_source_go_and_modules,
    test_nfs_volume_mounts_need_no_rpcbind, test_no_stray_listeners, test_oci_blobs_match_their_digests,
    test_oci_layout_passes_skopeo, test_oci_layout_passes_umoci, test_outputs_exist,
    test_units_enabled, test_units_installed_ordered_and_guard_required,
)

ROOT = testimages.ROOT
OCI = "org.opencontainers.image."


@pytest.fixture(scope="module")
def bb():
    b = builder_image.web_on_image()
    if not b.built.ok or b.built.cp.returncode != 0:
        pytest.fail(b.built.failure())
    return b


@pytest.fixture(scope="module")
def built(bb):
    return bb.built


def accounts(tree, name):
    return {l.split(":")[0]: l.split(":") for l in (tree / "etc" / name).read_text().splitlines()}


def test_base_name_and_digest_in_labels_and_manifest(bb):
    labels = testimages.check_labels(bb.built, builder_image.NAME, "e2b-rt", "10000,10052,10053,49983")
    assert bb.base_digest.startswith("sha256:")
    assert labels[OCI + "base.name"] == bb.base_name == "team-node:v1"
    assert labels[OCI + "base.digest"] == bb.base_digest
    assert bb.built.manifest["base"] == {"name": "team-node:v1", "digest": bb.base_digest, "distro": "debian",
                                         "release": "trixie", "os": "Debian GNU/Linux 13 (trixie)"}
    # No path of the build machine in what the image says about itself.
    assert str(bb.template) not in json.dumps(bb.built.manifest)


def test_the_base_is_kept(bb, tree):
    assert (tree / bases.MARKER.lstrip("/")).read_text() == bases.MARKER_TEXT
    assert not (tree / bases.DOOMED.lstrip("/")).exists(), "the base's whiteout was not applied"
    pkgs = {p["name"] for p in bb.built.manifest["packages"]}
    assert "jq" in pkgs
    cp = subprocess.run(["chroot", str(tree), "jq", "-n", "1+1"], capture_output=True, text=True, timeout=30)
    assert cp.stdout.strip() == "2", cp.stderr
    # The base's account on uid 1000 is untouched, with its home.
    node = accounts(tree, "passwd")["node"]
    assert node[2:4] == [str(bases.NODE_UID)] * 2 and node[5] == "/home/node"
    assert (tree / "home/node").stat().st_uid == bases.NODE_UID


def test_user_gets_another_uid_and_sudo(tree):
    passwd, group = accounts(tree, "passwd"), accounts(tree, "group")
    user = passwd["user"]
    assert user[2] != str(bases.NODE_UID) and int(user[2]) >= 1000
    assert user[5:7] == ["/home/user", "/bin/bash"]
    assert group["user"][2] == user[3]
    assert (tree / "home/user").stat().st_uid == int(user[2])
    assert len({p[2] for p in passwd.values()}) == len(passwd), "two accounts share a uid"
    cp = subprocess.run(["chroot", str(tree), "sudo", "-n", "-l", "-U", "user"], capture_output=True,
                        text=True, timeout=30)
    assert "NOPASSWD: ALL" in cp.stdout, cp.stdout + cp.stderr


def test_systemd_and_our_runtime_added(bb, tree):
    pkgs = {p["name"] for p in bb.built.manifest["packages"]}
    assert {"systemd", "systemd-sysv", "sudo", "iptables", "socat", "busybox"} <= pkgs
    assert (tree / "sbin/init").resolve().name == "systemd"
    for tool in ("envd", "envd-guard", "mmds-serve", "vsock-relay", "e2b-clone"):
        assert (tree / "usr/bin" / tool).is_file(), tool
    for unit in ("envd.service", "envd-guard.service", "mmds.service", "vsock-relay.service"):
        assert (tree / "usr/lib/systemd/system" / unit).read_text() == (ROOT / "units" / unit).read_text(), unit


def test_template_on_the_base(tree):
    st = (tree / "home/user/site/index.html").stat()
    user = accounts(tree, "passwd")["user"]
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (int(user[2]), int(user[3]), 0o644)
    assert (tree / "etc/systemd/system/multi-user.target.wants/e2b-template.service").is_symlink()
    assert not (tree / "usr/lib/e2b-template-build").exists()


def test_build_log_names_the_base(bb):
    err = bb.built.cp.stderr
    assert re.search(rf"image: base: oci:{builder_image.LAYOUT}:v1 = team-node:v1@{bb.base_digest} "
                     r"\(Debian GNU/Linux 13 \(trixie\)\)", err), err[-3000:]
