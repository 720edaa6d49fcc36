"""Builder mode's bad bases stop `make image … base=…` (and a template whose
base is an image) before mkosi runs, each with one message naming the base
and why, and leave nothing in out/. Run through make and the real
os-image/builder_base.py with real skopeo and umoci; the Debian base is the
debootstrap-made one of bases.py, the others are tiny hand-made layouts
standing in for Alpine, distroless and other distributions (only their
/etc/os-release and the presence of dpkg and apt are read)."""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT
DPKG = {"/usr/bin/dpkg": "#!/bin/sh\n", "/usr/bin/apt-get": "#!/bin/sh\n", "/var/lib/dpkg/status": ""}


def os_release(**fields) -> str:
    return "".join(f'{k}="{v}"\n' for k, v in fields.items())


def make_image(tmp: pathlib.Path, base: str, target: str = "image", **kw) -> subprocess.CompletedProcess:
    """`make TARGET flavor=e2b-rt base=BASE out=…` with the shipped recipes
    (nothing here gets as far as the pinned artifacts)."""
    out = tmp / "out"
    cp = testimages.make("e2b-rt", out, target, f"base={base}", recipes=testimages.SHIPPED_RECIPES,
                         timeout=600, **kw)
    cp.out = out
    return cp


def refused(tmp, base, *expect):
    cp = make_image(tmp, base)
    assert cp.returncode != 0, cp.stdout[-2000:]
    for e in expect:
        assert e in cp.stderr, cp.stderr[-3000:]
    assert "image: mkosi:" not in cp.stderr
    # Nothing half-built: no out/e2b-rt/ at all.
    assert not (cp.out / "e2b-rt").exists(), list((cp.out / "e2b-rt").rglob("*"))[:20]
    return cp.stderr


@pytest.fixture(scope="module")
def debian(tmp_path_factory):
    """The debootstrap-made trixie base (bases.py), as an OCI layout with ref v1."""
    return bases.debian_base(tmp_path_factory.mktemp("debian") / "layout")


def test_missing_path(tmp_path):
    missing = tmp_path / "no-such-layout"
    refused(tmp_path, f"oci:{missing}", f"base oci:{missing}: {missing} does not exist",
            "OCI image layout directory")


def test_not_a_layout(tmp_path):
    (tmp_path / "empty").mkdir()
    refused(tmp_path, f"oci:{tmp_path / 'empty'}", "is not an OCI image layout (no oci-layout and index.json")


@pytest.mark.build
def test_bad_ref_lists_the_refs(tmp_path, debian):
    refused(tmp_path, f"oci:{debian}:nope", f"base oci:{debian}:nope: {debian} has no ref 'nope'; its refs: v1")


@pytest.mark.build
def test_default_ref_is_latest(tmp_path, debian):
    refused(tmp_path, f"oci:{debian}", "has no ref 'latest'; its refs: v1")


def test_missing_docker_archive(tmp_path):
    missing = tmp_path / "no-such.tar"
    refused(tmp_path, f"docker-archive:{missing}", f"{missing} does not exist", "docker archive")


def test_apt_less_base(tmp_path):
    """Alpine's shape: busybox, apk, no dpkg or apt."""
    layout = bases.tiny_layout(tmp_path / "alpine", {
        "/etc/os-release": os_release(NAME="Alpine Linux", ID="alpine", PRETTY_NAME="Alpine Linux v3.20"),
        "/bin/busybox": "#!/bin/sh\n", "/sbin/apk": "#!/bin/sh\n"})
    refused(tmp_path, f"oci:{layout}",
            f"base oci:{layout} (Alpine Linux v3.20): no /usr/bin/dpkg and no /usr/bin/apt-get and no "
            "/var/lib/dpkg/status", "Alpine, distroless and busybox images cannot be used")


def test_distroless_base_in_a_docker_archive(tmp_path):
    """distroless's shape (a Debian os-release, no package manager), through
    the docker-archive: path (skopeo copy to an OCI layout, then umoci)."""
    layout = bases.tiny_layout(tmp_path / "distroless", {
        "/etc/os-release": os_release(ID="debian", VERSION_CODENAME="trixie",
                                      PRETTY_NAME="Distroless"),
        "/var/lib/dpkg/status.d/base": "Package: base-files\n"})
    archive = bases.docker_archive(layout, "latest", tmp_path / "distroless.tar", "distroless/base:nonroot")
    refused(tmp_path, f"docker-archive:{archive}", f"base docker-archive:{archive} (Distroless): no /usr/bin/dpkg")


