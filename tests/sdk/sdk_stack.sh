#!/bin/bash
# Test helper, run as `unshare --net --mount --pid --fork --mount-proc`:
#
#   sdk_stack.sh FLAVOR TREE WORK TOOLS ENVD_FLAGS -- PROBE [ARG…]
#
# FLAVOR is rt or ci, TREE an image tree holding the real envd at
# /usr/bin/envd, WORK a scratch directory, TOOLS the directory of our
# C tools (build/), ENVD_FLAGS extra envd flags ("-no-cgroups" or "").
#
# "Guest" (this namespace), as the image's units would run it:
#   - lo up, then the real guard (`envd-guard install`: drop rules and the
#     169.254.169.254 alias on lo), as envd-guard.service;
#   - the real mmds-serve on 169.254.169.254:80 with WORK/mmds/document.json
#     (instanceID, envID, accessTokenHash), as mmds.service;
#   - the real envd from TREE, chrooted, as root, in Firecracker mode (no
#     -isnotfc: it polls MMDS and checks /init tokens against the hash), as
#     envd.service's ExecStart=/usr/bin/envd;
#   - ci only: Jupyter and the code-interpreter API server from TREE as
#     uid 1000 (tests/image_ci/stack.sh's functions), talking to the real envd;
#   - the real dynamic relay (vsock-relay, socket-activated on a unix socket
#     instead of vsock::10000: its code does not care which);
#   - tests/hostlink/fake_hybrid_vsock.py, the STAND-IN for the VMM's
#     hybrid-vsock socket (no host-to-guest vsock transport exists on our
#     machines): vsock 49983 -> envd, 49999 -> the code interpreter,
#     10000 -> the dynamic relay.
# "Host" (a nested unshare --net: its loopback reaches nothing of the
# guest's but the unix socket, as on a pool host): the real
# `e2b-hostlink --uds WORK/v.sock forward 49983 [49999] 3000` on localhost,
# then PROBE with E2B_DEBUG=true. PROBE's stdout is passed through.
#
# Mounts live in this private mount namespace, processes in this pid
# namespace: both die with it, whatever happens to the test.
set -u
flavor=$1 tree=$2 work=$3 tools=$4 envd_flags=$5
shift 5
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
logs=$work/logs
mkdir -p "$logs" "$work/mmds"

fail() { echo "STACK-ERROR $*"; for f in "$logs"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }

# wait_for SECONDS COMMAND…: until COMMAND succeeds (0) or time runs out (1).
wait_for() {
	local n=$(( $1 * 10 ))
	shift
	for _ in $(seq 1 "$n"); do "$@" > /dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}

ip link set lo up
"$tools/envd-guard" install > "$logs/guard.log" 2>&1 || fail "envd-guard install failed"

# The document the pool puts with `e2b-hostlink mmds put` (E2B_SDK_* come
# from the test, which knows the token).
printf '{"instanceID":"%s","envID":"%s","accessTokenHash":"%s"}\n' \
	"$E2B_SDK_INSTANCE_ID" "$E2B_SDK_ENV_ID" "$E2B_SDK_TOKEN_HASH" > "$work/mmds/document.json"
"$tools/mmds-serve" --document "$work/mmds/document.json" > "$logs/mmds.log" 2>&1 &
wait_for 10 curl -sf -X PUT -H 'X-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token \
	|| fail "mmds-serve did not answer on 169.254.169.254:80"

# Nothing is written into TREE itself (the session's build, which other
# tests read): the guest's root is an overlay of it, its changes in WORK
# (a `sudo pip install` lands there), gone with this namespace.
mkdir -p "$work/root" "$work/upper" "$work/overlay-work"
mount -t overlay overlay -o "lowerdir=$tree,upperdir=$work/upper,workdir=$work/overlay-work" "$work/root" ||
	fail "overlay of $tree"
tree=$work/root
# The tree gets what systemd gives the guest: /proc, /dev (+ /dev/shm), a
# fresh /run and /tmp; /home, /root and /mnt are the image's own.
mount -t proc proc "$tree/proc" || fail "mount proc"
mount --bind /dev "$tree/dev" || fail "bind /dev"
mount -t tmpfs -o mode=1777 tmpfs "$tree/dev/shm"
# A plain bind leaves out /dev/pts (a mount of its own), and PTYs need it: a
# private devpts instance, as a guest's own.
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$tree/dev/pts" || fail "mount devpts"
mount --bind "$tree/dev/pts/ptmx" "$tree/dev/ptmx" || fail "bind ptmx"
mount -t tmpfs -o mode=0755 tmpfs "$tree/run"
mount -t tmpfs -o mode=1777 tmpfs "$tree/tmp"

