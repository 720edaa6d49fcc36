# Test only (tests/boot), sourced by probe.sh after the vsock section when the
# boot is of a template (E2B_TEST_TEMPLATE_WARMUP: its pool warmup, base64).
# What to look at, from the variant (Variant.template_probe; the defaults are
# the web example's, examples/templates/web): E2B_TEST_TEMPLATE_GET (the path
# fetched from port 3000 through the relay), E2B_TEST_TEMPLATE_ENV (a variable
# name), E2B_TEST_TEMPLATE_FILE (a path). Reports facts only (keys
# template_*); the expectations are in tests/boot/test_template_boot.py (the
# E2B example) and template_web_boot.py.
printf '%s' "$E2B_TEST_TEMPLATE_WARMUP" | base64 -d > "$T/template-warmup.sh"
U=e2b-template.service

# 1. The pool's warmup, as the pool runs it in the clone: envd, then the
#    template's ready check (port 3000) within its timeout.
t0=$(uptime_ms)
warm_err=$(sh "$T/template-warmup.sh" 2>&1)
report template_warmup_rc "$?"
report template_warmup_ms "$(( $(uptime_ms) - t0 ))"
report_b64 template_warmup_err_b64 "$warm_err"

# 2. The start command's unit: enabled, running as user, ordered after envd.
report_b64 template_unit_b64 "$(unit_states $U) enabled=$(systemctl is-enabled $U 2>&1) $(systemctl show -p After $U)"
pid=$(systemctl show -P MainPID $U)
report template_uid "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)"

# 3. Its port from the host, through the dynamic relay (vsock 10000, CONNECT 3000).
vsock_forward 3000 13000
report_b64 template_relay_body_b64 "$(curl -s --max-time 20 "http://127.0.0.1:13000${E2B_TEST_TEMPLATE_GET:-/index.html}")"

# 4. The template's env in what envd runs (bash -l -c) and in the start
#    command's processes, and its file.
name=${E2B_TEST_TEMPLATE_ENV:-SITE_DIR}
report_b64 template_env_b64 "$(runuser -u user -- bash -l -c "echo \"$name=\${$name}\"" 2>&1)"
report_b64 template_start_env_b64 "$(for p in $(systemctl show -P ControlGroup $U | sed 's|^|/sys/fs/cgroup|;s|$|/cgroup.procs|' | xargs cat 2>/dev/null); do
	tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep "^$name="; done | sort -u)"
report_b64 template_file_b64 "$(stat -c '%U:%G %a' "${E2B_TEST_TEMPLATE_FILE:-/home/user/site/index.html}" 2>&1)"

# 5. A start command that exits at once (a drop-in replaces it with `false`):
#    systemd gives up after its restarts and the warmup fails, saying so.
systemctl stop $U
mkdir -p /run/systemd/system/$U.d
printf '[Service]\nExecStart=\nExecStart=/bin/false\n' > /run/systemd/system/$U.d/e2b-test-exits.conf
systemctl daemon-reload
systemctl reset-failed $U 2>/dev/null
systemctl start $U
warm_err=$(sh "$T/template-warmup.sh" 2>&1)
report template_exits_rc "$?"
report_b64 template_exits_err_b64 "$warm_err"

# 6. The start command back as built (the drop-in gone), for what runs after
#    the probe (the SDKs' getHost): the same warmup passes again.
rm -f /run/systemd/system/$U.d/e2b-test-exits.conf
systemctl daemon-reload
systemctl reset-failed $U 2>/dev/null
systemctl start $U
sh "$T/template-warmup.sh" > /dev/null 2>&1
report template_again_rc "$?"
