"""An E2B template's fromImage: a base pulled from a real registry on
loopback (docker-registry with TLS from a test CA and htpasswd auth,
tests/registry.py), pinned by digest in a lock in the template= folder,
cached by repository and digest, a cached copy used only on the registry's
word that the credentials in use read it (issue 49, finding 7).

The base is a real Debian trixie (tests/builder/bases.py) with an Env in its
config, pushed under `library/python:3.13` at the loopback registry's
address: the JSON is written by the real SDK's from_image. Credentials come
from an auth file (REGISTRY_AUTH_FILE) and the CA from cert_dir=, never from
the JSON. One real build (builder mode under the steps); the lock's rules
and every refusal are checked on the pull alone or stop before mkosi."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.parse

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sdk"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "builder"))
import bases  # noqa: E402
import sdk_helpers  # noqa: E402
import testimages  # noqa: E402
from harness import free_port  # noqa: E402
from registry import tls_registry  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

ROOT = testimages.ROOT
PULL = ["/usr/bin/python3", "-m", "template.e2b.pull"]  # PYTHONPATH: ROOT
USER, PASSWORD = "e2b-pull", "s3cret-for-test-only"
IMAGE_ENV = "E2B_TEST_IMAGE_ENV=from the image config"
TEMPLATE_PY = """from e2b import Template
t = (Template().from_image({image!r})
     .run_cmd('echo "image env: $E2B_TEST_IMAGE_ENV; jq $(jq --version)" > ~/from-image.txt')
     .set_envs({{"GREETING": "hello"}})
     .set_start_cmd("sleep infinity", "test -s /home/user/from-image.txt"))
print(Template.to_json(t))
"""


def skopeo(*args):
    return bases.run("skopeo", *args)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with tls_registry(tmp_path_factory.mktemp("registry"), USER, PASSWORD) as r:
        layout = bases.debian_base(tmp_path_factory.mktemp("base") / "layout")
        bases.run("umoci", "config", "--image", f"{layout}:{bases.REF}", "--tag", "py", "--config.env", IMAGE_ENV)
        r["layout"] = layout
        r["image"] = f"{r['addr']}/library/python:3.13"
        push(r, "py", "library/python:3.13")
        yield r


def push(r: dict, ref: str, name: str) -> str:
    """LAYOUT:REF to the registry as NAME; returns the registry's digest."""
    skopeo("copy", "--quiet", "--dest-cert-dir", r["certs"], "--dest-authfile", r["auth"],
           f"oci:{r['layout']}:{ref}", f"docker://{r['addr']}/{name}")
    return registry_digest(r, name)


