#!/usr/bin/env bash
# envd-guard install vs. the nft CLI + iproute2 for the same ruleset:
#   nft -f guard/rules.nft && ip addr replace 169.254.169.254/32 dev lo scope host
# Each run gets a fresh network namespace (lo up); only the command is timed,
# from inside the namespace, so `ip netns exec` is not counted for either.
# The two alternate run by run, and every run is followed (untimed) by
# `envd-guard check`, so both really installed the same thing.
#   GUARD_BENCH_RUNS=50 (per side)
# This machine is shared; `chrt -f 10 bash bench/guard.sh` keeps other load
# from dominating the figures (both sides run at the same priority).
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

# Runs the commands in turn (each must succeed) and prints their wall-clock
# time in microseconds; then checks the result.
timer='
import subprocess, sys, time
guard, cmds = sys.argv[1], [c.split("\x1f") for c in sys.argv[2:]]
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

# /bin/true is no competitor: it shows what starting any one process costs
# on this machine, which envd-guard pays once and the peer twice.
guard_us=() nft_us=() true_us=()
for ((i = 0; i < runs; i++)); do
	guard_us+=("$(one "$guard_cmd")")
	nft_us+=("$(one "$nft_cmd" "$ip_cmd")")
	true_us+=("$(one "$true_cmd")")
done

"$py" - "$runs" "${guard_us[*]}" "${nft_us[*]}" "${true_us[*]}" <<'PY'
import statistics, sys
runs = sys.argv[1]
g = [int(x) for x in sys.argv[2].split()]
n = [int(x) for x in sys.argv[3].split()]
t = [int(x) for x in sys.argv[4].split()]
ms = lambda v: f"{v / 1000:.2f} ms"
print(f"guard install: {runs} runs each, a fresh netns per run, the command timed from inside it")
print(f"  {'':44} {'median':>10} {'mean':>10} {'min':>10}")
for name, v in (("envd-guard install", g), ("nft -f rules.nft && ip addr replace ... lo", n),
                ("(baseline: /bin/true, one process start)", t)):
    print(f"  {name:<44} {ms(statistics.median(v)):>10} {ms(statistics.mean(v)):>10} {ms(min(v)):>10}")
ratio = statistics.median(g) / statistics.median(n)
print(f"  ratio envd-guard / (nft + ip), medians: {ratio:.3f}  (target <= 0.2: {'met' if ratio <= 0.2 else 'NOT met'})")
print(f"  ratio envd-guard / (nft + ip), minimums: {min(g) / min(n):.3f}  (least disturbed by other load)")
PY
