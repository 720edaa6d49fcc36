#!/usr/bin/env bash
# envd-guard install vs. the nft CLI + iproute2 loading the same ruleset:
#   nft -f guard/rules.nft && ip addr replace 169.254.169.254/32 dev lo scope host
# (the plain ruleset, no delete idiom), each run in a fresh network namespace
# with lo up. Two cases for envd-guard:
#   first install  a fresh namespace, as on every boot;
#   reinstall      over the identical table and alias (set up untimed by a
#                  first install): envd-guard commits nothing.
# Only the command is timed, from inside the namespace, so `ip netns exec` is
# not counted for either. The three alternate run by run, and every run is
# followed (untimed) by `envd-guard check`, so all really hold the same thing.
#   GUARD_BENCH_RUNS=50 (per side)   GUARD_BIN=build/envd-guard
# This machine is shared; `chrt -f 10 bash bench/guard.sh` keeps other load
# from dominating the figures (all sides run at the same priority).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${GUARD_BENCH_RUNS:-50}
guard=${GUARD_BIN:-build/envd-guard}
py=/usr/bin/python3

[ "$(id -u)" = 0 ] || { echo "bench/guard.sh: needs root (network namespaces)" >&2; exit 1; }
[ -x "$guard" ] || { echo "bench/guard.sh: $guard is missing: run make tools" >&2; exit 1; }
command -v nft >/dev/null || { echo "bench/guard.sh: nft is missing" >&2; exit 1; }

ns="e2bb-guard-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT

# argv: guard, the untimed setup command ("" for none), then the timed
# commands (each must succeed); prints their wall-clock time in microseconds,
# then checks the result.
timer='
import subprocess, sys, time
guard, setup = sys.argv[1], sys.argv[2]
cmds = [c.split("\x1f") for c in sys.argv[3:]]
if setup:
    subprocess.run(setup.split("\x1f"), check=True, stderr=subprocess.DEVNULL)
t0 = time.perf_counter_ns()
for c in cmds:
    subprocess.run(c, check=True, stderr=subprocess.DEVNULL)
t1 = time.perf_counter_ns()
if cmds[0][0] != "/bin/true":
    subprocess.run([guard, "check"], check=True, stderr=subprocess.DEVNULL)
print((t1 - t0) // 1000)
'
guard_cmd="$guard"$'\x1f'install
nft_cmd=nft$'\x1f'-f$'\x1f'guard/rules.nft
true_cmd=/bin/true
ip_cmd=ip$'\x1f'addr$'\x1f'replace$'\x1f'169.254.169.254/32$'\x1f'dev$'\x1f'lo$'\x1f'scope$'\x1f'host

one() { # one timed run in a fresh namespace; prints microseconds
	cleanup
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip netns exec "$ns" "$py" -c "$timer" "$guard" "$@"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# /bin/true is no competitor: it shows what starting any one process costs
# on this machine, which envd-guard pays once and the peer twice.
first_us=() again_us=() peer_us=() true_us=()
for ((i = 0; i < runs; i++)); do
	first_us+=("$(one "" "$guard_cmd")")
	again_us+=("$(one "$guard_cmd" "$guard_cmd")")
	peer_us+=("$(one "" "$nft_cmd" "$ip_cmd")")
	true_us+=("$(one "" "$true_cmd")")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$py" - "$runs" "$load_before" "$load_after" "${first_us[*]}" "${again_us[*]}" "${peer_us[*]}" "${true_us[*]}" <<'PY'
import statistics, sys
runs, load_before, load_after = sys.argv[1:4]
first, again, peer, true = ([int(x) for x in a.split()] for a in sys.argv[4:8])
ms = lambda v: f"{v / 1000:.2f} ms"
print(f"guard install: {runs} runs each, a fresh netns per run, the command timed from inside it")
print(f"  load average: {load_before} before, {load_after} after")
print(f"  {'':48} {'median':>10} {'mean':>10} {'min':>10}")
for name, v in (("envd-guard install (first install)", first),
                ("envd-guard install (reinstall, identical table)", again),
                ("peer: nft -f rules.nft && ip addr replace ... lo", peer),
                ("(baseline: /bin/true, one process start)", true)):
    print(f"  {name:<48} {ms(statistics.median(v)):>10} {ms(statistics.mean(v)):>10} {ms(min(v)):>10}")
for name, v, target in (("first install", first, 0.5), ("reinstall", again, 0.3)):
    ratio = statistics.median(v) / statistics.median(peer)
    print(f"  {name} / peer, medians: {ratio:.3f}  (target <= {target}: {'met' if ratio <= target else 'NOT met'});"
          f" minimums: {min(v) / min(peer):.3f}")
PY
