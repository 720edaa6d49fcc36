#!/usr/bin/python3
"""Test only: a package index on loopback, for the install checks: a PEP 503
simple index (pip --index-url URL/simple) and an npm registry (npm
--registry URL/npm/), each serving any package named e2b-probe-<word>, made
on request and the same bytes every time:

  - a wheel, e2b_probe_<word>-1.0.0-py3-none-any.whl: module
    e2b_probe_<word> with NAME = "e2b-probe-<word>", and a console script
    e2b-probe-<word> that prints the name;
  - an npm package e2b-probe-<word>@1.0.0: index.js exports {name}, and a
    bin of the same name that prints it.

Every other name is a 404, as a registry answers for a package it lacks, so
an install that went elsewhere fails. Requests are kept (Handler.requests),
and printed by the command, so a test can tell that an install came from here.

    package_index.py [PORT]   serve until killed; the first line of output
                              is "INDEX http://127.0.0.1:PORT", then a line
                              per request (METHOD PATH STATUS)
    import package_index; url, stop = package_index.serve()
"""
import base64
import gzip
import hashlib
import http.server
import io
import json
import re
import sys
import tarfile
import threading
import zipfile

NAME = re.compile(r"e2b-probe-[a-z0-9]+")
VERSION = "1.0.0"
EPOCH = (2020, 1, 1, 0, 0, 0)


def _module(name: str) -> str:
    return name.replace("-", "_")


def wheel(name: str) -> tuple[str, bytes]:
    """(file name, bytes) of NAME's wheel."""
    mod, dist = _module(name), f"{_module(name)}-{VERSION}"
    files = {
        f"{mod}/__init__.py": f'NAME = "{name}"\n\n\ndef main():\n    print(NAME)\n'.encode(),
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {VERSION}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: e2b-images-tests\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}.dist-info/entry_points.txt": f"[console_scripts]\n{name} = {mod}:main\n".encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, EPOCH)
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return f"{dist}-py3-none-any.whl", buf.getvalue()


def npm_tarball(name: str) -> bytes:
    """NAME's npm package, as `npm pack` lays it out (package/…)."""
    files = {
        "package/package.json": json.dumps({"name": name, "version": VERSION, "main": "index.js",
                                            "bin": {name: "cli.js"}, "license": "MIT"}).encode(),
        "package/index.js": f'module.exports = {{ name: "{name}" }};\n'.encode(),
        "package/cli.js": f'#!/usr/bin/env node\nconsole.log("{name}");\n'.encode(),
    }
    buf = io.BytesIO()
    # gzip's header carries a time: a fixed one, so that every request gets
    # the bytes whose integrity the packument gave.
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as t:
            for path, data in files.items():
                info = tarfile.TarInfo(path)
                info.size, info.mtime = len(data), 1577836800
                info.mode = 0o755 if path.endswith("cli.js") else 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Handler(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def log_message(self, *args):
        pass

    def log_request(self, code="-", size="-"):
        if self.server.log_requests:
            print(f"{self.command} {self.path} {code}", flush=True)

    def _send(self, status: int, body: bytes, ctype: str = "text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        Handler.requests.append(self.path)
        base = f"http://{self.headers.get('Host')}"
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/simple/([a-z0-9-]+)/?", path)
        if m and NAME.fullmatch(m.group(1)):
            fname, data = wheel(m.group(1))
            link = f'<a href="/files/{fname}#sha256={hashlib.sha256(data).hexdigest()}">{fname}</a>'
            return self._send(200, f"<!DOCTYPE html><html><body>{link}</body></html>".encode(), "text/html")
        m = re.fullmatch(r"/files/(e2b_probe_[a-z0-9]+)-1\.0\.0-py3-none-any\.whl", path)
        if m:
            return self._send(200, wheel(m.group(1).replace("_", "-"))[1], "application/octet-stream")
        m = re.fullmatch(r"/npm/(e2b-probe-[a-z0-9]+)", path)
        if m:
            name, data = m.group(1), npm_tarball(m.group(1))
            dist = {"tarball": f"{base}/npm/{name}/-/{name}-{VERSION}.tgz",
                    "shasum": hashlib.sha1(data).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
            doc = {"name": name, "dist-tags": {"latest": VERSION},
                   "versions": {VERSION: {"name": name, "version": VERSION, "main": "index.js",
                                          "bin": {name: "cli.js"}, "dist": dist}}}
            return self._send(200, json.dumps(doc).encode(), "application/json")
        m = re.fullmatch(r"/npm/(e2b-probe-[a-z0-9]+)/-/\1-1\.0\.0\.tgz", path)
        if m:
            return self._send(200, npm_tarball(m.group(1)), "application/octet-stream")
        self._send(404, b"not here\n")

    def do_POST(self):  # npm's audit and the like: not served
        Handler.requests.append(self.path)
        self._send(404, b"not here\n")


def serve(port: int = 0, log_requests: bool = False):
    """Serve on 127.0.0.1:PORT (0: any) in a thread: (base URL, stop).
    LOG_REQUESTS: each request as a line on stdout (METHOD PATH STATUS)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.log_requests = log_requests
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop():
        server.shutdown()
        server.server_close()
    return f"http://127.0.0.1:{server.server_address[1]}", stop


if __name__ == "__main__":
    url, _ = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0, log_requests=True)
    print(f"INDEX {url}", flush=True)
    threading.Event().wait()
