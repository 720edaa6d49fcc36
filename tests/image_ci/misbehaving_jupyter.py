"""Stand-in (test only, never shipped): a Jupyter that misbehaves, on
127.0.0.1:8888 of the test's network namespace, for the API server's own
wait (PATCHES 0006; jupyter_wait.sh). The real Jupyter cannot be made to do
either on cue:

  misbehaving_jupyter.py 503     answers every request 503 (up, not ready)
  misbehaving_jupyter.py silent  accepts connections and never answers
"""
import http.server
import socket
import sys
import time

ADDR = ("127.0.0.1", 8888)


class Unavailable(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "503":
        http.server.HTTPServer(ADDR, Unavailable).serve_forever()
    elif mode == "silent":
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(ADDR)
        sock.listen(64)
        held = []
        while True:
            conn, _ = sock.accept()
            held.append(conn)  # read nothing, answer nothing, close nothing
            time.sleep(0)
    else:
        print(f"misbehaving_jupyter.py: unknown mode {mode!r}: use 503 or silent", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
