#!/bin/bash
# Test helper: inside a fresh network+mount+pid namespace (see test_image.py),
# start jupyter.service's and code-interpreter.service's commands from an
# e2b-ci image tree as uid 1000, with a stand-in envd /envs on 127.0.0.1:49983,
# then print what the test checks. Everything dies with the namespace.
set -u
tree=$1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
ip link set lo up
mount -t proc proc "$tree/proc"
mount -t tmpfs tmpfs "$tree/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$tree/home"
mkdir -m 0700 "$tree/home/user" && chown 1000:1000 "$tree/home/user"
mount --bind /dev "$tree/dev"
/usr/bin/python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 49983), H).serve_forever()' &
as_user() { chroot --userspec=1000:1000 "$tree" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin \
	PYTHONPATH=/usr/lib/e2b-code-interpreter/python "$@"; }
as_user sh -c 'cd /home/user && exec python3 -m jupyter_server --config=/etc/jupyter/jupyter_server_config.py' > "$logs/jupyter.log" 2>&1 &
for i in $(seq 1 600); do curl -sf -o /dev/null http://127.0.0.1:8888/api/status && break; sleep 0.1; done
as_user sh -c 'cd /usr/lib/e2b-code-interpreter/server && exec python3 -m uvicorn main:app --host 127.0.0.1 --port 49999 --workers 1 --no-access-log' > "$logs/server.log" 2>&1 &
for i in $(seq 1 900); do curl -sf -o /dev/null http://127.0.0.1:49999/health && break; sleep 0.1; done
echo "HEALTH $(curl -sS http://127.0.0.1:49999/health)"
echo "CONTEXTS $(curl -sS http://127.0.0.1:49999/contexts)"
echo LISTEN-BEGIN
ss -Hltn
echo LISTEN-END
echo "--- jupyter log"; tail -5 "$logs/jupyter.log"
echo "--- server log"; tail -5 "$logs/server.log"
