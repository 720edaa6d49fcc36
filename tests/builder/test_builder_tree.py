"""A base's tree is hostile input (issue 37, findings 3 and 4): the build
machine works on it as root, outside any chroot, in os-image/builder_base.py
(before mkosi) and os-image/mkosi.finalize (after the packages). Every such
operation resolves its paths inside the image root (sandbox/inroot.py), so
a symlink of the base, absolute or through `..`, cannot aim a removal or a
write at the build machine's files or the checkout.

Run on fake roots made here (bases.escaping_tree, bases.apt_escape_layout)
with a directory OUTSIDE standing for the build machine's /etc and the
checkout, which must be untouched, byte for byte and owner for owner.
mkosi.finalize is the real script; its two chroot steps (journalctl,
ldconfig) go to a stand-in mkosi-chroot that only records them, because the
real one needs mkosi's sandbox and the image's own binaries. The real
umoci/make path for finding 3 is test_apt_state_escape_through_make."""
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT
sys.path.insert(0, str(ROOT / "os-image"))
import builder_base  # noqa: E402
from sandbox import inroot, loader  # noqa: E402


@pytest.fixture
def outside(tmp_path):
    return bases.outside_files(tmp_path / "outside")


def test_drop_apt_state_stays_inside_the_root(tmp_path, outside):
    """The reproduced finding: a layer with var/lib -> /etc made the build
    delete the host's /etc/apt/*; var/cache climbs out with `..`."""
    root = tmp_path / "rootfs"
    root.mkdir()
    for path, target in bases.escaping_links(outside, "apt").items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / path.lstrip("/"))
    before = bases.tree_state(outside)
    builder_base.drop_apt_state(str(root))
    assert bases.tree_state(outside) == before


def test_drop_apt_state_follows_links_inside_the_root(tmp_path, outside):
    """What apt in the image would see: var/lib -> /srv/state is the image's
    /srv/state, emptied; the build machine's /srv is not looked at."""
    root = tmp_path / "rootfs"
    (root / "srv/state/apt/lists").mkdir(parents=True)
    (root / "srv/state/apt/extended_states").write_text("Package: jq\nAuto-Installed: 1\n")
    (root / "var/cache/apt/archives").mkdir(parents=True)
    (root / "var/cache/apt/pkgcache.bin").write_text("x")
    (root / "var").mkdir(exist_ok=True)
    os.symlink("/srv/state", root / "var/lib")
    builder_base.drop_apt_state(str(root))
    assert list((root / "srv/state/apt").iterdir()) == []
    assert list((root / "var/cache/apt").iterdir()) == []


def test_special_files_go_without_following_links(tmp_path, outside):
    root = tmp_path / "rootfs"
    (root / "dev").mkdir(parents=True)
    os.mkfifo(root / "dev/fifo")
    os.mkfifo(outside / "checkout/fifo")
    os.symlink(outside / "checkout", root / "dev/outside")
    before = bases.tree_state(outside)
    builder_base.drop_special_files(str(root))
    assert not (root / "dev/fifo").exists()
    assert bases.tree_state(outside) == before


def test_os_release_is_read_inside_the_root(tmp_path, outside):
    """An absolute /etc/os-release symlink is the image's file, never the build machine's."""
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (outside / "os-release").write_text('ID=debian\nPRETTY_NAME="the build machine"\n')
    os.symlink(outside / "os-release", root / "etc/os-release")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert builder_base.os_release(fd) == {}
    finally:
        os.close(fd)


