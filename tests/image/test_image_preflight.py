"""The quick steps of `make image`, which must stop a doomed build before
mkosi runs: pinned artifacts (through pinfetch), the envd version, the apt
sources. Plus sources.py against fake apt configurations and the envd
bad inputs of envd=source (os-image/envd-source.sh)."""
import hashlib
import io
import json
import os
import shutil
import subprocess

import testimages
from image_helpers import (  # noqa: F401  (fixtures are used by name)
    FLAVOR, ROOT, artifact_server, built, free_port, make_release_image, real_envd, sha256_file,
    write_release_lock,
)

SOURCES = ROOT / "os-image/sources.py"


def assert_mkosi_never_ran(cp, out):
    text = cp.stdout + cp.stderr
    assert "image: mkosi:" not in text and "Installing Debian" not in text, text[-3000:]
    assert not (out / FLAVOR / "work" / "mkosi-out").exists()


def test_unreachable_artifact_fails_fast_naming_it(tmp_path):
    port = free_port()  # nothing listens there: connection refused
    url = f"http://127.0.0.1:{port}/envd"
    recipes = write_release_lock(tmp_path / "recipes", url, "ab" * 32)
    out = tmp_path / "out"
    cp = make_release_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    err = cp.stderr
    assert "envd" in err and url in err, err
    assert "pin_mirror=" in err and "offline=1" in err and "recipes=" in err, err
    # It stopped at the pinned artifacts: no step after them ran (no timed
    # bound, which a loaded machine could break).
    assert not (out / FLAVOR / "work/extra/etc/envd-version").exists()
    assert_mkosi_never_ran(cp, out)


def test_wrong_sha_fails_before_mkosi(tmp_path, artifact_server):
    wrong = hashlib.sha256(b"not the real envd").hexdigest()
    recipes = write_release_lock(tmp_path / "recipes", f"{artifact_server}/envd", wrong)
    out = tmp_path / "out"
    cp = make_release_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    assert "sha256" in cp.stderr and wrong in cp.stderr, cp.stderr
    assert_mkosi_never_ran(cp, out)
    assert not (out / FLAVOR / "work/extra/usr/bin/envd").exists()


def test_wrong_version_in_lock_fails_before_mkosi(tmp_path, real_envd, artifact_server):
    recipes = write_release_lock(tmp_path / "recipes", f"{artifact_server}/envd",
                         sha256_file(real_envd[0]), version="9.9.9")
    out = tmp_path / "out"
    cp = make_release_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    assert "envd" in cp.stderr and "9.9.9" in cp.stderr, cp.stderr
    assert_mkosi_never_ran(cp, out)


