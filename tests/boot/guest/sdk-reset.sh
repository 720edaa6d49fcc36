#!/bin/bash
# Test only (tests/boot): return the guest to a fresh clone's state for the
# next SDK probe: no git work trees in the homes (the git probes make ~/git
# as user and as root; in the namespace layer each probe has homes of its
# own), and envd without an access token. A document whose accessTokenHash is sha512("")
# authorizes envd to drop its token (/init without one); then the boot's own
# document (the host's SDK token's hash) comes back from fw_cfg. Prints
# "init=CODE envs=CODE" (204 and 200 when it worked). The probe runs it once
# and serves it on a test port for the host, between its SDK probes.
set -u
rm -rf /home/user/git /root/git
tmp=$(mktemp /run/mmds/.document.json.XXXXXX) || exit 1
printf '{"instanceID":"isb-sdk-reset","envID":"tmpl-sdk-reset","accessTokenHash":"%s"}' \
	"$(printf '' | sha512sum | cut -d' ' -f1)" > "$tmp" && chmod 0644 "$tmp" && mv "$tmp" /run/mmds/document.json
sleep 1  # mmds-serve's watch
init=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -H 'Content-Type: application/json' \
	-d '{}' http://127.0.0.1:49983/init)
systemctl restart mmds-fwcfg.service
sleep 1
echo "init=$init envs=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 http://127.0.0.1:49983/envs)"
