# Test only (tests/boot), sourced by probe.sh: the vsock relays and e2b-hostlink
# from inside the guest, through vsock_loopback (CID 1): the host machines have
# no host-to-guest vsock transport. Reports facts only (keys vsock_*); the
# expectations are in tests/boot/vsock_checks.py.
HL=$T/e2b-hostlink
VSOCK_FORWARDS=

vsock_forward() { # GUESTPORT LOCALPORT: e2b-hostlink forward in the background until the listener is up
	"$HL" --cid 1 --timeout 30 forward --listen "127.0.0.1:$2" "$1" > "$T/forward-$1.log" 2>&1 &
	VSOCK_FORWARDS="$VSOCK_FORWARDS $!"
	for i in $(seq 1 100); do
		ss -Hltn 2>/dev/null | grep -q "127.0.0.1:$2 " && return 0
		sleep 0.1
	done
	return 1
}

vsock_line() { # PORT LINE: one raw exchange with a relay (what the host would send)
	printf "$2" | timeout 20 socat -t 10 - "VSOCK-CONNECT:1:$1" 2>&1
}

vsock_unit_states() {
	for u in "$@"; do
		printf '%s=%s/%s ' "$u" "$(systemctl is-enabled "$u" 2>&1)" "$(systemctl is-active "$u" 2>&1)"
	done
}

vsock_rss() { # UNIT: VmRSS (kB) of its main process, if running
	local pid
	pid=$(systemctl show -P MainPID "$1" 2>/dev/null)
	[ -n "$pid" ] && [ "$pid" != 0 ] && awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null
}

report_b64 vsock_modules_b64 "$(grep -E '^(vsock|vsock_loopback|vmw_vsock_virtio_transport_common) ' /proc/modules | awk '{print $1}' | tr '\n' ' ')"
units="vsock-relay.socket vsock-proxy@49983.socket mmds-vsock.socket"
[ "$E2B_TEST_FLAVOR" = e2b-ci ] && units="$units vsock-proxy@49999.socket"
report_b64 vsock_units_b64 "$(vsock_unit_states $units)"

# 1. The host-side warmup: envd /health through the 49983 relay.
wait_out=$("$HL" --cid 1 --timeout 60 wait 2>&1)
report vsock_wait_rc "$?"
report_b64 vsock_wait_out_b64 "$wait_out"

# 2. forward over real AF_VSOCK to the fixed relay.
vsock_forward 49983 18983
report vsock_forward_envd_code "$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 http://127.0.0.1:18983/health)"

# 3. The dynamic relay: the test's unguarded listener (busybox httpd, 18080),
#    then refusals: 8888 (Jupyter) and a malformed line.
vsock_forward 18080 18081
report_b64 vsock_dynamic_body_b64 "$(curl -s --max-time 20 http://127.0.0.1:18081/index.html)"
report_b64 vsock_dynamic_raw_b64 "$(vsock_line 10000 'CONNECT 18080\nGET /index.html HTTP/1.0\r\n\r\n' | head -c 300)"
report_b64 vsock_refuse_8888_b64 "$(vsock_line 10000 'CONNECT 8888\n')"
report_b64 vsock_refuse_malformed_b64 "$(vsock_line 10000 'HELLO 8080\n')"
report_b64 vsock_forward_8888_b64 "$(vsock_forward 8888 18888; curl -s --max-time 10 http://127.0.0.1:18888/api/status; echo "curl=$?"; cat "$T/forward-8888.log")"