def test_offline_uses_filled_cache_and_pin_mirror(tmp_path, real_envd, artifact_server):
    sha = sha256_file(real_envd[0])
    cache = tmp_path / "cache"
    online = write_release_lock(tmp_path / "online", f"{artifact_server}/envd", sha)
    cp = make_release_image(tmp_path / "o1", online, target="image-preflight", cache=cache, timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert (cache / "pinfetch/sha256" / sha).is_file()
    # The canonical URL is now dead; offline=1 is served from the cache.
    dead = write_release_lock(tmp_path / "dead", f"http://127.0.0.1:{free_port()}/envd", sha)
    cp = make_release_image(tmp_path / "o2", dead, "offline=1", target="image-preflight", cache=cache,
                    timeout=300)
    assert cp.returncode == 0, cp.stderr
    got = tmp_path / "o2" / FLAVOR / "work/extra/usr/bin/envd"
    assert sha256_file(got) == sha and os.stat(got).st_mode & 0o777 == 0o755
    assert (tmp_path / "o2" / FLAVOR / "work/extra/etc/envd-version").read_text() == real_envd[1]
    # A copy of the cache is a mirror (file://), used with an empty cache.
    cp = make_release_image(tmp_path / "o3", dead, f"pin_mirror=file://{cache / 'pinfetch'}",
                    "offline=1", target="image-preflight", cache=tmp_path / "empty", timeout=300)
    assert cp.returncode == 0, cp.stderr


# --- sources.py ------------------------------------------------------------

def run_sources(tmp_path, *args):
    out = tmp_path / "mkosi.sources"
    cp = subprocess.run(["/usr/bin/python3", str(SOURCES), "--output", str(out), "--print-json",
                         *args], capture_output=True, text=True, timeout=30)
    return cp, (out.read_text() if out.exists() else "")


def fake_apt(tmp_path, sources=None, listfile=None):
    root = tmp_path / "apt"
    (root / "sources.list.d").mkdir(parents=True)
    if sources:
        (root / "sources.list.d/debian.sources").write_text(sources)
    if listfile:
        (root / "sources.list").write_text(listfile)
    return root


DEB822 = """Types: deb
# http://snapshots.example.invalid/archive/debian/20250520T000000Z
URIs: http://mirror.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def test_sources_from_machine_deb822(tmp_path):
    apt = fake_apt(tmp_path, sources=DEB822)
    cp, text = run_sources(tmp_path, "--release", "trixie", "--apt-root", str(apt))
    assert cp.returncode == 0, cp.stderr
    assert "URIs: http://mirror.example.invalid/debian\nSuites: trixie trixie-updates" in text
    assert "URIs: http://mirror.example.invalid/debian-security\nSuites: trixie-security" in text
    assert "debug" not in text and "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in text
    suites = [a["suite"] for a in json.loads(cp.stdout)["archives"]]
    assert suites == ["trixie", "trixie-updates", "trixie-security"]


def test_sources_from_one_line_list_and_mirror_override(tmp_path):
    apt = fake_apt(tmp_path, listfile="deb [arch=amd64] http://m.example.invalid/debian bookworm main\n"
                                      "deb http://m.example.invalid/debian-security bookworm-security main\n")
    cp, text = run_sources(tmp_path, "--release", "bookworm", "--apt-root", str(apt))
    assert cp.returncode == 0 and "URIs: http://m.example.invalid/debian\n" in text, cp.stderr
    cp, text = run_sources(tmp_path, "--release", "bookworm", "--apt-root", str(apt),
                           "--mirror", "http://other.example.invalid/debian/")
    assert "URIs: http://other.example.invalid/debian\n" in text
    assert "URIs: http://other.example.invalid/debian-security\n" in text


def test_sources_snapshot(tmp_path):
    apt = fake_apt(tmp_path, sources=DEB822)
    cp, text = run_sources(tmp_path, "--release", "trixie", "--apt-root", str(apt),
                           "--snapshot", "20251101T000000Z")
    assert cp.returncode == 0, cp.stderr
    assert "URIs: http://snapshots.example.invalid/archive/debian/20251101T000000Z\n" in text
    assert "debian-security/20251101T000000Z" in text and "Check-Valid-Until: no" in text
    assert json.loads(cp.stdout)["snapshot"] == "20251101T000000Z"
    cp, _ = run_sources(tmp_path, "--release", "trixie", "--apt-root", str(apt),
                        "--snapshot", "yesterday")
    assert cp.returncode == 2
    bare = fake_apt(tmp_path / "b", listfile="deb http://m.example.invalid/debian bookworm main\n")
    cp, _ = run_sources(tmp_path, "--release", "trixie", "--apt-root", str(bare),
                        "--snapshot", "20251101T000000Z")
    assert cp.returncode == 1 and "snapshot_base=" in cp.stderr


def test_sources_without_any_source_names_the_fix(tmp_path):
    apt = fake_apt(tmp_path)
    cp, _ = run_sources(tmp_path, "--release", "trixie", "--apt-root", str(apt))
    assert cp.returncode == 1 and "mirror=" in cp.stderr
    cp, _ = run_sources(tmp_path, "--release", "noble", "--distro", "ubuntu", "--apt-root", str(apt))
    assert cp.returncode == 1 and "mirror=" in cp.stderr


# --- envd=source: bad inputs stop the build before mkosi, leaving nothing ---

def assert_stopped_clean(cp, out):
    assert cp.returncode != 0
    assert_mkosi_never_ran(cp, out)
    assert not (out / FLAVOR / "work").exists(), sorted(p.name for p in (out / FLAVOR).iterdir())


def source_preflight(tmp_path, *args, cache=None, env=None):
    """make image-preflight with the shipped recipes (envd=source)."""
    s = testimages.sources()
    return testimages.make(FLAVOR, tmp_path / "out", "image-preflight", *args, recipes=s.recipes(FLAVOR),
                           cache=cache or tmp_path / "cache", timeout=900, env=env)


def test_unknown_envd_value_stops_naming_it(tmp_path):
    cp = source_preflight(tmp_path, "envd=nightly", *testimages.sources().make_args(FLAVOR))
    assert_stopped_clean(cp, tmp_path / "out")
    assert "envd=nightly: unknown" in cp.stderr and "envd=source" in cp.stderr and "envd=release" in cp.stderr


def test_tampered_source_archive_stops_before_go(tmp_path):
    """A mirror copy of the tag's archive with one file changed: pinfetch refuses
    the tree, and neither Go nor mkosi runs."""
    import tarfile
    pin = testimages.lock_stanza(testimages.SHIPPED_ENVD_LOCK, "envd-source")
    mirror = tmp_path / "mirror" / "tree"
    mirror.mkdir(parents=True)
    with tarfile.open(testimages.envd_source_archive()) as src, \
            tarfile.open(mirror / testimages.tree_pin_hex(pin["tree_sha256"]), "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("packages/envd/pkg/version.go"):
                data = data.replace(b"0.6.13", b"0.6.14")
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    cp = source_preflight(tmp_path, f"pin_mirror=file://{mirror.parent}")
    assert_stopped_clean(cp, tmp_path / "out")
    assert "[envd-source]" in cp.stderr and pin["tree_sha256"] in cp.stderr, cp.stderr[-3000:]
    assert "pin_mirror=" in cp.stderr and "envd=release" in cp.stderr
    assert "building envd" not in cp.stderr


def test_module_not_matching_go_sum_stops(tmp_path):
    """A module proxy (file://, a copy of the session's module cache) that serves
    a changed zip of one module: go refuses it against go.sum, nothing is built."""
    import zipfile
    testimages.sources()  # the session's envd build fills the module cache copied here
    downloads = testimages.CACHE / "go" / "mod" / "cache" / "download"
    proxy = tmp_path / "proxy"
    shutil.copytree(downloads, proxy, copy_function=os.link)
    victim = proxy / "github.com/creack/pty/@v/v1.1.24.zip"
    data = victim.read_bytes()
    victim.unlink()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(victim, "w") as zout:
        for info in zin.infolist():
            body = zin.read(info)
            if info.filename.endswith("/doc.go"):
                body += b"\n// changed on the way\n"
            zout.writestr(info, body)
    env = dict(os.environ, GOPROXY=f"file://{proxy}")
    cp = source_preflight(tmp_path, *testimages.sources().make_args(FLAVOR), env=env)
    assert_stopped_clean(cp, tmp_path / "out")
    assert "does not match envd's go.sum" in cp.stderr, cp.stderr[-3000:]
    assert "github.com/creack/pty" in cp.stderr and "GOPROXY" in cp.stderr
    assert not any((tmp_path / "cache" / "envd-source").glob("*/envd"))


def test_toolchain_that_cannot_be_had_stops(tmp_path):
    env = dict(os.environ, GOPROXY="off")
    cp = source_preflight(tmp_path, "go_toolchain=go1.26.99", *testimages.sources().make_args(FLAVOR), env=env)
    assert_stopped_clean(cp, tmp_path / "out")
    assert "Go toolchain go1.26.99 cannot be had" in cp.stderr, cp.stderr[-3000:]
    assert "go_toolchain=" in cp.stderr and "offline=1" in cp.stderr


def test_offline_rebuild_from_module_cache_gives_the_same_envd(tmp_path, real_envd):
    """A second envd build, offline (GOPROXY=off, no pin mirror), from the
    session's pinfetch and module caches, its cached binary changed by one
    byte: the change is noticed, envd is built again, with the same bytes as
    the first build, and the image's /etc/envd-version comes from it."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for d in ("pinfetch", "go"):
        (cache / d).symlink_to(testimages.CACHE / d)
    key = real_envd[2]["cache_key"]
    shutil.copytree(testimages.CACHE / "envd-source" / key, cache / "envd-source" / key)
    changed = cache / "envd-source" / key / "envd"
    data = bytearray(changed.read_bytes())
    data[len(data) // 2] ^= 1
    changed.write_bytes(bytes(data))
    cp = source_preflight(tmp_path, "offline=1", cache=cache)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "does not match its record" in cp.stderr and "building envd 0.6.13" in cp.stderr, cp.stderr[-3000:]
    extra = tmp_path / "out" / FLAVOR / "work/extra"
    assert sha256_file(extra / "usr/bin/envd") == sha256_file(real_envd[0])
    assert sha256_file(changed) == sha256_file(real_envd[0])
    assert (extra / "etc/envd-version").read_text() == real_envd[1]
