"""pytest fixtures shared by the mmds test modules (imported by them)."""
import pytest

from harness import require_root
from mmds_helpers import MMDS_IP, MmdsNetns, Server


@pytest.fixture
def netns():
    require_root()
    ns = MmdsNetns()
    yield ns
    ns.close()


@pytest.fixture
def mmds(tools, netns, tmp_path):
    """Factory: mmds(*args, document=...) starts a server; all are stopped
    (and checked for sanitizer reports) at teardown."""
    servers = []

    def start(*args, document=None, wait=True):
        s = Server(tools, netns, tmp_path, *args, document=document, wait=wait)
        servers.append(s)
        return s

    yield start
    errors = []
    for s in servers:  # every server is stopped, whatever happened to the others
        try:
            cp = s.stop()
            if cp.returncode != 0:
                errors.append(f"mmds-serve exited {cp.returncode}: {cp.stderr}")
        except Exception as e:
            errors.append(repr(e))
        finally:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
    assert not errors, "\n".join(errors)


class Curl:
    def __init__(self, netns):
        self.netns = netns

    def __call__(self, path="/", *args, method=None, token=None, json_accept=False, unix=None, data=None,
                 timeout=10):
        argv = ["curl", "-s", "-i", "--max-time", str(timeout)]
        if method:
            argv += ["-X", method]
        if token is not None:
            argv += ["-H", f"X-metadata-token: {token}"]
        if json_accept:
            argv += ["-H", "Accept: application/json"]
        if data is not None:
            argv += ["--data-binary", data]
        if unix:
            argv += ["--unix-socket", str(unix)]
            url = f"http://localhost{path}"
        else:
            url = f"http://{MMDS_IP}{path}"
        argv += [*args, url]
        cp = self.netns.run(*argv, timeout=timeout + 10, text=False)
        return Response(cp.stdout.decode("utf-8", "replace"), cp.returncode)

    def token(self, ttl=60, header="X-metadata-token-ttl-seconds"):
        r = self("/latest/api/token", "-H", f"{header}: {ttl}", method="PUT")
        assert r.status == 200, r
        return r.body


class Response:
    def __init__(self, raw: str, rc: int):
        self.rc = rc
        self.raw = raw
        head, _, self.body = raw.partition("\r\n\r\n")
        lines = head.split("\r\n")
        self.status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else None
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def __repr__(self):
        return f"<Response rc={self.rc} status={self.status} headers={self.headers} body={self.body!r}>"


@pytest.fixture
def curl(netns):
    return Curl(netns)
