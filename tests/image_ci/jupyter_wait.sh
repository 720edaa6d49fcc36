#!/bin/bash
# Test helper (tests/image_ci/test_ci_server.py): inside a fresh
# network+mount+pid namespace, from an e2b-ci image tree, with the units' own
# ExecStart= (stack.sh), the API server's own wait for Jupyter (PATCHES 0006):
#   1. the API server with E2B_CI_JUPYTER_START_TIMEOUT=SHORT and no Jupyter:
#      its start must fail after about SHORT s, and say why;
#   2. the API server first and Jupyter DELAY s later, as a slow Jupyter
#      would be: the server must still be waiting then, and come up once
#      Jupyter answers, with its default context's one kernel.
# Prints "KEY value" lines for the test. Everything dies with the namespace.
set -u
tree=$1 short=$2 delay=$3
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
. "$(dirname "$0")/stack.sh"
mount_e2b_ci_tree "$tree"

t0=$(date +%s)
start_api_server "$logs" "E2B_CI_JUPYTER_START_TIMEOUT=$short"
wait "$E2B_CI_SERVER_PID"
echo "NO-JUPYTER rc=$? seconds=$(( $(date +%s) - t0 ))"
echo "NO-JUPYTER-SAYS $(grep -m 1 -o 'Jupyter did not answer.*' "$logs/server.log")"

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
