"""Real template builds (`make template=DIR`, mkosi, packing) of the examples
on the flavors the tests build anyway, so mkosi's cached installation is
warm (tests/testimages.py template_image()): what each template adds is in
the image, the labels say what it is, the guard is ours. Then the bad
inputs only a build can find: a package that does not exist, a build
command that fails, a build command that touches the guard; each fails
naming it and leaves no out/<name>/.

The data example (on e2b-ci) is built and checked by the image workflow
(ci/image.yml: tests/boot/template_data_boot.py, which boots it too, and
`make repro template=…`, two fresh builds): a third e2b-ci build does not fit
in make test's hour. The web example's boot is tests/boot/template_web_boot.py (the image workflow)."""
import os
import pathlib
import secrets
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "builder"))
import bases  # noqa: E402
import testimages  # noqa: E402
from sandbox import loader  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

ROOT = testimages.ROOT


def built(name, base):
    b = testimages.template_image(name, base)
    if not b.ok:
        pytest.fail(b.failure())
    return b


@pytest.fixture(scope="module")
def web():
    return built("web", "e2b-rt")


def packages(b):
    return {p["name"] for p in b.manifest["packages"]}


def test_web_outputs_and_labels(web):
    for p in ("oci/index.json", "rootfs.ext4", "manifest.json"):
        assert (web.dir / p).is_file(), p
    labels = testimages.check_labels(web, "web", "e2b-rt", "10000,10052,10053,49983")
    assert labels["org.e2b-images.ready"] == "port 3000"
    assert (labels["org.e2b-images.ready-timeout"], labels["org.e2b-images.vcpu"],
            labels["org.e2b-images.memory-mb"]) == ("30", "1", "256")
    assert web.manifest["flavor"] == "e2b-rt"


def test_web_adds_its_package_file_env_and_start_unit(web):
    t = web.tree
    assert "busybox" in packages(web)
    st = (t / "home/user/site/index.html").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1000, 1000, 0o644)
    assert (t / "home/user/site").stat().st_uid == 1000
    assert (t / "home/user/.bashrc").is_file()  # the user's home is still useradd's
    assert 'export SITE_DIR="/home/user/site"' in (t / "etc/profile.d/e2b-template-env.sh").read_text()
    unit = (t / "usr/lib/systemd/system/e2b-template.service").read_text()
    assert "User=user" in unit and "After=envd.service" in unit and "Restart=always" in unit
    assert (t / "etc/systemd/system/multi-user.target.wants/e2b-template.service").is_symlink()
    assert "busybox httpd -f -p 3000" in (t / "usr/lib/e2b-template/start").read_text()
    assert not (t / "usr/lib/e2b-template-build").exists()  # the staging is gone


def test_web_keeps_the_guard(web):
    t = web.tree
    assert (t / "etc/e2b/guarded-ports").read_text() == \
        (ROOT / "os-image/mkosi.extra/etc/e2b/guarded-ports").read_text()
    for u in ("envd-guard.service", "envd.service", "vsock-relay.service"):
        assert (t / "usr/lib/systemd/system" / u).read_text() == (ROOT / "units" / u).read_text(), u
    assert (t / "etc/systemd/system/sysinit.target.wants/envd-guard.service").is_symlink()


def bad_template(tmp_path, extra: str) -> pathlib.Path:
    d = tmp_path / "bad"
    shutil.copytree(testimages.EXAMPLES / "web", d)
    (d / "template.conf").write_text("name = bad\nbase = e2b-rt\n" + extra)
    return d


def failed_build(tmp_path, extra, web):
    """A bad template on e2b-rt, built after the web example (warm caches)."""
    out = tmp_path / "out"
    cp = testimages.build_template(bad_template(tmp_path, extra), "e2b-rt", out)
    assert cp.returncode != 0
    assert not (out / "bad").exists(), "a failed build left out/bad/"
    return cp.stderr


def test_package_that_does_not_exist(tmp_path, web):
    err = failed_build(tmp_path, "packages = busybox e2b-no-such-package\n", web)
    assert "Unable to locate package e2b-no-such-package" in err, err[-3000:]


