#!/usr/bin/env bash
# envd's idle CPU in an e2b-ci stack (issue 17): the real envd (built from
# source, from the image tree), Jupyter and the code interpreter's API server
# started from an e2b-ci image tree as their units would (tests/image_ci/
# stack.sh, chrooted, in a private network+mount+pid namespace; no VM), left
# idle. Over BENCH_IDLE_SECONDS (60) it reads the CPU time of envd and its
# children (utime+stime+cutime+cstime; the port forwarder scans every second
# and spawns socat per loopback listener) and of the named peer, Jupyter's
# server, the stack's other idle daemon. Goal: envd <= 1% of one CPU.
# Prints both, the ratio, and the load average.
#
#   bench/envd-idle.sh [TREE]   (default: out/test-image-ci/e2b-ci's tree, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
tree=${1:-$top/out/test-image-ci/e2b-ci/work/mkosi-out/image}
if [ ! -x "$tree/usr/bin/envd" ]; then
    echo "envd-idle: building e2b-ci into out/test-image-ci (tests/testimages.py)" >&2
    /usr/bin/python3 tests/testimages.py e2b-ci "$top/out/test-image-ci" image >/dev/null
fi
seconds=${BENCH_IDLE_SECONDS:-60}
exec unshare --net --mount --pid --fork --mount-proc bash -s "$tree" "$seconds" "$top" <<'SH'
set -u
tree=$1 seconds=$2 top=$3
logs=$(mktemp -d)
. "$top/tests/image_ci/stack.sh"
E2B_CI_ENVD_LOG=$logs/envd.log start_e2b_ci_stack "$tree" "$logs" ||
    { echo "envd-idle: the stack did not come up" >&2; tail -5 "$logs"/*.log >&2; exit 1; }
ticks() { # PID...: utime+stime+cutime+cstime of each, and of their live children
    local p sum=0 t
    for p in "$@" $(for q in "$@"; do pgrep -P "$q"; done); do
        t=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$p/stat" 2>/dev/null) || continue
        sum=$(( sum + t ))
    done
    echo "$sum"
}
envd=$(pgrep -x envd | head -n1)
jupyter=$(pgrep -f 'jupyter.server|jupyter-server' | head -n1)
sleep 10  # past start-up
load0=$(cut -d' ' -f1-3 /proc/loadavg)
e0=$(ticks "$envd") j0=$(ticks "$jupyter")
sleep "$seconds"
e1=$(ticks "$envd") j1=$(ticks "$jupyter")
load1=$(cut -d' ' -f1-3 /proc/loadavg)
hz=$(getconf CLK_TCK)
socats=$(pgrep -c -x socat || true)
/usr/bin/python3 - "$(( e1 - e0 ))" "$(( j1 - j0 ))" "$hz" "$seconds" "$socats" "$load0" "$load1" <<'PY'
import sys
e, j, hz, secs = (int(x) for x in sys.argv[1:5])
socats, load0, load1 = sys.argv[5:8]
pe, pj = 100 * e / hz / secs, 100 * j / hz / secs
print(f"envd-idle: {secs} s idle, e2b-ci stack in namespaces, load {load0} -> {load1}")
print(f"envd-idle: envd + children: {pe:.2f}% of one CPU ({e} ticks; goal <= 1%), socat processes: {socats}")
print(f"envd-idle: peer jupyter server + children: {pj:.2f}% ({j} ticks)")
print(f"envd-idle: ratio envd/jupyter {pe / pj:.2f}" if j else "envd-idle: ratio envd/jupyter: jupyter used no CPU")
PY
stop_e2b_ci_stack
rm -rf "$logs"
SH