@pytest.mark.parametrize("fields,expect", [
    ({"ID": "fedora", "PRETTY_NAME": "Fedora Linux 41"},
     "its /etc/os-release says Fedora Linux 41 (ID=fedora), not Debian; "
     "supported bases: debian trixie, debian bookworm"),
    ({"ID": "ubuntu", "VERSION_CODENAME": "noble", "PRETTY_NAME": "Ubuntu 24.04 LTS"},
     "Ubuntu's archive cannot be reached from our build machines"),
    ({"ID": "debian", "VERSION_CODENAME": "buster", "PRETTY_NAME": "Debian GNU/Linux 10 (buster)"},
     "Debian GNU/Linux 10 (buster) (VERSION_CODENAME=buster) is a release this build cannot serve; "
     "supported bases: debian trixie, debian bookworm"),
], ids=["fedora", "ubuntu", "buster"])
def test_os_release_not_served(tmp_path, fields, expect):
    """dpkg and apt are there, the release is not ours. /etc/os-release is an
    absolute symlink, as in many images: it is resolved inside the base."""
    layout = bases.tiny_layout(tmp_path / "other", {**DPKG, "/usr/lib/os-release": os_release(**fields)},
                               links={"/etc/os-release": "/usr/lib/os-release"})
    refused(tmp_path, f"oci:{layout}", f"base oci:{layout}: ", expect)


@pytest.mark.build
def test_template_with_an_image_base_and_base_knob(tmp_path, debian):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "template.conf").write_text("name = mine\nbase = oci:app:v1\n")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}",
                         f"base=oci:{debian}:v1", f"out={out}"], capture_output=True, text=True, timeout=300)
    assert cp.returncode != 0
    assert "a template names its base in its template.conf" in cp.stderr, cp.stderr[-2000:]
    assert not (out / "mine").exists()


def test_template_base_path_is_relative_to_the_template(tmp_path):
    d = tmp_path / "tpl"
    d.mkdir()
    (d / "template.conf").write_text("name = mine\nbase = oci:images/app:v2\n")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}",
                         f"out={out}"], capture_output=True, text=True, timeout=300)
    assert cp.returncode != 0
    assert f"base oci:images/app:v2: {d}/images/app does not exist" in cp.stderr, cp.stderr[-2000:]
    assert not (out / "mine").exists()


@pytest.mark.build
def test_docker_archive_accepted_with_its_tag_and_digest(tmp_path, debian):
    """The accept path of docker-archive: (as `docker save` writes one): the
    quick steps pass (`make image-preflight`), naming the base by its tag and
    the digest skopeo reports for it."""
    archive = bases.docker_archive(debian, bases.REF, tmp_path / "team-python.tar", "team/python:3.12")
    digest = json.loads(subprocess.run(["skopeo", "inspect", f"docker-archive:{archive}"], capture_output=True,
                                       text=True, check=True).stdout)["Digest"]
    out = tmp_path / "out"
    cp = testimages.make("e2b-rt", out, "image-preflight", f"base=docker-archive:{archive}", timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    # The archive's own tag: team/python:3.12 as skopeo (like `docker save`) normalized it.
    tag = bases.archive_tag(archive)
    assert tag.endswith("/team/python:3.12")
    assert f"base: docker-archive:{archive} = {tag}@{digest} (Debian GNU/Linux 13 (trixie))" \
        in cp.stderr, cp.stderr[-3000:]
    base = json.loads((out / "e2b-rt/work/base.json").read_text())
    assert (base["name"], base["digest"], base["release"]) == (tag, digest, "trixie")
    # The unpacked base is not left behind (it is the build's to remove).
    assert not pathlib.Path(base["rootfs"]).exists()
    shutil.rmtree(out)


# Issue 37, finding 7: a base's bytes reach the operator's terminal escaped
# (sandbox/termsafe.py), never as the escape sequences they are.
ESCAPED = r"\x1b]0;e2b-owned\x07\x1b[2J\xc2\x9b31m"


def assert_no_terminal_controls(text: str) -> None:
    bad = sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})
    assert not bad, f"raw control characters {bad} in: {text[-2000:]!r}"


def test_escape_sequences_of_a_refused_base_are_escaped(tmp_path):
    layout = bases.escape_layout(tmp_path / "evil", debian=False)
    stderr = refused(tmp_path, f"oci:{layout}",
                     f"base: base oci:{layout}: its /etc/os-release says Evil {ESCAPED} Linux (ID=fedora), not Debian")
    assert_no_terminal_controls(stderr)


def test_escape_sequences_of_an_accepted_base_are_escaped(tmp_path):
    """A base that passes the checks (a stand-in with dpkg's and apt's files
    and trixie's os-release) in a docker archive whose RepoTags and
    PRETTY_NAME carry escapes: build.sh names it escaped. Offline with an
    empty cache, the build then stops at the first pinned artifact."""
    layout = bases.escape_layout(tmp_path / "evil", debian=True)
    archive = bases.escape_tag_archive(layout, "latest", tmp_path / "evil.tar")
    out = tmp_path / "out"
    cp = testimages.make("e2b-rt", out, "image-preflight", f"base=docker-archive:{archive}", "offline=1",
                         recipes=testimages.SHIPPED_RECIPES, cache=tmp_path / "cache", timeout=600)
    assert cp.returncode != 0 and "image: mkosi:" not in cp.stderr
    assert re.search(rf"image: base: docker-archive:{re.escape(str(archive))} = "
                     rf"team/app{re.escape(ESCAPED)}:1@sha256:[0-9a-f]{{64}} \(Evil {re.escape(ESCAPED)} Linux\)\n",
                     cp.stderr), cp.stderr[-3000:]
    assert_no_terminal_controls(cp.stderr)
    assert not (out / "e2b-rt").exists()