def test_failing_build_command(tmp_path, web):
    err = failed_build(tmp_path, "run = echo first\nrun = echo about to fail; ls /no/such/dir\n", web)
    assert "build command 002 (run = echo about to fail; ls /no/such/dir) failed with exit status 2" in err, \
        err[-3000:]
    assert "template:   about to fail" in err  # its last lines


def test_build_command_cannot_unguard(tmp_path, web):
    err = failed_build(tmp_path, "run = sed -i 's/49983,//' /etc/e2b/guarded-ports\n", web)
    assert "the template changed what decides how the guard or envd start" in err, err[-3000:]
    assert "template:   guard: /etc/e2b/guarded-ports changed" in err, err[-3000:]


# Issue 37, finding 5: each a way a build command changed how the guard or
# envd start, which the record (sandbox/guard_record.py) did not cover
# before; one build, every one named with its rule.
UNGUARDS = {
    "mkdir -p /usr/local/lib/systemd/system/envd-guard.service.d && "
    "echo ExecStart=/bin/true > "
    "/usr/local/lib/systemd/system/envd-guard.service.d/x.conf":
        "units: /usr/local/lib/systemd/system/envd-guard.service.d added",
    "mkdir -p /etc/systemd/system/service.d && echo '[Service]' > /etc/systemd/system/service.d/x.conf":
        "units: /etc/systemd/system/service.d added",
    "ln -s /dev/null /etc/systemd/system/envd.service":
        "units: /etc/systemd/system/envd.service added",
    "install -m 0755 /bin/true /etc/systemd/system-generators/x":
        "generators: /etc/systemd/system-generators/x added",
    "echo 'disable envd-guard.service' > /usr/lib/systemd/system-preset/00-x.preset":
        "presets: /usr/lib/systemd/system-preset/00-x.preset added",
    "echo /usr/lib/x.so > /etc/ld.so.preload":
        "linker: /etc/ld.so.preload added",
    "mkdir -p /etc/systemd/system.conf.d && echo '[Manager]' > /etc/systemd/system.conf.d/x.conf":
        "manager: /etc/systemd/system.conf.d/x.conf added",
    "cp /usr/lib/x86_64-linux-gnu/libnftnl.so.11 /usr/local/lib/":
        "libraries: /usr/local/lib/libnftnl.so.11 added",
}


def each_named(tmp_path, commands: dict, web):
    """One bad template running every command of COMMANDS: each refusal is
    named, with its rule."""
    err = failed_build(tmp_path, "".join(f"run = {c}\n" for c in commands), web)
    for named in commands.values():
        assert f"template:   {named}" in err, (named, err[-4000:])


def test_build_commands_cannot_change_how_the_guard_starts(tmp_path, web):
    each_named(tmp_path, UNGUARDS, web)


# Issue 49, finding 5: what the loader takes besides the files the record
# had: a copy in a glibc-hwcaps level (taken first on a CPU of that level),
# an NSS module for PID 1, a library systemd dlopen()s (its .note.dlopen).
LOADER = {
    "mkdir -p /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2 && cp /usr/lib/x86_64-linux-gnu/libnftnl.so.11 "
    "/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/ && ldconfig":
        "libraries: /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libnftnl.so.11 added",
    "sed -i 's/^passwd:.*/& extrausers/' /etc/nsswitch.conf":
        "nss: /etc/nsswitch.conf changed",
    "cp /usr/lib/x86_64-linux-gnu/libkmod.so.2 /usr/local/lib/ && ldconfig":
        "libraries: /usr/local/lib/libkmod.so.2 added",
}


def test_build_commands_cannot_change_what_the_loader_takes(tmp_path, web):
    each_named(tmp_path, LOADER, web)


def test_a_library_systemd_may_dlopen_that_the_flavor_lacks_is_the_templates_to_install(tmp_path, web):
    """systemd's .note.dlopen names libgcrypt (journal sealing), which e2b-rt
    does not ship: a template may install it from the archive, as gnupg
    does, without the guard check refusing it (the ones the flavor has
    count: test_build_commands_cannot_change_what_the_loader_takes)."""
    tree = web.tree
    assert not list((tree / "usr/lib/x86_64-linux-gnu").glob("libgcrypt.so.20*"))
    out = tmp_path / "out"
    cp = testimages.build_template(bad_template(tmp_path, "packages = libgcrypt20\n"), "e2b-rt", out)
    assert cp.returncode == 0, cp.stderr[-4000:]
    assert list((out / "bad/work/mkosi-out/image/usr/lib/x86_64-linux-gnu").glob("libgcrypt.so.20*"))


