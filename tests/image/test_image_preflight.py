"""The quick steps of `make image`, which must stop a doomed build before
mkosi runs: pinned artifacts (through pinfetch), the envd version, the apt
sources. Plus sources.py against fake apt configurations and the envd
stand-in's MMDS flow (the behaviour the boot test relies on)."""
import hashlib
import http.server
import json
import os
import subprocess
import threading
import time

from harness import stop_process
from image_helpers import (  # noqa: F401  (fixtures are used by name)
    FLAVOR, ROOT, artifact_server, built, free_port, make_image, sha256_file, standin,
    test_recipes, write_lock,
)

SOURCES = ROOT / "os-image/sources.py"


def assert_mkosi_never_ran(cp, out):
    text = cp.stdout + cp.stderr
    assert "image: mkosi:" not in text and "Installing Debian" not in text, text[-3000:]
    assert not (out / FLAVOR / "work" / "mkosi-out").exists()


def test_unreachable_artifact_fails_fast_naming_it(tmp_path):
    port = free_port()  # nothing listens there: connection refused
    url = f"http://127.0.0.1:{port}/envd"
    recipes = write_lock(tmp_path / "recipes", url, "ab" * 32)
    out = tmp_path / "out"
    cp = make_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    err = cp.stderr
    assert "envd" in err and url in err, err
    assert "pin_mirror=" in err and "offline=1" in err and "recipes=" in err, err
    # It stopped at the pinned artifacts: no step after them ran (no timed
    # bound, which a loaded machine could break).
    assert not (out / FLAVOR / "work/extra/etc/envd-version").exists()
    assert_mkosi_never_ran(cp, out)


def test_wrong_sha_fails_before_mkosi(tmp_path, artifact_server):
    wrong = hashlib.sha256(b"not the stand-in").hexdigest()
    recipes = write_lock(tmp_path / "recipes", f"{artifact_server}/envd", wrong)
    out = tmp_path / "out"
    cp = make_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    assert "sha256" in cp.stderr and wrong in cp.stderr, cp.stderr
    assert_mkosi_never_ran(cp, out)
    assert not (out / FLAVOR / "work/extra/usr/local/bin/envd").exists()


def test_wrong_version_in_lock_fails_before_mkosi(tmp_path, standin, artifact_server):
    recipes = write_lock(tmp_path / "recipes", f"{artifact_server}/envd",
                         sha256_file(standin[0]), version="9.9.9")
    out = tmp_path / "out"
    cp = make_image(out, recipes, cache=tmp_path / "cache", timeout=300)
    assert cp.returncode != 0
    assert "envd" in cp.stderr and "9.9.9" in cp.stderr, cp.stderr
    assert_mkosi_never_ran(cp, out)


def test_offline_uses_filled_cache_and_pin_mirror(tmp_path, standin, artifact_server):
    sha = sha256_file(standin[0])
    cache = tmp_path / "cache"
    online = write_lock(tmp_path / "online", f"{artifact_server}/envd", sha)
    cp = make_image(tmp_path / "o1", online, target="image-preflight", cache=cache, timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert (cache / "pinfetch/sha256" / sha).is_file()
    # The canonical URL is now dead; offline=1 is served from the cache.
    dead = write_lock(tmp_path / "dead", f"http://127.0.0.1:{free_port()}/envd", sha)
    cp = make_image(tmp_path / "o2", dead, "offline=1", target="image-preflight", cache=cache,
                    timeout=300)
    assert cp.returncode == 0, cp.stderr
    got = tmp_path / "o2" / FLAVOR / "work/extra/usr/local/bin/envd"
    assert sha256_file(got) == sha and os.stat(got).st_mode & 0o777 == 0o755
    assert (tmp_path / "o2" / FLAVOR / "work/extra/etc/envd-version").read_text() == standin[1]
    # A copy of the cache is a mirror (file://), used with an empty cache.
    cp = make_image(tmp_path / "o3", dead, f"pin_mirror=file://{cache / 'pinfetch'}",
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


# --- the envd stand-in -----------------------------------------------------

class FakeMMDS(http.server.BaseHTTPRequestHandler):
    """Records requests; answers a token, then a document."""
    seen = []

    def log_message(self, *a):
        pass

    def do_PUT(self):
        FakeMMDS.seen.append(("PUT", self.path, dict(self.headers)))
        body = b"tok-123"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        FakeMMDS.seen.append(("GET", self.path, dict(self.headers)))
        body = json.dumps({"instanceID": "sbx-1", "envID": "tpl-1"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_standin_does_envds_mmds_flow_and_health(tmp_path, standin):
    FakeMMDS.seen = []
    mmds = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeMMDS)
    threading.Thread(target=mmds.serve_forever, daemon=True).start()
    port = free_port()
    run_dir = tmp_path / "run"
    p = subprocess.Popen([str(standin[0]), "-port", str(port), "-run-dir", str(run_dir),
                          "-mmds", f"http://127.0.0.1:{mmds.server_address[1]}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (run_dir / ".E2B_SANDBOX_ID").exists():
            time.sleep(0.05)
        assert (run_dir / ".E2B_SANDBOX_ID").read_text() == "sbx-1"
        assert (run_dir / ".E2B_TEMPLATE_ID").read_text() == "tpl-1"
        put = [s for s in FakeMMDS.seen if s[0] == "PUT"][0]
        assert put[1] == "/latest/api/token" and put[2].get("X-metadata-token-ttl-seconds") == "60"
        get = [s for s in FakeMMDS.seen if s[0] == "GET"][0]
        assert get[2].get("X-metadata-token") == "tok-123"
        assert get[2].get("Accept") == "application/json"
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            assert r.status == 204 and r.read() == b""
    finally:
        stop_process(p)
        mmds.shutdown()
        mmds.server_close()


def test_standin_says_it_is_a_stand_in():
    src = (ROOT / "tests/envd-standin/main.go").read_text()
    assert "TEST STAND-IN" in src and "never" in src
