# Test only (tests/boot/test_clone_snapshot.py): the guest end of the clone
# test's control line, the second serial port (ttyS1). Blocked in a read of
# that port when the host takes the snapshot, so the first thing a restored
# clone does is take the host's next line and answer it; "sample" draws from
# the kernel's CRNG with bash's $SRANDOM (getrandom(2), no fork before it) and
# reads the clock with $EPOCHREALTIME, so nothing else uses the CRNG between
# the restore and the draw. Reports facts only ("E2B-CLONE-TEST key=value"
# lines); the expectations are in the test.
set -u
. /run/e2b-test/env
T=/run/e2b-test
MD=http://169.254.169.254

exec 3<>/dev/ttyS1
stty -F /dev/ttyS1 raw -echo
say() { printf 'E2B-CLONE-TEST %s\n' "$*" >&3; }
# The resident clone step's process (0 when it is not running).
clone_pid() { systemctl show -P MainPID e2b-clone.service; }

# socat binds the guest's address, which networkd puts on eth0 (from ip= on
# the kernel command line) on its own time: a lean boot starts this script
# before it does, and a bind that fails leaves nothing listening. Wait for it.
for i in $(seq 1 1200); do
	ip -4 -o addr show 2>/dev/null | grep -q " $E2B_TEST_IP/" && break
	sleep 0.1
done
# The host reaches two vsock ports through these (the test's bridge stands in
# for the VMM's vsock device; the guest side is the real vsock_loopback).
socat "TCP-LISTEN:$E2B_TEST_CLONE_PORT,bind=$E2B_TEST_IP,fork,reuseaddr" VSOCK-CONNECT:1:10053 &
socat "TCP-LISTEN:$E2B_TEST_ENVD_PORT,bind=$E2B_TEST_IP,fork,reuseaddr" VSOCK-CONNECT:1:49983 &
# Every kernel uevent from now on, for the vmgenid report.
udevadm monitor --kernel --property > "$T/uevents" 2>&1 &

for i in $(seq 1 1200); do
	curl -sf -o /dev/null http://127.0.0.1:49983/health && break
	sleep 0.1
done
old_token=$(curl -s -X PUT -H 'X-metadata-token-ttl-seconds: 21600' "$MD/latest/api/token")
md_get() { curl -s -o /dev/null -w '%{http_code}' -H "X-metadata-token: $1" "$MD/instanceID"; }
# The clone step's process, started at boot: before any connection to its port.
pid=$(clone_pid)
say "ready envd=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:49983/health) token_status=$(md_get "$old_token")" \
	"clone_pid=$pid clone_rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null)"

while IFS= read -r cmd <&3; do
	case "$cmd" in
	sample)
		printf -v r '%08x%08x%08x%08x' "$SRANDOM" "$SRANDOM" "$SRANDOM" "$SRANDOM"
		now=$EPOCHREALTIME
		say "random=$r realtime_us=${now/./}" ;;
	mint)
		# The template's token, minted after prepare-snapshot, right before
		# the snapshot: the clone step must make it useless.
		old_token=$(curl -s -X PUT -H 'X-metadata-token-ttl-seconds: 21600' "$MD/latest/api/token")
		say "token_status=$(md_get "$old_token")" ;;
	token)
		say "old_token_status=$(md_get "$old_token")" ;;
	state)
		fresh=$(curl -s -X PUT -H 'X-metadata-token-ttl-seconds: 60' "$MD/latest/api/token")
		id=$(curl -s -H "X-metadata-token: $fresh" "$MD/instanceID")
		gen=$(cat /run/e2b/clone-generation 2>/dev/null || echo none)
		say "instance_id=$id generation=$gen machine_id=$(cat /etc/machine-id) hostname=$(hostname)" \
			"clone_pid=$(clone_pid)" ;;
	allow-cid1)
		# The test image's drop-in: e2b-clone admits vsock_loopback (CID 1),
		# which the shipped unit refuses; the resident process reads it when
		# it starts again.
		mkdir -p /run/systemd/system/e2b-clone.service.d
		printf '[Service]\nEnvironment=E2B_CLONE_ALLOW_CID=1\n' \
			> /run/systemd/system/e2b-clone.service.d/50-test-cid1.conf
		systemctl daemon-reload
		systemctl restart e2b-clone.service
		say "allowed clone_pid=$(clone_pid)" ;;
	kill-clone)
		# The resident process killed: systemd starts it again (Restart=always).
		before=$(clone_pid)
		kill -KILL "$before"
		for i in $(seq 1 300); do
			now=$(clone_pid)
			[ "$now" != 0 ] && [ "$now" != "$before" ] &&
				[ "$(systemctl show -P ActiveState e2b-clone.service)" = active ] && break
			sleep 0.1
		done
		say "clone_pid_before=$before clone_pid=$(clone_pid)" \
			"restarts=$(systemctl show -P NRestarts e2b-clone.service)" ;;
	vmgenid)
		bound=$(ls /sys/bus/acpi/drivers/vmgenid 2>/dev/null | grep -c ':' || true)
		dev=$(grep -l -i -E 'VMGENCTR|VM_GEN|QEMUVGID' /sys/bus/acpi/devices/*/hid /sys/bus/acpi/devices/*/modalias 2>/dev/null | head -1)
		uev=$(grep -c NEW_VMGENID "$T/uevents" || true)
		say "vmgenid_device=${dev:+present} vmgenid_bound=$bound new_vmgenid_uevents=$uev kernel=$(uname -r)" ;;
	diag)
		# What the clone step's units look like now, for a report that failed.
		d=$( { systemctl status --no-pager -l e2b-clone.socket e2b-clone.service 2>&1
			journalctl -b --no-pager -o short-monotonic -u e2b-clone.socket -u e2b-clone.service 2>&1 | tail -40
			ss -l -n --vsock 2>&1; ls -la /run/e2b /dev/vsock 2>&1; } | base64 -w0)
		say "diag_b64=$d" ;;
	*)
		say "unknown=$cmd" ;;
	esac
done
