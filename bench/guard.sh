#!/usr/bin/env bash
# envd-guard install vs. the nft CLI + iproute2 for the same ruleset:
#   nft -f guard/rules.nft && ip addr replace 169.254.169.254/32 dev lo scope host
# Each run gets a fresh network namespace (lo up); only the command is timed,
# from inside the namespace, so `ip netns exec` is not counted for either.
# The two alternate run by run, and every run is followed (untimed) by
# `envd-guard check`, so both really installed the same thing.
#   GUARD_BENCH_RUNS=50 (per side)
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

# Runs the commands (separated by "--and", each only if the previous one
# succeeded) and prints the wall time in microseconds; then checks the result.
timer='
import subprocess, sys, time
guard, cmds = sys.argv[1], [c.split("\x1f") for c in sys.argv[2:]]
t0 = time.perf_counter_ns()
for c in cmds:
    subprocess.run(c, check=True)
t1 = time.perf_counter_ns()
subprocess.run([guard, "check"], check=True, stderr=subprocess.DEVNULL)
print((t1 - t0) // 1000)
'
guard_cmd="$guard"$'\x1f'install
nft_cmd=nft$'\x1f'-f$'\x1f'guard/rules.nft
ip_cmd=ip$'\x1f'addr$'\x1f'replace$'\x1f'169.254.169.254/32$'\x1f'dev$'\x1f'lo$'\x1f'scope$'\x1f'host

one() { # one timed run in a fresh namespace; prints microseconds
	cleanup
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip netns exec "$ns" "$py" -c "$timer" "$guard" "$@"
}

guard_us=() nft_us=()
for ((i = 0; i < runs; i++)); do
	guard_us+=("$(one "$guard_cmd")")
	nft_us+=("$(one "$nft_cmd" "$ip_cmd")")
done

"$py" - "$runs" "${guard_us[*]}" "${nft_us[*]}" <<'PY'
import statistics, sys
runs = sys.argv[1]
g = [int(x) for x in sys.argv[2].split()]
n = [int(x) for x in sys.argv[3].split()]
def row(name, v):
    print(f"  {name:<44} median {statistics.median(v)/1000:7.2f} ms  mean {statistics.mean(v)/1000:7.2f} ms  "
          f"min {min(v)/1000:6.2f} ms")
print(f"guard install, {runs} runs each, fresh netns per run, command time only")
row("envd-guard install", g)
row("nft -f rules.nft && ip addr replace ... lo", n)
ratio = statistics.median(g) / statistics.median(n)
print(f"  ratio (median envd-guard / median nft+ip): {ratio:.3f}  (target <= 0.2: {'met' if ratio <= 0.2 else 'NOT met'})")
PY