def test_a_replaced_ldconfig_does_not_make_the_images_cache(tmp_path, web):
    """The image's ldconfig is the template's to replace: here by a script
    that makes the cache with /opt/evil (a copy of libnftnl) first. The
    step's own ldconfig run does send libnftnl.so.11 there; the image's
    cache is then made by the build machine's ldconfig
    (os-image/mkosi.finalize), so the image maps libnftnl where the web
    example's does, and the build passes: harmless. (Without that, the
    record's cache rule names it: tests/template/test_guard_loader.py.)"""
    evil = ("mkdir -p /opt/evil && cp /usr/lib/x86_64-linux-gnu/libnftnl.so.11 /opt/evil/ && "
            "cp /usr/sbin/ldconfig /opt/real-ldconfig && "
            "printf '#!/bin/sh\\necho /opt/evil > /etc/evil.conf\\nexec /opt/real-ldconfig -f /etc/evil.conf \"$@\"\\n' "
            "> /usr/sbin/ldconfig && chmod 0755 /usr/sbin/ldconfig && ldconfig && "
            "ldconfig -p | grep libnftnl.so.11 > /opt/after-the-step")
    out = tmp_path / "out"
    cp = testimages.build_template(bad_template(tmp_path, f"run = {evil}\n"), "e2b-rt", out)
    assert cp.returncode == 0, cp.stderr[-4000:]
    tree = out / "bad/work/mkosi-out/image"
    assert os.readlink(tree / "sbin") == "usr/sbin" and (tree / "usr/sbin/ldconfig").read_text().startswith("#!/bin/sh")
    assert "/opt/evil/libnftnl.so.11" in (tree / "opt/after-the-step").read_text()
    cache = loader.cache_view((tree / "etc/ld.so.cache").read_bytes(), ["libnftnl.so.11"])
    assert "/opt/evil" not in cache["libnftnl.so.11"]
    assert cache == loader.cache_view((web.tree / "etc/ld.so.cache").read_bytes(), ["libnftnl.so.11"])
    assert not (tree / "var/cache/ldconfig/aux-cache").exists()


def test_a_record_replaced_by_an_endless_file_is_refused_at_once(tmp_path, web):
    """Issue 49, finding 10: the host reads the record only as a regular
    file; a link in its place to /dev/zero (which the host would read
    without end) is refused, the build ending promptly."""
    err = failed_build(tmp_path, "run = ln -sf /dev/zero /work/out/e2b-template-guard.json\n", web)
    assert "the guard record" in err and "a link in its place" in err, err[-3000:]


def test_a_dpkg_status_linked_out_of_the_image_is_refused(tmp_path, web):
    """Issue 49, finding 10: the manifest's package list is read inside the
    image. A status that is a link to /var/lib/dpkg/status (itself, in the
    image; the build machine's own, read from the host as the link says)
    stops the build naming it, rather than list the host's packages."""
    err = failed_build(tmp_path, "run = rm /var/lib/dpkg/status && ln -s /var/lib/dpkg/status /var/lib/dpkg/status\n",
                       web)
    assert "var/lib/dpkg/status: Too many levels of symbolic links" in err, err[-3000:]
    assert "no manifest lists another system's packages" in err, err[-3000:]


def test_a_kernelspec_linked_out_of_the_image_is_not_the_hosts(tmp_path, web):
    """Issue 49, finding 10: the kernels label and manifest are read inside
    the image; a kernelspec directory linked to one of the build machine's
    is, in the image, a link to nothing."""
    host = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-kernel-", dir="/var/tmp"))
    try:
        (host / "kernel.json").write_text('{"argv": ["true"], "display_name": "the host\'s", "language": "x"}\n')
        out = tmp_path / "out"
        d = bad_template(tmp_path, f"run = mkdir -p /usr/local/share/jupyter/kernels && "
                                   f"ln -s {host} /usr/local/share/jupyter/kernels/hostkernel\n")
        cp = testimages.build_template(d, "e2b-rt", out)
        assert cp.returncode == 0, cp.stderr[-4000:]
        built = testimages.Built("e2b-rt", out / "bad", cp)
        assert "kernels" not in built.manifest
        labels, _ = testimages.skopeo_labels(built.dir / "oci")
        assert "org.e2b-images.kernels" not in labels, labels
    finally:
        shutil.rmtree(host, ignore_errors=True)


