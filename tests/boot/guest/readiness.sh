#!/bin/bash
# Test only (tests/boot): when did each service first answer, in ms since the
# kernel started? Started before envd (DefaultDependencies=no) and polling
# every 100 ms with bash's /dev/tcp (no process per poll), so the figures are
# not inflated by the probe's own start or by curl's start-up under emulation.
# Writes /run/e2b-test/ready.<name> = ms; the probe reports them.
set -u
T=/run/e2b-test
uptime_ms() { local u; read -r u _ < /proc/uptime; echo $(( ${u%.*} * 1000 + 10#${u#*.} * 10 )); }
# sleep without a process (a fork and exec of sleep(1) every 50 ms cost
# seconds of the boot's CPU under TCG): read with a timeout on an idle pipe.
exec {nap_fd}<> <(:)
answers() { # PORT PATH STATUS
	{ exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&3
	local line=
	read -r -t 5 line <&3
	exec 3>&- 3<&-
	[[ $line == "HTTP/1."?" $3"* ]]
}
declare -A target=([envd]="49983 /health 204")
if [ "${E2B_TEST_FLAVOR:-}" = e2b-ci ]; then
	target[jupyter]="8888 /api/status 200"
	target[ci]="49999 /health 200"
fi
echo "$(uptime_ms)" > "$T/ready.poller-start"
while [ ${#target[@]} -gt 0 ]; do
	for name in "${!target[@]}"; do
		# shellcheck disable=SC2086
		if answers ${target[$name]}; then
			echo "$(uptime_ms)" > "$T/ready.$name"
			unset "target[$name]"
		fi
	done
	read -r -t 0.1 -u "$nap_fd" _ || :
done
