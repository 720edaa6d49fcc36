"""envd's E2B volumes against the e2b-rt tree: the pool's /init with
volumeMounts reaches the real envd through our host channel (sdk_stack.sh),
and envd's `mount -t nfs` must reach the image's mount.nfs (nfs-common).
How far this goes on our machines: their kernel has no NFS client and no
NFS server runs here, so the mount itself fails; the mount through a real
NFSv3 server (E2B's proxy) is a boot's job. That the image's mount.nfs keeps
locks local (no statd, no rpcbind) is tests/image's
test_nfs_volume_mounts_need_no_rpcbind.

Tree: $E2B_SDK_RT_TREE, or the session's e2b-rt build (testimages)."""
import pathlib

import pytest

from expectations import VOLUME_CHECKS
from sdk_helpers import StackRun, rt_tree  # noqa: F401  (rt_tree is a fixture, used by name)

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def volume_run(rt_tree, tmp_path_factory):
    return StackRun("e2b-rt", rt_tree, tmp_path_factory.mktemp("sdk-volumes"),
                    ["/usr/bin/python3", HERE / "probe_envd_volumes.py"])


@pytest.mark.parametrize("name", list(VOLUME_CHECKS))
def test_volume_case(volume_run, name):
    VOLUME_CHECKS[name](volume_run.case(name), "py", None)


def test_volume_probe_reported_every_case(volume_run):
    assert list(volume_run.cases) == list(VOLUME_CHECKS), volume_run.output[-3000:]
    assert volume_run.returncode == 0, volume_run.output[-3000:]
