"""`make templates`: pool templates pinned by the built digest, valid against
ci/pool-template.schema.json, with warmups that really wait on envd (and, for
e2b-ci, the code interpreter) -- run here against servers in a namespace."""
import contextlib
import json
import os
import pathlib
import shutil
import subprocess

import jsonschema
import pytest

from ocifixture import make_flavor_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "ci" / "pool-template.schema.json").read_text())
REG = "registry.example.test:5000/e2b"


def make(*args):
    return subprocess.run(["make", "--no-print-directory", "-s", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def out(tmp_path):
    digests = {f: make_flavor_dir(tmp_path, f, payload=f.encode()) for f in ("e2b-rt", "e2b-ci")}
    return tmp_path, digests


def test_templates_valid_and_pinned(out):
    tmp, digests = out
    cp = make("templates", f"out={tmp}", f"registry={REG}", "tag=v1", "flavors=e2b-rt e2b-ci")
    assert cp.returncode == 0, cp.stderr
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for flavor, size in (("e2b-rt", "small"), ("e2b-ci", "medium")):
        t = json.loads((tmp / "templates" / f"{flavor}.json").read_text())
        jsonschema.validate(t, SCHEMA)
        assert t["template"] == f"{REG}/{flavor}@{digests[flavor]}"
        assert t["net"] == "none" and t["size"] == size and t["warm"] >= 1
        script = t["warmup"][-1]
        assert "127.0.0.1:49983/health" in script and "seq 1 200" in script and "sleep 0.05" in script
        assert ("127.0.0.1:49999/health" in script) == (flavor == "e2b-ci")


def test_rt_warmup_is_the_contract_loop(out):
    tmp, _ = out
    assert make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt").returncode == 0
    t = json.loads((tmp / "templates" / "e2b-rt.json").read_text())
    assert t["warmup"] == ["sh", "-c", "for i in $(seq 1 200); do curl -sf -o /dev/null "
                           "http://127.0.0.1:49983/health && exit 0; sleep 0.05; done; exit 1"]


@pytest.mark.parametrize("transport, address", [("uds", "--uds {vsock_uds}"), ("cid", "--cid {vsock_cid}")])
def test_host_warmup_is_the_restore_command(out, transport, address):
    """host_warmup=uds|cid: each flavor's hostWarmup is `e2b-hostlink
    restore` (clone step, /health, /init with the clone's token, the token
    check) under one 30 s deadline; e2b-ci then waits for its code
    interpreter. Without host_warmup there is none. (Run for real in
    tests/hostlink/test_host_warmup.py.)"""
    tmp, _ = out
    cp = make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt e2b-ci", f"host_warmup={transport}")
    assert cp.returncode == 0, cp.stderr
    restore = (f"e2b-hostlink {address} --timeout 30 restore --generation {{clone_generation}} "
               "--document {clone_document} --token-file {access_token_file}")
    for flavor, rest in (("e2b-rt", ""), ("e2b-ci", f" && e2b-hostlink {address} --timeout 120 wait 49999")):
        t = json.loads((tmp / "templates" / f"{flavor}.json").read_text())
        jsonschema.validate(t, SCHEMA)
        assert t["hostWarmup"] == ["sh", "-c", restore + rest], t["hostWarmup"]
    assert make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt").returncode == 0
    assert "hostWarmup" not in json.loads((tmp / "templates" / "e2b-rt.json").read_text())


def test_host_warmup_refuses_an_unknown_transport(out):
    tmp, _ = out
    cp = make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt", "host_warmup=tcp")
    assert cp.returncode != 0 and "tcp" in cp.stderr, cp.stderr


@pytest.mark.parametrize("bad", [
    {"net": "bridge"},
    {"size": "huge"},
    {"warm": -1},
    {"warmup": []},
    {"template": "registry.example.test/e2b-rt:latest"},
    {"template": "registry.example.test/e2b-rt@sha256:abc"},
    {"extra": 1},
])
def test_schema_rejects(out, bad):
    tmp, _ = out
    assert make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt").returncode == 0
    t = json.loads((tmp / "templates" / "e2b-rt.json").read_text())
    t.update(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(t, SCHEMA)


def test_digest_mismatch_is_refused(out):
    tmp, _ = out
    blob_dir = tmp / "e2b-rt" / "oci" / "blobs" / "sha256"
    index = json.loads((tmp / "e2b-rt" / "oci" / "index.json").read_text())
    manifest = blob_dir / index["manifests"][0]["digest"].split(":")[1]
    manifest.write_bytes(manifest.read_bytes() + b" ")  # the layout no longer matches its index
    cp = make("templates", f"out={tmp}", f"registry={REG}", "flavors=e2b-rt")
    assert cp.returncode != 0 and "index says" in cp.stderr


def test_pushed_digest_must_equal_built(out):
    tmp, digests = out
    (tmp / "e2b-rt" / "published.json").write_text(json.dumps(
        {"registry": REG, "tag": "v1", "digest": "sha256:" + "1" * 64, "reference": "x"}))
    cp = make("templates", f"out={tmp}", f"registry={REG}", "tag=v1", "flavors=e2b-rt")
    assert cp.returncode != 0 and "pushed digest" in cp.stderr


def test_missing_image_is_an_error(tmp_path):
    cp = make("templates", f"out={tmp_path}", f"registry={REG}", "flavors=e2b-rt")
    assert cp.returncode != 0 and "index.json" in cp.stderr


# --- the warmups themselves, against real listeners in a private namespace ---

HEALTH_SERVER = r"""
import http.server, sys
port, code, not_ready, log = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
served = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global served
        if self.path != "/health":
            self.send_response(404); self.end_headers(); return
        served += 1
        with open(log, "w") as f:
            f.write(str(served))
        status = 503 if served <= not_ready else code
        self.send_response(status)
        body = b'"OK"' if status == 200 else b""
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
server = http.server.HTTPServer(("127.0.0.1", port), H)
print("ready", flush=True)
server.serve_forever()
"""


@contextlib.contextmanager
def netns(tmp):
    """serve(port, code, not_ready): a /health server that answers 503 to the
    first `not_ready` requests, then `code`; requests(port) counts what it was
    asked. The warmups are judged by those counts, never by elapsed time."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace)")
    name = f"e2bt-tmpl-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    procs = []
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)

        def serve(port, code, not_ready=0):
            argv = ["ip", "netns", "exec", name, "/usr/bin/python3", "-c", HEALTH_SERVER,
                    str(port), str(code), str(not_ready), str(tmp / f"served-{port}")]
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "ready"

        def requests(port):
            log = tmp / f"served-{port}"
            return int(log.read_text()) if log.exists() else 0

        def run(argv, timeout=240):
            return subprocess.run(["ip", "netns", "exec", name, *argv], capture_output=True,
                                  timeout=timeout).returncode
        yield serve, requests, run
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", name])


def _warmup(tmp, flavor):
    assert make("templates", f"out={tmp}", f"registry={REG}", f"flavors={flavor}").returncode == 0
    return json.loads((tmp / "templates" / f"{flavor}.json").read_text())["warmup"]


@pytest.mark.skipif(not shutil.which("curl"), reason="curl runs the warmup")
def test_rt_warmup_waits_for_envd(out):
    tmp, _ = out
    warmup = _warmup(tmp, "e2b-rt")
    with netns(tmp) as (serve, requests, run):
        serve(49983, 204, not_ready=5)  # envd comes up after the warmup started
        assert run(warmup) == 0
        assert requests(49983) == 6  # five refusals, then the answer that ended it


@pytest.mark.skipif(not shutil.which("curl"), reason="curl runs the warmup")
def test_rt_warmup_fails_without_envd(out):
    tmp, _ = out
    warmup = _warmup(tmp, "e2b-rt")
    with netns(tmp) as (serve, requests, run):
        serve(49983, 204, not_ready=10**6)  # never ready
        assert run(warmup) == 1
        assert requests(49983) == 200  # the contract's 200 tries, then it gives up


@pytest.mark.skipif(not shutil.which("curl"), reason="curl runs the warmup")
def test_ci_warmup_waits_for_both(out):
    tmp, _ = out
    warmup = _warmup(tmp, "e2b-ci")
    with netns(tmp) as (serve, requests, run):
        serve(49983, 204, not_ready=3)
        # More tries than envd's budget of 200: the code interpreter's own
        # budget applies to it.
        serve(49999, 200, not_ready=250)
        assert run(warmup) == 0
        assert (requests(49983), requests(49999)) == (4, 251)
