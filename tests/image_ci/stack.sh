# Sourced (test and bench only): start the e2b-ci stack from an image tree,
# as jupyter.service and code-interpreter.service would, without systemd.
# Run inside a private network+mount+pid namespace (unshare), as root.
#
#   start_e2b_ci_stack TREE LOGDIR
#
# Mounts /proc, /tmp, /home (with user's home), /dev and /dev/shm into TREE, serves a
# stand-in envd /envs on 127.0.0.1:49983 (the API server calls it), starts
# Jupyter and then the API server as uid 1000, and waits for each to answer.
# Returns non-zero if the API server never answers /health.

e2b_ci_as_user() {
	chroot --userspec=1000:1000 "$E2B_CI_TREE" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin \
		PYTHONPATH=/usr/lib/e2b-code-interpreter/python "$@"
}

start_e2b_ci_stack() {
	E2B_CI_TREE=$1
	local logs=$2 i
	ip link set lo up
	mount -t proc proc "$E2B_CI_TREE/proc"
	mount -t tmpfs tmpfs "$E2B_CI_TREE/tmp"
	mount -t tmpfs -o mode=0755 tmpfs "$E2B_CI_TREE/home"
	mkdir -m 0700 "$E2B_CI_TREE/home/user" && chown 1000:1000 "$E2B_CI_TREE/home/user"
	mount --bind /dev "$E2B_CI_TREE/dev"
	# A plain bind leaves out /dev/shm (a mount of its own): give the stack a
	# writable one, as systemd does in the guest (joblib, multiprocessing).
	mount -t tmpfs -o mode=1777 tmpfs "$E2B_CI_TREE/dev/shm"
	/usr/bin/python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 49983), H).serve_forever()' &
	e2b_ci_as_user sh -c 'cd /home/user && exec python3 -m jupyter_server --config=/etc/jupyter/jupyter_server_config.py' \
		> "$logs/jupyter.log" 2>&1 &
	for i in $(seq 1 600); do curl -sf -o /dev/null http://127.0.0.1:8888/api/status && break; sleep 0.1; done
	e2b_ci_as_user sh -c 'cd /usr/lib/e2b-code-interpreter/server && exec python3 -m uvicorn main:app --host 127.0.0.1 --port 49999 --workers 1 --no-access-log' \
		> "$logs/server.log" 2>&1 &
	for i in $(seq 1 900); do curl -sf -o /dev/null http://127.0.0.1:49999/health && return 0; sleep 0.1; done
	return 1
}

stop_e2b_ci_stack() {
	pkill -u 1000 || true
	kill %1 2>/dev/null || true
	sleep 1
	umount "$E2B_CI_TREE/dev/shm" "$E2B_CI_TREE/dev" "$E2B_CI_TREE/home" "$E2B_CI_TREE/tmp" "$E2B_CI_TREE/proc"
}
