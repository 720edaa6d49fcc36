#!/bin/bash
# Test helper (tests/image_ci/test_ci_server.py): inside a fresh
# network+mount+pid namespace, from an e2b-ci image tree, with the units' own
# ExecStart= (stack.sh):
#   1. Jupyter, with every kernel slowed by SLOW seconds at start (a sleep put
#      in front of the first IPython startup script, through a bind mount in
#      this namespace only): a small or busy guest, made deterministic;
#   2. the API server with E2B_CI_KERNEL_START_TIMEOUT=SHORT (< SLOW): its
#      start must fail; then the kernels and sessions left in Jupyter;
#   3. the API server with its default time-out: it must come up on its first
#      start; the kernels then;
#   4. that server killed (SIGKILL, no clean-up) and started again: kernels.
# Prints "KEY value" lines for the test. Everything dies with the namespace.
set -u
tree=$1 slow=$2 short=$3
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
. "$(dirname "$0")/stack.sh"
mount_e2b_ci_tree "$tree"

startup=$E2B_CI_TREE/usr/lib/e2b-code-interpreter/startup
first=$(ls "$startup"/*.py | head -n 1)
{ printf 'import time\ntime.sleep(%s)\n' "$slow"; cat "$first"; } > "$logs/slow-startup.py"
chmod 0644 "$logs/slow-startup.py"
mount --bind "$logs/slow-startup.py" "$first"

count() { # jupyter's kernels and sessions
	echo "kernels=$(jupyter_count kernels) sessions=$(jupyter_count sessions)"
}

start_jupyter "$logs" || { echo "JUPYTER down"; tail -20 "$logs/jupyter.log"; exit 1; }
echo "JUPYTER up $(count)"

t0=$(date +%s)
start_api_server "$logs" "E2B_CI_KERNEL_START_TIMEOUT=$short"
wait "$E2B_CI_SERVER_PID"
echo "FAILED-START rc=$? seconds=$(( $(date +%s) - t0 ))"
# Give a kernel that a failed start might have left the time to register.
sleep "$slow"
echo "AFTER-FAILED $(count)"

t0=$(date +%s)
start_api_server "$logs"
if wait_api_server $(( slow * 4 + 60 )); then
	echo "FIRST-START healthy seconds=$(( $(date +%s) - t0 )) $(count)"
else
	echo "FIRST-START failed"
fi
kill -9 "$E2B_CI_SERVER_PID"
wait "$E2B_CI_SERVER_PID" 2>/dev/null
echo "KILLED $(count)"

start_api_server "$logs"
if wait_api_server $(( slow * 4 + 60 )); then
	echo "RESTART healthy $(count)"
else
	echo "RESTART failed"
fi
echo "--- server log"
grep -v -e '^DEBUG' "$logs/server.log" | tail -n 40
