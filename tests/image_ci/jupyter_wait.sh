#!/bin/bash
# Test helper (tests/image_ci/test_ci_server.py): inside a fresh
# network+mount+pid namespace, from an e2b-ci image tree, with the units' own
# ExecStart= (stack.sh), the API server's own wait for Jupyter (PATCHES 0006):
#   1. the API server with E2B_CI_JUPYTER_START_TIMEOUT=SHORT and no Jupyter:
#      its start must fail after about SHORT s, and say why;
#   2. E2B_CI_JUPYTER_START_TIMEOUT set to no number of seconds: the start
#      must stop at once, naming the variable;
#   3. a Jupyter that answers 503, then one that never answers (a stand-in,
#      misbehaving_jupyter.py), each with the SHORT time-out: the start must
#      fail after it, naming the last answer (503; the 5 s per-try time-out);
#   4. the API server first and Jupyter DELAY s later, as a slow Jupyter
#      would be: the server must still be waiting then, and come up once
#      Jupyter answers, with its default context's one kernel.
# Prints "KEY value" lines for the test. Everything dies with the namespace.
set -u
tree=$1 short=$2 delay=$3
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
. "$(dirname "$0")/stack.sh"
mount_e2b_ci_tree "$tree"

# fail_start NAME [VAR=VALUE…]: one start of the server that must fail.
fail_start() {
	local name=$1 t
	shift
	: > "$logs/server.log"
	t=$(date +%s)
	start_api_server "$logs" "$@"
	wait "$E2B_CI_SERVER_PID"
	echo "$name rc=$? seconds=$(( $(date +%s) - t ))"
	echo "$name-SAYS $(grep -m 1 -o -e 'Jupyter did not answer.*' -e 'E2B_CI_[A-Z_]*=.* is not a time-out.*' "$logs/server.log")"
}

fail_start NO-JUPYTER "E2B_CI_JUPYTER_START_TIMEOUT=$short"
fail_start BAD-TIMEOUT "E2B_CI_JUPYTER_START_TIMEOUT=3m"
for mode in 503 silent; do
	/usr/bin/python3 "$(dirname "$0")/misbehaving_jupyter.py" "$mode" &
	standin=$!
	# Listening yet? (a connect, not a request: the silent one never answers)
	for _ in $(seq 1 100); do (exec 3<> /dev/tcp/127.0.0.1/8888) 2> /dev/null && break; sleep 0.1; done
	fail_start "JUPYTER-${mode^^}" "E2B_CI_JUPYTER_START_TIMEOUT=$short"
	kill "$standin"
	wait "$standin" 2>/dev/null
done

: > "$logs/server.log"
start_api_server "$logs"
sleep "$delay"
if kill -0 "$E2B_CI_SERVER_PID" 2>/dev/null; then echo "BEFORE-JUPYTER waiting"; else echo "BEFORE-JUPYTER exited"; fi
echo "BEFORE-JUPYTER-HEALTH code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:49999/health)"
launch_jupyter "$logs"
if wait_api_server 120; then
	echo "LATE-JUPYTER healthy kernels=$(jupyter_count kernels)"
else
	echo "LATE-JUPYTER failed"
fi
echo "--- server log"
grep -v -e '^DEBUG' "$logs/server.log" | tail -n 30