def run_finalize(root: pathlib.Path, tmp: pathlib.Path, script: pathlib.Path = ROOT / "os-image/mkosi.finalize",
                 env: dict | None = None):
    """The real mkosi.finalize on ROOT, as mkosi runs it (BUILDROOT, SRCDIR,
    and ENV: mkosi's --environment), with a stand-in mkosi-chroot that
    records its calls; the build machine's own tools on PATH, as mkosi's
    tools tree is."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    calls = tmp / "chroot-calls"
    stand_in = bin_dir / "mkosi-chroot"
    stand_in.write_text(f"#!/bin/sh\n# A stand-in for mkosi's chroot helper (tests/builder/test_builder_tree.py):"
                        f" records the call only.\necho \"$*\" >> {calls}\n")
    stand_in.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", "BUILDROOT": str(root), "SRCDIR": str(ROOT),
           "SOURCE_DATE_EPOCH": "1700000000", "LC_ALL": "C", **(env or {})}
    cp = subprocess.run(["/bin/sh", str(script)], env=env, capture_output=True, text=True, timeout=120)
    cp.calls = calls.read_text().splitlines() if calls.exists() else []
    return cp


def test_finalize_stays_inside_the_root(tmp_path, outside):
    """usr/share/lintian -> the checkout (absolute), usr/share/man -> it
    through `..`, /etc/machine-id and /etc/.updated -> its files: the
    checkout keeps every byte, and the image gets what finalize makes."""
    root = bases.escaping_tree(tmp_path / "rootfs", outside)
    before = bases.tree_state(outside)
    cp = run_finalize(root, tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert bases.tree_state(outside) == before
    assert cp.calls == ["journalctl --update-catalog", "ldconfig"]
    # The image's own files: a regular, empty machine-id and stamps in place of the links.
    assert (root / "etc/machine-id").is_file() and not (root / "etc/machine-id").is_symlink()
    assert (root / "etc/machine-id").read_bytes() == b""
    stamp = root / "etc/.updated"
    assert not stamp.is_symlink() and "TIMESTAMP_NSEC=1700000000000000000" in stamp.read_text()
    assert stamp.stat().st_mtime == 1700000000
    # And the rest of its work, inside the root.
    day = 1700000000 // 86400
    assert (root / "etc/shadow").read_text() == f"root:*:{day}:0:99999:7:::\n"
    assert not (root / "etc/passwd-").exists() and not (root / "tmp/scratch").exists()
    assert not (root / "usr/lib/git-core/git-shell").exists()
    assert (root / "usr/bin/git").stat().st_ino == (root / "usr/lib/git-core/git").stat().st_ino
    assert sorted(p.name for p in (root / "usr/share/doc/git").iterdir()) == ["copyright"]
    assert (root / "var/lib/apt/lists/partial").is_dir() and (root / "var/cache/apt/archives/partial").is_dir()


def test_finalize_of_a_template_makes_the_cache_with_the_build_machines_ldconfig(tmp_path, outside):
    """Issue 49, finding 5: a template can replace the image's ldconfig, so
    for a template (E2B_TEMPLATE=1, which template/template.sh passes) the
    linker cache is made by the build machine's `ldconfig -r`, and the
    image's is never run; its aux-cache goes as before. The root's libz,
    planted as the image's, is what the cache maps."""
    root = bases.escaping_tree(tmp_path / "rootfs", outside)
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "usr/lib/x86_64-linux-gnu/libz.so.1").write_bytes(pathlib.Path("/lib/x86_64-linux-gnu/libz.so.1")
                                                              .read_bytes())
    before = bases.tree_state(outside)
    cp = run_finalize(root, tmp_path, env={"E2B_TEMPLATE": "1"})
    assert cp.returncode == 0, cp.stderr
    assert cp.calls == ["journalctl --update-catalog"]
    assert bases.tree_state(outside) == before
    entries = loader.parse_cache((root / "etc/ld.so.cache").read_bytes())
    assert ("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1") in [(n, p) for n, p, *_ in entries]
    assert not (root / "var/cache/ldconfig/aux-cache").exists()


def test_inroot_refusal_names_the_path(tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()
    cp = subprocess.run(["/usr/bin/python3", "-m", "sandbox.inroot", root, "cat", "etc/nothere"],
                        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 1
    assert cp.stderr == f"inroot: cat {root}/etc/nothere: No such file or directory\n"


def test_inroot_write_replaces_a_link_it_does_not_follow(tmp_path, outside):
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    os.symlink("../../../../../../../../../../.." + str(outside / "checkout/Makefile"), root / "etc/hostname")
    before = bases.tree_state(outside)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inroot.write(fd, "etc/hostname", b"e2b\n")
    finally:
        os.close(fd)
    assert bases.tree_state(outside) == before
    assert (root / "etc/hostname").read_text() == "e2b\n" and not (root / "etc/hostname").is_symlink()


def refused_leaving_outside(tmp_path, layout, outside, expect: str) -> None:
    """`make image base=oci:LAYOUT` is refused before mkosi, saying EXPECT,
    with OUTSIDE as it was and nothing in out/."""
    before = bases.tree_state(outside)
    out = tmp_path / "out"
    cp = testimages.make("e2b-rt", out, "image", f"base=oci:{layout}", recipes=testimages.SHIPPED_RECIPES,
                         timeout=600)
    assert cp.returncode != 0
    assert expect in cp.stderr, cp.stderr[-3000:]
    assert "image: mkosi:" not in cp.stderr
    assert bases.tree_state(outside) == before
    assert not (out / "e2b-rt").exists()


def test_apt_state_escape_through_make(tmp_path, outside):
    """Finding 3 end to end: `make image base=oci:…` with a base whose
    var/lib and var/cache lead out, unpacked (and its apt state emptied) by
    the real builder_base.py and umoci; the base is then refused (its
    /var/lib is a symlink), before mkosi, and OUTSIDE is as it was."""
    layout = bases.apt_escape_layout(tmp_path / "hostile", outside)
    refused_leaving_outside(tmp_path, layout, outside,
                            f"base: base oci:{layout}: /var/lib is a symlink (to {outside}/etc)")


def test_base_with_a_link_where_mkosi_works_is_refused(tmp_path, outside):
    """mkosi itself removes /var/lib/dbus/machine-id (and a few more) from
    the build machine after the packages: a base whose /var/lib/dbus leads
    out is refused before mkosi runs."""
    layout = bases.mkosi_escape_layout(tmp_path / "hostile", outside)
    refused_leaving_outside(
        tmp_path, layout, outside,
        f"base: base oci:{layout}: /var/lib/dbus is a symlink (to {outside}/dbus); mkosi works on "
        "/var/lib/dbus/machine-id from the build machine, outside the image, and would follow it there: "
        "the base must have a directory at /var/lib/dbus")