def test_build_command_cannot_rewrite_the_record_or_forge_its_line(tmp_path, web):
    """The record lies where a build command can reach it (mkosi's staging,
    /work/out in the chroot): rewritten, or vouched for by a line of the
    command's own on the build log, it is refused."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    err = failed_build(tmp_path / "a", "run = echo '{}' > /work/out/e2b-template-guard.json\n", web)
    assert "the guard record was changed after it was made" in err, err[-3000:]
    err = failed_build(tmp_path / "b", "run = echo; echo e2b-guard-record: sha256=0000\n", web)
    assert "the build log has 2 guard record lines, not one" in err, err[-3000:]


def test_build_command_output_is_escaped(tmp_path, web):
    """Issue 37, finding 7: what a build command prints (here a window-title
    escape and a bell) reaches the build log escaped (sandbox/termsafe.py),
    in mkosi's output and in the failure's last lines alike."""
    err = failed_build(tmp_path, "run = printf 'evil \\033]0;owned\\007 done\\n'; exit 3\n", web)
    assert "template:   evil \\x1b]0;owned\\x07 done" in err, err[-3000:]
    assert "\x1b" not in err and "\x07" not in err


def test_build_commands_cannot_reach_the_build_host(tmp_path, web):
    """Issue 37, finding 2 and what lies under it: a template's build
    commands run as root, and mkosi's own sandbox shares the host's pid
    namespace, so /proc/PID/root of any host process was the build host's
    whole file system, and /work/src the checkout, writable (now an overlay
    whose changes are dropped). With mkosi
    confined (sandbox/confine.py), the commands try both, and a device
    node, and the build succeeds having changed nothing: a
    canary on the host (under /var/tmp, outside every mount the build
    has), one in the checkout (reached as /work/src/… and through
    /proc), and the checkout's tracked files and owners."""
    host = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-canary-", dir="/var/tmp"))
    inrepo = ROOT / "out" / f"e2b-test-canary-{secrets.token_hex(4)}"
    try:
        for d in (host, inrepo):
            d.mkdir(exist_ok=True)
            (d / "precious").write_text("the build host's\n")
        before = (bases.tree_state(host), bases.tree_state(inrepo), bases.checkout_owners())
        rel = inrepo.relative_to(ROOT)
        log = "/usr/lib/e2b-escape.log"
        attempts = (
            f"for r in /proc/[0-9]*/root; do for d in {host} {inrepo}; do"
            f" echo pwned > $r$d/precious && echo \"wrote $r$d\" >> {log}; touch $r$d/new 2>/dev/null || :;"
            " done; done 2>/dev/null; true",
            # Inside, the checkout is an overlay whose changes are dropped: this "works", and changes nothing.
            f"echo pwned > /work/src/{rel}/precious 2>/dev/null || :; chown 1000 /work/src 2>/dev/null || :",
            f"mknod /tmp/disk b 8 0 && echo mknod >> {log}; true",
            f"echo \"processes: $(ls -d /proc/[0-9]* | wc -l)\" >> {log}",
        )
        out = tmp_path / "out"
        d = bad_template(tmp_path, "".join(f"run = {a}\n" for a in attempts))
        cp = testimages.build_template(d, "e2b-rt", out)
        assert cp.returncode == 0, cp.stderr[-4000:]
        tree = out / "bad" / "work" / "mkosi-out" / "image"
        escaped = (tree / log.lstrip("/")).read_text()
        # Through /proc, the checkout is the sandbox's overlay (a write there is dropped), the host's
        # /var/tmp not there at all.
        assert str(host) not in escaped and "mknod" not in escaped, escaped
        assert (bases.tree_state(host), bases.tree_state(inrepo), bases.checkout_owners()) == before
        # The commands saw the build's own processes, not the host's hundreds.
        assert int(escaped.split("processes: ")[1]) < 30, escaped
    finally:
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(inrepo, ignore_errors=True)
