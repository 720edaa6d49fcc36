"""`make publish`: a real push with skopeo to a real registry on loopback.

Debian's docker-registry (distribution 2.8) runs on 127.0.0.1 with TLS from a
CA made for the test and htpasswd auth, so the push verifies TLS (never
switched off) and uses credentials from the environment, as CI does.
"""
import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from ocifixture import make_flavor_dir
from registry import tls_registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
USER, PASSWORD = "e2b-ci", "s3cret-for-test-only"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with tls_registry(tmp_path_factory.mktemp("registry"), USER, PASSWORD) as r:
        yield r


def make(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("E2B_REGISTRY_")}
    e.update(env or {})
    return subprocess.run(["make", "--no-print-directory", "-s", *args], cwd=ROOT, capture_output=True,
                          text=True, env=e, timeout=300)


CREDS = {"E2B_REGISTRY_USER": USER, "E2B_REGISTRY_PASSWORD": PASSWORD}


def test_publish_to_tls_registry(registry, tmp_path):
    built = make_flavor_dir(tmp_path, "e2b-rt")
    cp = make("publish", f"out={tmp_path}", "flavor=e2b-rt", f"registry={registry['addr']}", "tag=t1",
              f"cert_dir={registry['certs']}", env=CREDS)
    assert cp.returncode == 0, cp.stderr
    assert PASSWORD not in cp.stdout + cp.stderr
    rec = json.loads((tmp_path / "e2b-rt" / "published.json").read_text())
    assert rec == {"registry": registry["addr"], "tag": "t1", "digest": built,
                   "reference": f"docker://{registry['addr']}/e2b-rt:t1"}
    # What the registry now serves under the tag hashes to the built digest.
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--cert-dir", registry["certs"],
                          "--creds", f"{USER}:{PASSWORD}", f"docker://{registry['addr']}/e2b-rt:t1"],
                         capture_output=True, check=True, timeout=60).stdout
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == built
    # And by digest, as a pool pulls it.
    cp = subprocess.run(["skopeo", "inspect", "--cert-dir", registry["certs"], "--creds", f"{USER}:{PASSWORD}",
                         f"docker://{registry['addr']}/e2b-rt@{built}"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and json.loads(cp.stdout)["Digest"] == built, cp.stderr
    # The template then pins that pushed digest.
    cp = make("templates", f"out={tmp_path}", "flavors=e2b-rt", f"registry={registry['addr']}", "tag=t1")
    assert cp.returncode == 0, cp.stderr
    t = json.loads((tmp_path / "templates" / "e2b-rt.json").read_text())
    assert t["template"] == f"{registry['addr']}/e2b-rt@{built}"


def test_publish_without_credentials_fails(registry, tmp_path):
    make_flavor_dir(tmp_path, "e2b-rt")
    cp = make("publish", f"out={tmp_path}", "flavor=e2b-rt", f"registry={registry['addr']}", "tag=t2",
              f"cert_dir={registry['certs']}")
    assert cp.returncode != 0
    assert f"docker://{registry['addr']}/e2b-rt:t2" in cp.stderr
    assert "unauthorized" in cp.stderr.lower() or "authentication required" in cp.stderr.lower(), cp.stderr
    assert not (tmp_path / "e2b-rt" / "published.json").exists()


def test_publish_verifies_tls(registry, tmp_path):
    """No CA given: the registry's certificate is unknown and the push must fail."""
    make_flavor_dir(tmp_path, "e2b-rt")
    cp = make("publish", f"out={tmp_path}", "flavor=e2b-rt", f"registry={registry['addr']}", "tag=t3",
              env={**CREDS, "HOME": str(tmp_path)})
    assert cp.returncode != 0
    assert "certificate" in cp.stderr.lower() or "x509" in cp.stderr.lower(), cp.stderr
    assert not (tmp_path / "e2b-rt" / "published.json").exists()


def test_publish_to_oci_directory(tmp_path):
    built = make_flavor_dir(tmp_path / "out", "e2b-rt")
    dest = tmp_path / "dest"
    dest.mkdir()
    cp = make("publish", f"out={tmp_path / 'out'}", "flavor=e2b-rt", f"registry=oci:{dest}", "tag=v1")
    assert cp.returncode == 0, cp.stderr
    index = json.loads((dest / "e2b-rt" / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [built]
    assert json.loads((tmp_path / "out" / "e2b-rt" / "published.json").read_text())["digest"] == built


def test_publish_refuses_layout_that_disagrees_with_manifest_json(tmp_path):
    make_flavor_dir(tmp_path, "e2b-rt")
    mf = tmp_path / "e2b-rt" / "manifest.json"
    m = json.loads(mf.read_text())
    m["outputs"]["oci"]["manifest"]["digest"] = "sha256:" + "0" * 64
    mf.write_text(json.dumps(m))
    cp = make("publish", f"out={tmp_path}", "flavor=e2b-rt", f"registry=oci:{tmp_path / 'dest'}", "tag=v1")
    assert cp.returncode != 0  # publish.py exits 1; make reports 2
    assert "manifest.json" in cp.stderr and "0" * 64 in cp.stderr


def test_publish_needs_registry_and_tag(tmp_path):
    cp = make("publish", f"out={tmp_path}", "flavor=e2b-rt")
    assert cp.returncode != 0 and "registry= and tag=" in cp.stderr