def registry_digest(r: dict, name: str) -> str:
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--cert-dir", r["certs"], "--authfile", r["auth"],
                          f"docker://{r['addr']}/{name}"], capture_output=True, check=True).stdout
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def sdk_template(folder: pathlib.Path, image: str) -> pathlib.Path:
    """FOLDER/e2b.template.json from the real SDK's from_image(IMAGE)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "template.py").write_text(TEMPLATE_PY.format(image=image))
    cp = subprocess.run([str(sdk_helpers.py_sdk()), "template.py"], cwd=folder, capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    (folder / "e2b.template.json").write_text(cp.stdout)
    return folder


def pull(r: dict, folder: pathlib.Path, cache: pathlib.Path, ref: str | None = None, auth: bool = True,
         certs: bool = True, extra: tuple = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_AUTH_FILE"}
    env["PYTHONPATH"] = str(ROOT)
    # An auth file that does not exist: skopeo's defaults (root's) are not the test's.
    env["REGISTRY_AUTH_FILE"] = r["auth"] if auth else str(folder / "no-auth.json")
    cmd = [*PULL, "--ref", ref or r["image"], "--template", str(folder), "--cache", str(cache)]
    if certs:
        cmd += ["--cert-dir", r["certs"]]
    return subprocess.run([*cmd, *extra], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def built(registry, tmp_path_factory):
    folder = sdk_template(tmp_path_factory.mktemp("tpl") / "from-image", registry["image"])
    out = tmp_path_factory.mktemp("out")
    cp = testimages.make("e2b-rt", out, "image", f"template={folder}", f"cert_dir={registry['certs']}",
                         env={**os.environ, "REGISTRY_AUTH_FILE": registry["auth"]})
    b = testimages.Built("e2b-rt", out / "from-image", cp)
    if not b.ok:
        pytest.fail(b.failure())
    b.folder = folder
    return b


def test_from_image_builds_on_the_pulled_base_pinned_by_digest(registry, built):
    digest = registry_digest(registry, "library/python:3.13")
    lock = json.loads((built.folder / "e2b.template.lock").read_text())
    assert lock == {"fromImage": registry["image"], "name": f"{registry['addr']}/library/python", "digest": digest,
                    "template": "from-image"}
    t = built.tree
    assert (t / bases.MARKER.lstrip("/")).read_text() == bases.MARKER_TEXT  # the registry's base, its layers
    assert not (t / bases.DOOMED.lstrip("/")).exists()
    # The steps start with the image config's Env, as E2B's build does; the
    # base's own packages are there.
    assert (t / "home/user/from-image.txt").read_text().startswith("image env: from the image config; jq jq-")
    start = (t / "usr/lib/e2b-template/start").read_text()
    assert "'E2B_TEST_IMAGE_ENV=from the image config'" in start and "GREETING=hello" in start, start
    # Our runtime over it: the guard and envd, enabled.
    assert (t / "usr/bin/envd").exists()
    assert (t / "etc/systemd/system/sysinit.target.wants/envd-guard.service").is_symlink()
    assert built.manifest["base"]["name"] == f"{registry['addr']}/library/python"
    assert built.manifest["base"]["digest"] == digest
    labels, _ = testimages.skopeo_labels(built.dir / "oci")
    assert labels["org.opencontainers.image.base.digest"] == digest
    assert labels["org.opencontainers.image.base.name"] == f"{registry['addr']}/library/python"
    # No USER or WORKDIR step: envd's default user is E2B's `user`, and no default workdir (its home).
    assert labels["org.e2b-images.envd-user"] == "user" and "org.e2b-images.envd-workdir" not in labels
    # No credential of the registry's reached the outputs or the log.
    assert PASSWORD not in built.cp.stdout + built.cp.stderr
    assert PASSWORD.encode() not in (built.dir / "manifest.json").read_bytes()


def test_a_lock_pins_the_digest_when_the_tag_moves(registry, tmp_path):
    moving = f"{registry['addr']}/team/moving:1"
    folder = sdk_template(tmp_path / "moving", moving)
    first = push(registry, bases.REF, "team/moving:1")
    cp = pull(registry, folder, tmp_path / "cache", moving)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["digest"] == first
    # The pin is written once the build succeeded (template.sh), not by the pull.
    assert not (folder / "e2b.template.lock").exists()
    lock_after_build(folder, cp.stdout, tmp_path)
    moved = push(registry, "py", "team/moving:1")
    assert moved != first
    # Locked: the old digest, from the cache (not pulled again) once the
    # registry has confirmed that these credentials read it.
    index = cached_layout(tmp_path / "cache", registry, "team/moving", first) / "index.json"
    ino = index.stat().st_ino
    cp = pull(registry, folder, tmp_path / "cache", moving)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["digest"] == first and "IMAGE_ENV" not in cp.stdout
    assert index.stat().st_ino == ino
    # Locked, empty cache: the old digest again, pulled by digest.
    cp = pull(registry, folder, tmp_path / "cache2", moving)
    assert cp.returncode == 0 and json.loads(cp.stdout)["digest"] == first, cp.stderr
    # The lock deleted: the tag's newest, and a new lock.
    (folder / "e2b.template.lock").unlink()
    cp = pull(registry, folder, tmp_path / "cache", moving)
    assert cp.returncode == 0, cp.stderr
    out = json.loads(cp.stdout)
    assert out["digest"] == moved and out["env"]["E2B_TEST_IMAGE_ENV"] == "from the image config"
    lock_after_build(folder, cp.stdout, tmp_path)
    assert json.loads((folder / "e2b.template.lock").read_text())["digest"] == moved
    # No pull left a temporary folder; the cache holds the repository's two digests.
    assert [p.name for p in (tmp_path / "cache" / "e2b-images").iterdir()] == \
        [urllib.parse.quote(f"{registry['addr']}/team/moving", safe="")]
    assert sorted(p.name for p in cached_layout(tmp_path / "cache", registry, "team/moving", first).parent.iterdir()) \
        == sorted(d.replace(":", "-") for d in (first, moved))


def cached_layout(cache: pathlib.Path, r: dict, repo: str, digest: str) -> pathlib.Path:
    """Where template/e2b/pull.py keeps REPO@DIGEST: by repository and digest."""
    return cache / "e2b-images" / urllib.parse.quote(f"{r['addr']}/{repo}", safe="") / digest.replace(":", "-")


def lock_after_build(folder: pathlib.Path, pulled: str, tmp_path: pathlib.Path) -> None:
    (tmp_path / "pulled.json").write_text(pulled)
    cp = subprocess.run([*PULL, "--write-lock", str(tmp_path / "pulled.json"),
                         "--template", str(folder)], capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0 and "pinned to sha256:" in cp.stderr and "e2b.template.lock" in cp.stderr, cp.stderr


def test_a_lock_for_another_image_is_refused(registry, tmp_path):
    folder = sdk_template(tmp_path / "stale", registry["image"])
    (folder / "e2b.template.lock").write_text(json.dumps(
        {"fromImage": "python:3.12", "name": "x/python", "digest": "sha256:" + "0" * 64}))
    cp = pull(registry, folder, tmp_path / "cache")
    assert cp.returncode == 1
    assert "pins fromImage 'python:3.12'" in cp.stderr and "delete the lock" in cp.stderr, cp.stderr
    (folder / "e2b.template.lock").unlink()
    (folder / "e2b.template.lock").symlink_to("/etc/shadow")
    cp = pull(registry, folder, tmp_path / "cache")
    assert cp.returncode == 1 and "a symlink is refused" in cp.stderr and "root:" not in cp.stderr, cp.stderr
    (folder / "e2b.template.lock").unlink()
    (folder / "e2b.template.lock").write_text("{not json")
    cp = pull(registry, folder, tmp_path / "cache")
    assert cp.returncode == 1 and "not a lock this build wrote" in cp.stderr, cp.stderr


# Issue 49, finding 7: a lock cannot send fromImage to another repository,
# and a copy in the cache is used only on the registry's word that the
# credentials in use can read that digest in that repository.

def write_lock(folder: pathlib.Path, ref: str, name: str, digest: str) -> None:
    (folder / "e2b.template.lock").write_text(json.dumps(
        {"fromImage": ref, "name": name, "digest": digest, "template": folder.name}))


def test_a_lock_naming_another_repository_is_refused(registry, tmp_path):
    """A lock pins a digest of fromImage's own repository: one that names
    another (where the operator's credentials could read a secret image)
    is refused, naming both, before the registry is asked."""
    folder = sdk_template(tmp_path / "redirect", registry["image"])
    secret = f"{registry['addr']}/team/secret"
    write_lock(folder, registry["image"], secret, registry_digest(registry, "library/python:3.13"))
    cp = pull(registry, folder, tmp_path / "cache")
    assert cp.returncode == 1 and cp.stdout == "", cp.stderr
    assert f"pins repository '{secret}'" in cp.stderr, cp.stderr
    assert f"names repository '{registry['addr']}/library/python'" in cp.stderr, cp.stderr


def test_a_cached_copy_is_not_another_repositorys(registry, tmp_path):
    """Repository A's image, pulled into the cache, is not what a lock of
    repository B with the same digest gets: B does not have that digest,
    the registry says so, and nothing is built."""
    cache = tmp_path / "cache"
    a = sdk_template(tmp_path / "repo-a", registry["image"])
    cp = pull(registry, a, cache)
    assert cp.returncode == 0, cp.stderr
    digest = json.loads(cp.stdout)["digest"]
    b_ref = f"{registry['addr']}/team/other:1"
    push(registry, bases.REF, "team/other:1")   # B exists, with another image
    b = sdk_template(tmp_path / "repo-b", b_ref)
    write_lock(b, b_ref, f"{registry['addr']}/team/other", digest)
    cp = pull(registry, b, cache, b_ref)
    assert cp.returncode == 1 and cp.stdout == "", cp.stderr
    assert f"the registry {registry['addr']} did not confirm that the credentials in use can read " \
           f"{registry['addr']}/team/other@{digest}" in cp.stderr and "manifest unknown" in cp.stderr, cp.stderr
    assert not cached_layout(cache, registry, "team/other", digest).exists()


def test_a_cached_copy_needs_the_registry(registry, tmp_path):
    """A locked, cached image is not used when the credentials in use cannot
    read it, nor when its registry does not answer: the pull fails naming
    the registry. offline=1 refuses (the registry cannot confirm), unless
    the operator trusts the cache (trust_image_cache=1)."""
    cache = tmp_path / "cache"
    folder = sdk_template(tmp_path / "cached", registry["image"])
    cp = pull(registry, folder, cache)
    assert cp.returncode == 0, cp.stderr
    lock_after_build(folder, cp.stdout, tmp_path)
    digest = json.loads(cp.stdout)["digest"]
    cp = pull(registry, folder, cache, auth=False)
    assert cp.returncode == 1 and cp.stdout == "", cp.stderr
    assert f"the registry {registry['addr']} did not confirm" in cp.stderr and "unauthorized" in cp.stderr.lower()
    # A registry that does not answer, with that image in the cache under its name.
    down = f"127.0.0.1:{free_port()}"
    down_ref = f"{down}/library/python:3.13"
    gone = sdk_template(tmp_path / "down", down_ref)
    write_lock(gone, down_ref, f"{down}/library/python", digest)
    copy = cache / "e2b-images" / urllib.parse.quote(f"{down}/library/python", safe="") / digest.replace(":", "-")
    shutil.copytree(cached_layout(cache, registry, "library/python", digest), copy)
    cp = pull(registry, gone, cache, down_ref)
    assert cp.returncode == 1 and f"the registry {down} did not confirm" in cp.stderr, cp.stderr
    cp = pull(registry, folder, cache, extra=("--offline",))
    assert cp.returncode == 1 and "offline=1" in cp.stderr and "trust_image_cache=1" in cp.stderr, cp.stderr
    cp = pull(registry, folder, cache, auth=False, extra=("--offline", "--trust-cache"))
    assert cp.returncode == 0 and json.loads(cp.stdout)["digest"] == digest, cp.stderr
    assert "unconfirmed by the registry (trust_image_cache=1)" in cp.stderr


def test_offline_refuses_a_fromimage_before_anything_is_built(registry, tmp_path):
    folder = sdk_template(tmp_path / "offline", registry["image"])
    cp = testimages.make("e2b-rt", tmp_path / "out", "image", f"template={folder}", "offline=1",
                         f"cert_dir={registry['certs']}", env={**os.environ, "REGISTRY_AUTH_FILE": registry["auth"]})
    assert cp.returncode != 0 and "offline=1" in cp.stderr and "build once without offline=1" in cp.stderr, \
        cp.stderr[-3000:]
    assert "image: base:" not in cp.stderr and not (tmp_path / "out" / "offline").exists()


def test_a_chains_lock_is_written_into_the_template_folder(registry, tmp_path):
    """Issue 49, finding 8: a template on a local template (template_path=)
    whose fromImage is that base's builds, and its lock goes into the
    template= folder, naming the template it pins; the base's folder, where
    another tenant's files may be, gets none. A lock there that pins
    another template's fromImage is refused."""
    lib = tmp_path / "lib"
    parent = sdk_template(lib / "img-parent", registry["image"])
    child = tmp_path / "tenant" / "img-child"
    child.mkdir(parents=True)
    (child / "e2b.template.json").write_text(json.dumps(
        {"fromTemplate": "img-parent", "steps": [{"type": "RUN", "args": ["echo child > /child", "root"]}]}))
    out = tmp_path / "out"
    cp = testimages.make("e2b-rt", out, "image", f"template={child}", f"template_path={lib}",
                         f"cert_dir={registry['certs']}", env={**os.environ, "REGISTRY_AUTH_FILE": registry["auth"]})
    assert cp.returncode == 0, cp.stderr[-4000:]
    assert (out / "img-child/work/mkosi-out/image/child").read_text() == "child\n"
    lock = json.loads((child / "e2b.template.lock").read_text())
    assert lock == {"fromImage": registry["image"], "name": f"{registry['addr']}/library/python",
                    "digest": registry_digest(registry, "library/python:3.13"), "template": "img-parent"}
    assert not (parent / "e2b.template.lock").exists()
    (child / "e2b.template.lock").write_text(json.dumps(dict(lock, template="img-child")))
    cp = pull(registry, child, tmp_path / "cache", extra=("--holder", "img-parent"))
    assert cp.returncode == 1 and "pins the fromImage of template 'img-child'" in cp.stderr, cp.stderr


def failed_build(registry, tmp_path, image, **kw):
    folder = sdk_template(tmp_path / "bad", image)
    out = tmp_path / "out"
    env = {**os.environ, "REGISTRY_AUTH_FILE": registry["auth"] if kw.get("auth", True) else str(tmp_path / "none")}
    args = [f"cert_dir={registry['certs']}"] if kw.get("certs", True) else []
    cp = testimages.make("e2b-rt", out, "image", f"template={folder}", *args, env=env)
    assert cp.returncode != 0
    assert not (out / "bad").exists()  # nothing half-written
    assert not (folder / "e2b.template.lock").exists()
    return cp.stderr


def test_a_fromimage_that_does_not_resolve(registry, tmp_path):
    err = failed_build(registry, tmp_path, f"{registry['addr']}/library/python:0.0-nonexistent")
    assert f"fromImage '{registry['addr']}/library/python:0.0-nonexistent'" in err and "manifest unknown" in err, err


def test_a_pull_without_credentials_or_a_trusted_ca(registry, tmp_path):
    err = failed_build(registry, tmp_path / "a", registry["image"], auth=False)
    assert "fromImage" in err and ("unauthorized" in err.lower() or "authentication required" in err.lower()), err
    err = failed_build(registry, tmp_path / "c", registry["image"], certs=False)
    assert "fromImage" in err and "certificate" in err, err


def test_a_base_that_is_not_debian_is_refused_as_builder_mode_refuses_it(registry, tmp_path):
    tiny = bases.tiny_layout(tmp_path / "alpine", {"/etc/os-release": "ID=alpine\n", "/bin/sh": ""})
    skopeo("copy", "--quiet", "--dest-cert-dir", registry["certs"], "--dest-authfile", registry["auth"],
           f"oci:{tiny}:latest", f"docker://{registry['addr']}/library/alpine:3")
    err = failed_build(registry, tmp_path, f"{registry['addr']}/library/alpine:3")
    assert "no dpkg and apt" in err or "/usr/bin/dpkg" in err, err
    assert f"{registry['addr']}/library/alpine" in err, err


@pytest.mark.parametrize("kind", ["apt-escape", "mkosi-escape", "escapes"])
def test_a_hostile_registry_base_is_refused_as_builder_mode_refuses_it(registry, tmp_path, kind):
    """Issue 37's hostile bases, served by a registry: symlinks out of the
    image where the unpack empties apt's state or where mkosi works, and
    terminal escapes in its os-release. Refused before mkosi, the files
    outside as they were, every byte of the base's escaped."""
    outside = bases.outside_files(tmp_path / "outside")
    layout = {"apt-escape": lambda d: bases.apt_escape_layout(d, outside),
              "mkosi-escape": lambda d: bases.mkosi_escape_layout(d, outside),
              "escapes": lambda d: bases.escape_layout(d, debian=False)}[kind](tmp_path / "hostile")
    before = bases.tree_state(outside)
    name = f"team/hostile-{kind}:1"
    skopeo("copy", "--quiet", "--dest-cert-dir", registry["certs"], "--dest-authfile", registry["auth"],
           f"oci:{layout}:latest", f"docker://{registry['addr']}/{name}")
    err = failed_build(registry, tmp_path, f"{registry['addr']}/{name}")
    expect = {"apt-escape": "/var/lib is a symlink", "mkosi-escape": "/var/lib/dbus is a symlink",
              "escapes": "Evil \\x1b]0;e2b-owned\\x07"}[kind]
    assert expect in err and f"{registry['addr']}/team/hostile-{kind}@sha256:" in err, err
    assert "\x1b" not in err and "\x07" not in err and "image: mkosi:" not in err
    assert bases.tree_state(outside) == before