# E2B_SDK_INDEX=1: a package index for the install checks (package_index.py),
# on this namespace's loopback, where the guest's commands reach it (the
# probe's own namespace is not reachable from here, as a pool host's
# loopback is not from a guest). Its URL reaches the probe as
# E2B_SDK_INDEX_URL; its log of requests is WORK/logs/index.log.
if [ "${E2B_SDK_INDEX:-}" = 1 ]; then
	/usr/bin/python3 "$here/package_index.py" > "$logs/index.log" 2>&1 &
	wait_for 10 grep -q '^INDEX ' "$logs/index.log" || fail "the package index did not start"
	export E2B_SDK_INDEX_URL=$(sed -n 's/^INDEX //p' "$logs/index.log")
fi

# envd as envd.service runs it: root, ExecStart=/usr/bin/envd, the
# environment systemd gives a system service (PATH, nothing else).
# shellcheck disable=SC2086  # ENVD_FLAGS is a word list on purpose
chroot "$tree" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/usr/bin/envd $envd_flags > "$logs/envd.log" 2>&1 &
wait_for 20 curl -sf http://127.0.0.1:49983/health || fail "envd did not answer /health"
# Firecracker mode: envd has read MMDS once it wrote the sandbox id.
wait_for 10 test -s "$tree/run/e2b/.E2B_SANDBOX_ID" || fail "envd never read MMDS (/run/e2b/.E2B_SANDBOX_ID)"

maps=(--map 49983=127.0.0.1:49983 --map "10000=unix:$work/relay.sock")
ports=(49983 3000)
if [ "$flavor" = ci ]; then
	# stack.sh's Jupyter and API-server steps, without its mount step (which
	# would also start a stand-in envd on 49983, where the real one is).
	. "$here/../image_ci/stack.sh"
	E2B_CI_TREE=$tree
	# Together, as the units start them (the server waits for Jupyter).
	launch_jupyter "$logs"
	start_api_server "$logs"
	wait_api_server 120 || fail "the code-interpreter API server did not answer /health (Jupyter: $(wait_jupyter 1 && echo up || echo down))"
	maps+=(--map 49999=127.0.0.1:49999)
	ports=(49983 49999 3000)
fi

# The dynamic relay as vsock-relay.service runs it (its flags), on a unix
# socket passed like systemd passes vsock::10000.
systemd-socket-activate -l "$work/relay.sock" \
	"$tools/vsock-relay" --max-connections 256 --handshake-timeout 10000 > "$logs/relay.log" 2>&1 &
/usr/bin/python3 "$here/../hostlink/fake_hybrid_vsock.py" --uds "$work/v.sock" "${maps[@]}" > "$logs/fake-vmm.log" 2>&1 &
wait_for 10 test -S "$work/v.sock" || fail "fake hybrid-vsock socket missing"
wait_for 10 test -S "$work/relay.sock" || fail "relay socket missing"
echo "STACK-SANDBOX-ID $(cat "$tree/run/e2b/.E2B_SANDBOX_ID")"
echo "STACK-TEMPLATE-ID $(cat "$tree/run/e2b/.E2B_TEMPLATE_ID")"
echo "STACK-READY"

unshare --net /bin/bash -c '
	hostlink=$1 work=$2 ports=$3
	shift 3
	ip link set lo up
	"$hostlink" --uds "$work/v.sock" forward $ports > "$work/logs/forward.log" 2>&1 &
	for _ in $(seq 1 100); do
		n=0
		for p in $ports; do ss -Hltn "sport = :$p" | grep -q . && n=$((n + 1)); done
		[ "$n" -eq $(echo $ports | wc -w) ] && break
		sleep 0.1
	done
	E2B_DEBUG=true "$@"
' host "$tools/e2b-hostlink" "$work" "${ports[*]}" "$@"
rc=$?
echo "PROBE-EXIT $rc"
for f in "$logs"/*.log; do echo "--- $f"; tail -n 15 "$f"; done
exit $rc
