#!/usr/bin/env bash
# The shared cache through a registry (issue 52, regcache/README.md), for
# examples/templates/e2b-sdk on e2b-base (its JSON written by E2B's Python
# SDK), each figure the median of BENCH_RUNS (3), alternated:
# - fresh host, warm registry: a cache= with nothing but mkosi's (its
#   package cache and cached e2b-base installation, which come from Debian's
#   archive and are not the shared cache's), and cache_registry= a registry
#   on loopback (TLS, htpasswd: bench/lib/registry.py) that one earlier
#   build filled: every step and envd come from the registry;
# - the peer, warm local step cache on one host: the same build again on
#   the host that made it, cache_registry unset. Target: fresh / local <= 1.3;
# - no cache at all: a cache= like the fresh host's, no registry, step_cache=0:
#   every step runs and envd is compiled (its Go modules fetched again).
#   The ratio against it is printed, with no target.
# Prints the medians, every run, both ratios and the load.
#
# Builds with tests/testimages.py's recipes and pin mirror (as bench/image.sh)
# unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) are given.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
tmp=$(mktemp -d /var/tmp/e2b-bench-cache-registry.XXXXXX)
# The caches: where the build sandbox's own user reaches them (not $tmp, root's alone).
caches=out/bench-cache-registry
reg=
cleanup() { [ -z "$reg" ] || kill "$reg" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp" "$caches"; }
trap cleanup EXIT

. bench/lib/test-recipes.sh
sdk=$(/usr/bin/python3 -c 'import sys; sys.path[:0] = ["tests", "tests/sdk"]; import sdk_helpers; print(sdk_helpers.py_sdk())')
cp -r examples/templates/e2b-sdk "$tmp/e2b-sdk"
(cd "$tmp/e2b-sdk" && rm -f e2b.template.json && "$sdk" template.py > e2b.template.json)

mkdir "$tmp/registry"
/usr/bin/python3 bench/lib/registry.py "$tmp/registry" --empty > "$tmp/registry.env" &
reg=$!
for _ in $(seq 1 600); do [ -s "$tmp/registry.env" ] && break; sleep 0.5; done
[ -s "$tmp/registry.env" ] || { echo "cache-registry: the registry did not start" >&2; exit 1; }
eval "$(cat "$tmp/registry.env")"
export REGISTRY_AUTH_FILE=$auth
shared=(cache_registry="$addr/bench/e2b-cache" cert_dir="$certs" tenant=bench)

. bench/lib/stamped-build.sh
# A cache= of a host that has built nothing but e2b-base's installation.
new_cache() { # NAME: prints its path
    rm -rf "${caches:?}/$1"
    mkdir -p "$caches/$1"
    ln -s "$PWD/out/cache/mkosi" "$caches/$1/mkosi"
    cp -al out/cache/mkosi-incremental "$caches/$1/mkosi-incremental"
    echo "$caches/$1"
}
from_log() { grep -m1 '^[0-9.]* cache: ' "$1" | cut -d' ' -f2- || true; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$caches"
build "$tmp/fill.log" flavor=e2b-base > /dev/null
# The host that fills the registry: its build runs every step and pushes.
host=$(new_cache host)
fill=$(build "$tmp/push.log" flavor=e2b-base template="$tmp/e2b-sdk" cache="$host" "${shared[@]}")
local_=() fresh=() none=()
for i in $(seq 1 "$runs"); do
    fresh+=("$(build "$tmp/fresh.log" flavor=e2b-base template="$tmp/e2b-sdk" cache="$(new_cache fresh)" "${shared[@]}")")
    grep -q ' cache: steps 0 local, [1-9][0-9]* from the registry, 0 run' "$tmp/fresh.log" ||
        { echo "cache-registry: the fresh host ran a step: $(from_log "$tmp/fresh.log")" >&2; exit 1; }
    local_+=("$(build "$tmp/local.log" flavor=e2b-base template="$tmp/e2b-sdk" cache="$host" tenant=bench)")
    grep -q ' cache: steps [1-9][0-9]* local, 0 from the registry, 0 run' "$tmp/local.log" ||
        { echo "cache-registry: the warm host ran a step: $(from_log "$tmp/local.log")" >&2; exit 1; }
    none+=("$(build "$tmp/none.log" flavor=e2b-base template="$tmp/e2b-sdk" cache="$(new_cache fresh)" step_cache=0)")
done
f=$(median "${fresh[@]}") l=$(median "${local_[@]}") n=$(median "${none[@]}")
ratio() { /usr/bin/python3 -c "print(f'{$1 / $2:.2f}')"; }
echo "cache-registry: $(nproc) cores, load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cache-registry: the build that filled the registry: ${fill} s ($(from_log "$tmp/push.log"))"
echo "cache-registry: fresh host, warm registry:        ${f} s  (runs: ${fresh[*]}; $(from_log "$tmp/fresh.log"))"
echo "cache-registry: warm local step cache (peer):     ${l} s  (runs: ${local_[*]}; $(from_log "$tmp/local.log"))"
echo "cache-registry: no cache at all:                  ${n} s  (runs: ${none[*]}; $(from_log "$tmp/none.log"))"
echo "cache-registry: ratio fresh host / warm local: $(ratio "$f" "$l")  (target <= 1.3)"
echo "cache-registry: ratio fresh host / no cache:   $(ratio "$f" "$n")"
