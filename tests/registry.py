"""A real registry on loopback for the tests that push and pull with skopeo
(`make publish`, an E2B template's fromImage): Debian's docker-registry
(distribution 2.8) on 127.0.0.1 with TLS from a CA made for the test and
htpasswd auth, so clients verify TLS (never switched off) and need
credentials. Stopped when the context ends, even when a test fails."""
import base64
import contextlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from harness import free_port, stop_process


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@contextlib.contextmanager
def tls_registry(d: pathlib.Path, user: str, password: str):
    """Yields {addr, certs (a cert dir with the CA), dir, auth (an auth file
    with USER's credentials, as `skopeo login` writes it)}."""
    if not shutil.which("docker-registry"):
        pytest.fail("docker-registry is not installed (apt-get install docker-registry)")
    bcrypt = pytest.importorskip("bcrypt", reason="python3-bcrypt makes the htpasswd file")
    certs = d / "certs"
    certs.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=e2b test CA",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "ext.cnf", "-out", "server.crt", cwd=d)
    shutil.copy(d / "ca.crt", certs / "ca.crt")
    (d / "htpasswd").write_text(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4, prefix=b'2a')).decode()}\n")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    (d / "config.yml").write_text(json.dumps({
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(d / "data")}},
        "http": {"addr": addr, "tls": {"certificate": str(d / "server.crt"), "key": str(d / "server.key")}},
        "auth": {"htpasswd": {"realm": "e2b-test", "path": str(d / "htpasswd")}},
    }))
    auth = d / "auth.json"
    auth.write_text(json.dumps({"auths": {addr: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}}))
    log = open(d / "registry.log", "wb")
    # The registry reads REGISTRY_* from its environment as configuration: a
    # client's REGISTRY_AUTH_FILE must not reach it. Deletes on: the shared
    # cache's pruning (regcache/prune.py) removes manifests.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    proc = subprocess.Popen(["docker-registry", "serve", str(d / "config.yml")], stdout=log, stderr=log,
                            env=dict(env, REGISTRY_STORAGE_DELETE_ENABLED="true"))
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail(f"docker-registry exited: {(d / 'registry.log').read_text()}")
            time.sleep(0.1)
        yield {"addr": addr, "certs": str(certs), "dir": d, "auth": str(auth), "proc": proc}
    finally:
        stop_process(proc)
        log.close()