# 4. e2b-ci: the code interpreter through the 49999 relay.
if [ "$E2B_TEST_FLAVOR" = e2b-ci ]; then
	vsock_forward 49999 19999
	report_b64 vsock_ci_health_b64 "$(curl -s --max-time 30 http://127.0.0.1:19999/health)"
	report_b64 vsock_ci_contexts_b64 "$(curl -s --max-time 30 http://127.0.0.1:19999/contexts)"
	report_b64 vsock_ci_execute_b64 "$(curl -s --max-time 120 -X POST -H 'Content-Type: application/json' -d '{"code":"1+1"}' http://127.0.0.1:19999/execute | head -c 2000)"
	# A running kernel's ZMQ ports (127.0.0.1, ephemeral): the dynamic relay
	# must not reach them (iopub would show every run's output).
	kports=""
	for kpid in $(grep -l ipykernel /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
		kports="$kports $(ss -Hltnp 2>/dev/null | awk -v p="pid=$kpid," 'index($0, p) { n = split($4, a, ":"); print a[n] }')"
	done
	report vsock_kernel_ports "$(echo $kports | tr ' ' ',')"
	kanswers=""
	for kp in $kports; do kanswers="$kanswers$kp=$(vsock_line 10000 "CONNECT $kp\n" | head -c 200 | tr '\n' ' ')|"; done
	report_b64 vsock_kernel_answers_b64 "$kanswers"
fi

# 5. The clone's document over the vsock control (mmds-serve, port 10052):
#    refused from CID 1 by default; a test drop-in admits CID 1; the document
#    set that way drives envd's /init token check; it survives a restart.
mmds_token=vsock-boot-$(cat /proc/sys/kernel/random/uuid)
mmds_hash=$(printf %s "$mmds_token" | sha512sum | cut -d' ' -f1)
mmds_doc="{\"instanceID\":\"isb-vsock-set\",\"envID\":\"tmpl-vsock\",\"address\":\"\",\"accessTokenHash\":\"$mmds_hash\"}"
mmds_out=$("$HL" --cid 1 --timeout 10 mmds get 2>&1)
report vsock_mmds_default_rc "$?"
report_b64 vsock_mmds_default_out_b64 "$mmds_out"
report_b64 vsock_mmds_default_journal_b64 "$(journalctl -b -u mmds.service --no-pager -o cat 2>&1 | grep 'peer CID' | tail -2)"
mkdir -p /run/systemd/system/mmds.service.d
printf '[Service]\nEnvironment=MMDS_CONTROL_VSOCK_ALLOW_CID=1,2\n' > /run/systemd/system/mmds.service.d/50-e2b-test-allow-cid1.conf
systemctl daemon-reload && systemctl restart mmds.service
mmds_out=$(printf '%s' "$mmds_doc" | "$HL" --cid 1 --timeout 20 mmds put - 2>&1)
report vsock_mmds_put_rc "$?"
report_b64 vsock_mmds_put_out_b64 "$mmds_out"
report_b64 vsock_mmds_get_b64 "$("$HL" --cid 1 --timeout 20 mmds get 2>&1)"
mmds_init() { curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -H 'Content-Type: application/json' \
	-d "{\"accessToken\":\"$1\"}" http://127.0.0.1:49983/init; }
report vsock_init_wrong_code "$(mmds_init not-the-token)"
report vsock_init_right_code "$(mmds_init "$mmds_token")"
mmds_guest_get() {
	local t
	t=$(curl -s --max-time 5 -X PUT -H 'X-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token)
	curl -s --max-time 5 -H "X-metadata-token: $t" -H 'Accept: application/json' http://169.254.169.254/
}
systemctl restart mmds.service
report vsock_mmds_restarted "$(systemctl show -P NRestarts,ActiveState mmds.service | tr '\n' ' ')"
report_b64 vsock_mmds_after_restart_b64 "$(mmds_guest_get)"

# 6. Memory of every relay process while it runs (each has served since steps 1-3).
rss="vsock-relay.service=$(vsock_rss vsock-relay.service) vsock-proxy@49983.service=$(vsock_rss vsock-proxy@49983.service)"
[ "$E2B_TEST_FLAVOR" = e2b-ci ] && rss="$rss vsock-proxy@49999.service=$(vsock_rss vsock-proxy@49999.service)"
report_b64 vsock_rss_b64 "$rss"
report_b64 vsock_journal_b64 "$(journalctl -b -u vsock-relay.service -u 'vsock-proxy@*' --no-pager -n 20 -o cat 2>&1)"

for p in $VSOCK_FORWARDS; do kill "$p" 2>/dev/null; done
