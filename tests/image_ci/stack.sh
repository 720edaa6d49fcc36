# Sourced (test and bench only): start the e2b-ci stack from an image tree,
# as jupyter.service and code-interpreter.service would, without systemd.
# Run inside a private network+mount+pid namespace (unshare), as root.
#
#   start_e2b_ci_stack TREE LOGDIR
#
# Mounts /proc, /tmp, /run, /home (with user's home), /dev and /dev/shm into
# TREE, starts the tree's real envd on 127.0.0.1:49983 (the API server calls
# its /envs; E2B_CI_ENVD_LOG names a file for its log), starts
# Jupyter and the API server together as uid 1000, each with its unit's own
# ExecStart=, Environment= and WorkingDirectory= (unit_cmd.py), and waits for
# the API server to answer. Returns non-zero if the API server never answers
# /health.
# The steps are functions of their own, for tests that need one at a time.

E2B_CI_STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

e2b_ci_as_user() {
	chroot --userspec=1000:1000 "$E2B_CI_TREE" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin \
		PYTHONPATH=/usr/lib/e2b-code-interpreter/python "$@"
}

# e2b_ci_unit_as_user UNIT [VAR=VALUE…]: UNIT's ExecStart= from the tree as
# uid 1000, as systemd would, with extra environment if given.
e2b_ci_unit_as_user() {
	local unit=$1 cmd
	shift
	cmd=$(/usr/bin/python3 "$E2B_CI_STACK_DIR/unit_cmd.py" "$E2B_CI_TREE" "$unit") || return 1
	[ $# -eq 0 ] || cmd=${cmd/exec env -i /exec env -i $* }
	exec chroot --userspec=1000:1000 "$E2B_CI_TREE" /bin/sh -c "$cmd"
}

mount_e2b_ci_tree() {
	E2B_CI_TREE=$1
	ip link set lo up
	mount -t proc proc "$E2B_CI_TREE/proc"
	mount -t tmpfs tmpfs "$E2B_CI_TREE/tmp"
	mount -t tmpfs -o mode=0755 tmpfs "$E2B_CI_TREE/home"
	mkdir -m 0700 "$E2B_CI_TREE/home/user" && chown 1000:1000 "$E2B_CI_TREE/home/user"
	mount --bind /dev "$E2B_CI_TREE/dev"
	# A plain bind leaves out /dev/shm (a mount of its own): give the stack a
	# writable one, as systemd does in the guest (joblib, multiprocessing).
	mount -t tmpfs -o mode=1777 tmpfs "$E2B_CI_TREE/dev/shm"
	# Nor /dev/pts: the bash kernel (bash_kernel runs bash on a pty) needs
	# one; a private devpts instance, as a guest's own (tests/sdk/sdk_stack.sh).
	mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$E2B_CI_TREE/dev/pts"
	mount --bind "$E2B_CI_TREE/dev/pts/ptmx" "$E2B_CI_TREE/dev/ptmx"
	# The tree's own envd (the real one, built from source) on 0.0.0.0:49983
	# of this private network namespace, as root like envd.service; the API
	# server reads its GET /envs. -isnotfc: there is no MMDS here. Its /run
	# is a tmpfs, so nothing is written into the built tree.
	mount -t tmpfs -o mode=0755 tmpfs "$E2B_CI_TREE/run"
	chroot "$E2B_CI_TREE" /usr/bin/envd -isnotfc -no-cgroups > "${E2B_CI_ENVD_LOG:-/dev/null}" 2>&1 &
	wait_http_code http://127.0.0.1:49983/health 204 30 && return 0
	echo "stack.sh: the tree's envd did not answer /health on 127.0.0.1:49983" >&2
	return 1
}

# wait_http_code URL CODE SECONDS: until GET URL answers CODE (0), or 1.
wait_http_code() {
	local i
	for i in $(seq 1 $(( $3 * 10 ))); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# jupyter_count sessions|kernels: how many Jupyter holds.
jupyter_count() {
	curl -s "http://127.0.0.1:8888/api/$1" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'
}

# launch_jupyter LOGDIR: Jupyter in the background, not waited for.
launch_jupyter() {
	(e2b_ci_unit_as_user jupyter.service) > "$1/jupyter.log" 2>&1 &
}

# wait_jupyter [SECONDS]: until Jupyter's /api/status answers 200 (0), or 1.
wait_jupyter() {
	wait_http_code http://127.0.0.1:8888/api/status 200 "${1:-60}"
}

# start_jupyter LOGDIR: Jupyter, waited for (60 s), for steps that need it up.
start_jupyter() {
	launch_jupyter "$1"
	wait_jupyter 60
}

# start_api_server LOGDIR [VAR=VALUE…]: the API server in the background
# (extra environment for it, e.g. a time-out), its pid in E2B_CI_SERVER_PID.
start_api_server() {
	local logs=$1
	shift
	(e2b_ci_unit_as_user code-interpreter.service "$@") >> "$logs/server.log" 2>&1 &
	E2B_CI_SERVER_PID=$!
}

# wait_api_server [SECONDS]: until /health answers (0) or the server exits (1).
wait_api_server() {
	local i
	for i in $(seq 1 $(( ${1:-90} * 10 ))); do
		curl -sf -o /dev/null http://127.0.0.1:49999/health && return 0
		kill -0 "$E2B_CI_SERVER_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# start_e2b_ci_stack TREE LOGDIR: as the units start them, Jupyter and the
# API server together; the server waits for Jupyter itself (PATCHES 0006).
start_e2b_ci_stack() {
	local logs=$2
	mount_e2b_ci_tree "$1" || return 1
	launch_jupyter "$logs"
	start_api_server "$logs"
	wait_api_server 90
}

stop_e2b_ci_stack() {
	pkill -u 1000 || true
	kill %1 2>/dev/null || true
	sleep 1
	umount "$E2B_CI_TREE/dev/ptmx" "$E2B_CI_TREE/dev/pts" "$E2B_CI_TREE/dev/shm" "$E2B_CI_TREE/dev" "$E2B_CI_TREE/home" "$E2B_CI_TREE/tmp" "$E2B_CI_TREE/run" \
		"$E2B_CI_TREE/proc"
}
