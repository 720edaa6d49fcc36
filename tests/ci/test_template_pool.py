"""`make templates` for a user's template (out/<name>/ from `make template=DIR`):
the pool template pins it by digest and its warmup waits for envd, then for
the template's ready check (read from the image's labels), and fails with
the check and its timeout when the check never passes -- run here against
real listeners in a network namespace. The boot of a real template is
tests/boot/test_template_boot.py."""
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

from netns import Netns
from ocifixture import make_flavor_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "ci" / "pool-template.schema.json").read_text())
REG = "registry.example.test:5000/e2b"
# Answers every GET with 200: envd's /health, and a template's url check.
OK_SERVER = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("ready", flush=True)
s.serve_forever()
"""


def make(*args):
    return subprocess.run(["make", "--no-print-directory", "-s", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def template_out(tmp: pathlib.Path, name: str, ready: str, timeout: int = 3, memory_mb: int = 256,
                 flavor: str = "e2b-rt", **more) -> str:
    """out/<name>/ as `make template=DIR` leaves it: an OCI layout and a
    manifest.json with the image's labels (os-image/labels.py's keys)."""
    digest = make_flavor_dir(tmp, name, payload=name.encode())
    m = json.loads((tmp / name / "manifest.json").read_text())
    m["labels"] = {"org.e2b-images.name": name, "org.e2b-images.flavor": flavor,
                   "org.e2b-images.ready": ready, "org.e2b-images.ready-timeout": str(timeout),
                   "org.e2b-images.memory-mb": str(memory_mb), "org.e2b-images.vcpu": "1",
                   **{f"org.e2b-images.{k.replace('_', '-')}": v for k, v in more.items()}}
    (tmp / name / "manifest.json").write_text(json.dumps(m))
    return digest


def pool_template(tmp, name):
    cp = make("templates", f"out={tmp}", f"registry={REG}", f"flavors={name}")
    assert cp.returncode == 0, cp.stderr
    return json.loads((tmp / "templates" / f"{name}.json").read_text())


def test_template_is_pinned_and_valid(tmp_path):
    digest = template_out(tmp_path, "web", "port 3000", memory_mb=4096)
    t = pool_template(tmp_path, "web")
    jsonschema.validate(t, SCHEMA)
    assert t["template"] == f"{REG}/web@{digest}"
    assert t["size"] == "large"
    assert "sport = :3000" in t["warmup"][-1] and "127.0.0.1:49983/health" in t["warmup"][-1]


def test_template_host_warmup_is_restore_alone(tmp_path):
    """A template of one's own gets the same restore as its flavor (envd and
    the clone step are its base's); its ready check stays in the clone."""
    template_out(tmp_path, "web", "port 3000")
    cp = make("templates", f"out={tmp_path}", f"registry={REG}", "flavors=web", "host_warmup=cid")
    assert cp.returncode == 0, cp.stderr
    t = json.loads((tmp_path / "templates" / "web.json").read_text())
    jsonschema.validate(t, SCHEMA)
    assert t["hostWarmup"] == ["sh", "-c", "e2b-hostlink --cid {vsock_cid} --timeout 30 restore --generation "
                               "{clone_generation} --document {clone_document} --token-file {access_token_file}"]
    assert "sport = :3000" in t["warmup"][-1]


def test_e2b_template_host_warmup_gives_envd_its_defaults(tmp_path):
    """An E2B template: /init gets the user and workdir its steps left, as
    E2B's build makes them envd's defaults; on e2b-ci the restore also waits
    for the code interpreter, as its flavor's does."""
    template_out(tmp_path, "app", "command /usr/lib/e2b-template/ready", flavor="e2b-ci",
                 envd_user="app", envd_workdir="/opt/my app")
    cp = make("templates", f"out={tmp_path}", f"registry={REG}", "flavors=app", "host_warmup=uds")
    assert cp.returncode == 0, cp.stderr
    t = json.loads((tmp_path / "templates" / "app.json").read_text())
    jsonschema.validate(t, SCHEMA)
    assert t["hostWarmup"] == ["sh", "-c", "e2b-hostlink --uds {vsock_uds} --timeout 30 restore --generation "
                               "{clone_generation} --document {clone_document} --token-file {access_token_file} "
                               "--user app --workdir '/opt/my app' && "
                               "e2b-hostlink --uds {vsock_uds} --timeout 120 wait 49999"]


def test_unknown_name_is_an_error(tmp_path):
    cp = make("templates", f"out={tmp_path}", f"registry={REG}", "flavors=nosuch")
    assert cp.returncode != 0 and "neither a flavor" in cp.stderr and "nosuch" in cp.stderr


@pytest.fixture
def ns():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace)")
    n = Netns("tplpool")
    yield n
    n.close()


def serve(ns, port):
    p = ns.popen("/usr/bin/python3", "-c", OK_SERVER, str(port), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"


@pytest.mark.parametrize("ready", ["port 3000", "url http://127.0.0.1:3000/"])
def test_warmup_waits_for_envd_then_the_check(tmp_path, ns, ready):
    template_out(tmp_path, "web", ready)
    warmup = pool_template(tmp_path, "web")["warmup"]
    serve(ns, 49983)
    serve(ns, 3000)
    cp = ns.run(*warmup, timeout=120)
    assert cp.returncode == 0, cp.stderr


def test_warmup_fails_naming_the_check_that_never_passed(tmp_path, ns):
    template_out(tmp_path, "web", "port 3000", timeout=2)
    warmup = pool_template(tmp_path, "web")["warmup"]
    serve(ns, 49983)  # envd answers; nothing ever listens on 3000
    cp = ns.run(*warmup, timeout=120)
    assert cp.returncode == 1
    assert "template web: ready check 'port 3000' did not pass within 2s" in cp.stderr


def test_warmup_fails_when_envd_never_answers(tmp_path, ns):
    template_out(tmp_path, "web", "port 3000")
    warmup = pool_template(tmp_path, "web")["warmup"]
    serve(ns, 3000)  # the check would pass, but envd is not there
    cp = ns.run(*warmup, timeout=120)
    assert cp.returncode == 1 and "envd never answered" in cp.stderr
