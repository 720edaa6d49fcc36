"""Bad templates stop `make template=DIR` before anything is built, each with
one message naming the file, the line and the key, and leave no out/<name>/.
Run through make and the real build/e2b-template (no mkosi: every one of
these fails first). The bad inputs that need the build itself (a package
that does not exist, a failing build command, a build command that touches
the guard) are in test_template_build.py."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "builder"))
import bases  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT
WEB = testimages.EXAMPLES / "web"


def template_dir(tmp: pathlib.Path, conf: str) -> pathlib.Path:
    d = tmp / "tpl"
    shutil.copytree(WEB, d)
    (d / "template.conf").write_text(conf)
    return d


def build(tmp: pathlib.Path, d: pathlib.Path) -> subprocess.CompletedProcess:
    out = tmp / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}",
                         f"out={out}"], capture_output=True, text=True, timeout=300)
    cp.out = out
    return cp


BASE = "name = web\nbase = e2b-rt\n"
FILE = "file = site/index.html /home/user/site/index.html user 0644\n"


@pytest.mark.parametrize("conf,where", [
    (BASE + "colour = blue\n", ":3: unknown key 'colour'"),
    (BASE + "vcpu = 1\nvcpu = 2\n", ":4: key 'vcpu': duplicate key (first on line 3)"),
    (BASE + "file = ../secret /etc/secret root 0600\n", ":3: key 'file': source '../secret'"),
    ("name = e2b-rt\nbase = e2b-rt\n", ":1: key 'name': 'e2b-rt' is a flavor's name"),
    ("name = web\nbase = e2b-nope\n", ":2: key 'base': 'e2b-nope' is not a flavor"),
    (BASE + "file = site/index.html /etc/e2b/guarded-ports root 0644\n",
     ":3: key 'file': /etc/e2b/guarded-ports belongs to the image's guard"),
    (BASE + "file = site/index.html /usr/bin/envd-guard root 0755\n",
     ":3: key 'file': /usr/bin/envd-guard belongs to the image's guard"),
    # Issue 37, finding 5: the rest of what decides how the guard starts, each refused naming its rule.
    (BASE + "file = site/index.html /usr/local/lib/systemd/system/envd-guard.service.d/x.conf root 0644\n",
     ":3: key 'file': /usr/local/lib/systemd/system/envd-guard.service.d/x.conf belongs to the image's guard, "
     "envd or units (systemd's units, generators and presets)"),
    (BASE + "file = site/index.html /etc/ld.so.preload root 0644\n",
     ":3: key 'file': /etc/ld.so.preload belongs to the image's guard, envd or units (the dynamic linker's "
     "configuration (a preloaded library runs in the guard))"),
    (BASE + "file = site/index.html /etc/ld.so.conf.d/0.conf root 0644\n",
     ":3: key 'file': /etc/ld.so.conf.d/0.conf belongs to the image's guard, envd or units (the dynamic "
     "linker's configuration (its library search path))"),
    (BASE + "ready = socket 3000\n", ":3: key 'ready': 'socket' is not a ready check"),
])
def test_bad_template_names_file_line_and_key(tmp_path, conf, where):
    d = template_dir(tmp_path, conf)
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert f"{d}/template.conf{where}" in cp.stderr, cp.stderr[-2000:]
    assert "mkosi" not in cp.stderr  # stopped before the build
    assert not (cp.out / "web").exists() and not (cp.out / "e2b-rt").exists()


def test_symlink_out_of_the_directory_is_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not the template's\n")
    d = template_dir(tmp_path, BASE + "file = site/link /etc/x root 0644\n")
    os.symlink(secret, d / "site" / "link")
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert f"{d}/template.conf:3: key 'file': site/link resolves outside {d}" in cp.stderr, cp.stderr[-2000:]
    assert not (cp.out / "web").exists()


def test_missing_file_is_named(tmp_path):
    d = template_dir(tmp_path, BASE + "file = site/nothere.html /etc/x root 0644\n")
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert f"{d}/template.conf:3: key 'file': {d}/site/nothere.html: No such file or directory" in cp.stderr
    assert not (cp.out / "web").exists()


def test_image_base_that_does_not_exist(tmp_path):
    """Builder mode (tests/builder/ has the rest): a base image that is not
    there stops the build before mkosi, naming it."""
    d = template_dir(tmp_path, "name = web\nbase = oci:nowhere:latest\n")
    cp = build(tmp_path, d)
    assert cp.returncode != 0 and f"base oci:nowhere:latest: {d}/nowhere does not exist" in cp.stderr, cp.stderr
    assert "image: mkosi:" not in cp.stderr
    assert not (cp.out / "web").exists()


# Issue 37, finding 9: a template's base is inside the template directory,
# so one tenant's template cannot have another tenant's image unpacked.

@pytest.mark.parametrize("base", ["oci:/srv/other-tenant/app:v1", "oci:../other-tenant/app",
                                  "oci:images/../../other-tenant/app", "docker-archive:/srv/other-tenant/app.tar"])
def test_image_base_outside_the_directory_is_refused(tmp_path, base):
    d = template_dir(tmp_path, f"name = web\nbase = {base}\n")
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    path = base.split(":", 1)[1]
    assert (f"{d}/template.conf:2: key 'base': PATH must be relative, inside the template directory "
            f"(no '..', '.' or empty parts; copy the image there): '{path}'") in cp.stderr, cp.stderr
    assert "mkosi" not in cp.stderr and not (cp.out / "web").exists()


@pytest.fixture
def other_tenant(tmp_path):
    """Another tenant's image on the build machine: a layout whose os-release
    would show in a refusal if it were unpacked."""
    return bases.tiny_layout(tmp_path / "other-tenant" / "app", {
        "/etc/os-release": 'ID=debian\nPRETTY_NAME="other tenant secret"\n'})


def test_image_base_symlinked_out_is_refused(tmp_path, other_tenant):
    d = template_dir(tmp_path, "name = web\nbase = oci:app:latest\n")
    os.symlink(other_tenant, d / "app")
    before = bases.tree_state(other_tenant)
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert (f"base: base oci:app:latest: {d}/app leads outside the template directory {d} (to {other_tenant}); "
            "a template's base must be inside its directory: copy the image there") in cp.stderr, cp.stderr
    assert "other tenant secret" not in cp.stderr and "image: mkosi:" not in cp.stderr
    assert bases.tree_state(other_tenant) == before and not (cp.out / "web").exists()


def test_image_base_with_a_blob_symlinked_out_is_refused(tmp_path, other_tenant):
    """A layout of its own whose blobs are the other tenant's (content
    addressed: the same digest names the same layer)."""
    d = template_dir(tmp_path, "name = web\nbase = oci:app:latest\n")
    shutil.copytree(other_tenant, d / "app")
    blobs = sorted((d / "app/blobs/sha256").iterdir())
    blobs[0].unlink()
    os.symlink(other_tenant / "blobs/sha256" / blobs[0].name, blobs[0])
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert (f"base: base oci:app:latest: {blobs[0]} is a symlink to {other_tenant}/blobs/sha256/{blobs[0].name}, "
            f"outside the template directory {d}") in cp.stderr, cp.stderr
    assert "other tenant secret" not in cp.stderr and not (cp.out / "web").exists()


# Issue 37, finding 8: template.conf is a regular file of the directory; the
# parser, which quotes a bad line, never reads another file.

def test_symlinked_template_conf_is_refused(tmp_path):
    secret = tmp_path / "host-file"
    secret.write_text("host-secret-line-without-an-equals-sign\n")
    d = template_dir(tmp_path, "")
    (d / "template.conf").unlink()
    os.symlink(secret, d / "template.conf")
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert (f"e2b-template: {d}/template.conf: a symlink; template.conf must be a regular file in the template "
            "directory itself (copy it there)") in cp.stderr, cp.stderr
    assert "host-secret" not in cp.stderr and not (cp.out / "web").exists()


def test_fifo_template_conf_is_refused_without_waiting(tmp_path, tools):
    """A fifo (or any file that is not regular) is refused at once; reading
    it would wait for a writer, or read what another process writes."""
    d = tmp_path / "tpl"
    d.mkdir()
    os.mkfifo(d / "template.conf")
    cp = tools.run("e2b-template", "--dir", d, "--flavors", "e2b-rt e2b-ci", timeout=30)
    assert cp.returncode == 1
    assert cp.stderr == (f"e2b-template: {d}/template.conf: not a regular file; template.conf must be a regular "
                         "file in the template directory\n")


def test_directory_without_template_conf(tmp_path):
    cp = build(tmp_path, tmp_path)
    assert cp.returncode != 0 and f"template={tmp_path}: no template.conf" in cp.stderr


@pytest.mark.parametrize("fmt,text,why", [
    ("template.conf", BASE + "colour = blue\n", "unknown key 'colour'"),
    ("e2b.template.json", '{"fromTemplate": "base"}', "rename the folder"),
])
def test_a_folder_name_with_escapes_is_named_escaped(tmp_path, fmt, text, why):
    """The folder's name is the user's bytes: a refusal that names it (its
    path, or as an E2B template's name) must not carry its escape sequences
    to the terminal."""
    d = tmp_path / "Web\x1b]0;owned\x07\x1b[2J"
    d.mkdir()
    (d / fmt).write_text(text)
    cp = build(tmp_path, d)
    assert cp.returncode != 0
    assert "\x1b" not in cp.stderr and "\x07" not in cp.stderr, cp.stderr
    assert "Web\\x1b]0;owned\\x07\\x1b[2J" in cp.stderr and why in cp.stderr, cp.stderr
