"""A real HTTP(S) server on loopback for the pinfetch tests, started and
stopped by the tests themselves. Routes are set per test; each one is a
response recipe (good body, early close, stall, redirect, status...)."""
import collections
import http.server
import ssl
import subprocess
import threading
import time


class Route:
    def __init__(self, kind, body=b"", status=200, location=None, announce=None, chunk_delay=0.0):
        self.kind, self.body, self.status = kind, body, status
        self.location, self.announce, self.chunk_delay = location, announce, chunk_delay


def body(data, chunk_delay=0.0):
    """200 with an honest Content-Length; chunk_delay slows it down."""
    return Route("body", data, chunk_delay=chunk_delay)


def close_delimited(data):
    """200 without Content-Length: the body ends when the server closes."""
    return Route("close", data)


def short(data, announce):
    """Announces `announce` bytes, sends `data`, closes early."""
    return Route("short", data, announce=announce)


def status(code):
    return Route("status", b"nope\n", status=code)


def redirect(location, code=302):
    return Route("redirect", status=code, location=location)


def stall(first=b"x" * 100, announce=1 << 20):
    """Headers and a few bytes, then nothing until the server stops."""
    return Route("stall", first, announce=announce)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server.owner
        path = self.path.split("?")[0]
        with srv.lock:
            srv.hits[path] += 1
        route = srv.routes.get(path)
        if route is None:
            route = status(404)
        try:
            self._serve(route, srv)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    def _serve(self, r, srv):
        if r.kind == "body":
            self.send_response(200)
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            if r.chunk_delay:
                for i in range(0, len(r.body), 65536):
                    self.wfile.write(r.body[i:i + 65536])
                    self.wfile.flush()
                    time.sleep(r.chunk_delay)
            else:
                self.wfile.write(r.body)
        elif r.kind == "close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(r.body)
            self.close_connection = True
        elif r.kind == "short":
            self.send_response(200)
            self.send_header("Content-Length", str(r.announce))
            self.end_headers()
            self.wfile.write(r.body)
            self.wfile.flush()
            self.close_connection = True
        elif r.kind == "status":
            self.send_response(r.status)
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            self.wfile.write(r.body)
        elif r.kind == "redirect":
            self.send_response(r.status)
            self.send_header("Location", r.location)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"moved on\n")
        elif r.kind == "stall":
            self.send_response(200)
            self.send_header("Content-Length", str(r.announce))
            self.end_headers()
            self.wfile.write(r.body)
            self.wfile.flush()
            srv.stopping.wait(120)
            self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients hanging up mid-body are part of the tests


class Server:
    """`with Server() as s:` serves s.routes on 127.0.0.1:<free port>."""

    def __init__(self, certfile=None, keyfile=None):
        self.routes = {}
        self.hits = collections.Counter()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.scheme = "http"
        if certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
            self.scheme = "https"
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._running = False

    def url(self, path, host="127.0.0.1"):
        return f"{self.scheme}://{host}:{self.port}{path}"

    def start(self):
        self._thread.start()
        self._running = True
        return self

    def stop(self):
        if self._running:
            self.stopping.set()
            self._httpd.shutdown()
            self._running = False
        self._httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def make_self_signed(directory):
    """A throwaway certificate for 127.0.0.1 that no trust store knows."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


