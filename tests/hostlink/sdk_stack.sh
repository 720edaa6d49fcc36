#!/bin/bash
# Test helper, run as `unshare --net --mount --pid --fork --mount-proc`:
#   sdk_stack.sh TREE WORK HOSTLINK SDKDIR
# "Guest" namespace (this one): the e2b-ci stack from the image tree with the
# tree's real envd (tests/image_ci/stack.sh), and the hybrid-vsock stand-in
# whose unix socket maps 49983 -> envd, 49999 -> the code interpreter.
# "Host" namespace (a nested unshare --net, so 127.0.0.1:49983/49999 are free
# and reach nothing of the guest's): e2b-hostlink forward 49983 49999 on
# localhost, and the SDK in debug mode. Prints "SDK {json}". Everything dies
# with the namespaces.
set -u
tree=$1 work=$2 hostlink=$3 sdkdir=$4
here=$(cd "$(dirname "$0")" && pwd)
logs=$work/logs
mkdir -p "$logs"
. "$here/../image_ci/stack.sh"
E2B_CI_ENVD_LOG=$logs/envd.log start_e2b_ci_stack "$tree" "$logs" ||
	{ echo "stack did not start"; tail -5 "$logs"/*.log; exit 1; }
/usr/bin/python3 "$here/fake_hybrid_vsock.py" --uds "$work/v.sock" \
	--map 49983=127.0.0.1:49983 --map 49999=127.0.0.1:49999 > "$logs/fake.log" 2>&1 &
for i in $(seq 1 100); do [ -S "$work/v.sock" ] && break; sleep 0.1; done
unshare --net /bin/bash -c '
	ip link set lo up
	"$1" --uds "$2/v.sock" forward 49983 49999 > "$2/logs/forward.log" 2>&1 &
	for i in $(seq 1 100); do ss -Hltn | grep -q "127.0.0.1:49999 " && break; sleep 0.1; done
	cd "$3" && E2B_DEBUG=true timeout 120 node sdk_probe.mjs
	kill %1
' sdk "$hostlink" "$work" "$sdkdir"
rc=$?
echo "--- forward log"; tail -5 "$work/logs/forward.log"
stop_e2b_ci_stack
exit $rc
