#!/usr/bin/env bash
# Template build figure: a warm rebuild of a template after one of its files
# changed (examples/templates/web, a copy whose index.html gets a new line),
# against a warm rebuild of its base flavor (e2b-rt), alternated, median of
# BENCH_RUNS (3). Target: template / flavor <= 1.3 (a template must not pay
# for a full image build). Prints both medians, the ratio and the load.
#
# Builds with tests/testimages.py's recipes and pin mirror (as bench/image.sh)
# unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) are given.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. bench/lib/test-recipes.sh
cp -r examples/templates/web "$tmp/web"

now() { date +%s.%N; }
build() { # ARGS...: one make image into out/bench-template, its seconds on stdout
    local t0 t1
    t0=$(now)
    make --no-print-directory image recipes="$recipes" $make_args out=out/bench-template cache=out/cache "$@" \
        > "$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log" >&2; exit 1; }
    t1=$(now)
    /usr/bin/python3 -c "print(f'{$t1 - $t0:.1f}')"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# Fill the caches (not timed).
build flavor=e2b-rt > /dev/null
build template="$tmp/web" > /dev/null
flav=() tmpl=()
for i in $(seq 1 "$runs"); do
    echo "<p>change $i</p>" >> "$tmp/web/site/index.html"
    tmpl+=("$(build template="$tmp/web")")
    flav+=("$(build flavor=e2b-rt)")
done
f=$(median "${flav[@]}")
t=$(median "${tmpl[@]}")
echo "template: $(nproc) cores, load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "template: warm rebuild of e2b-rt (peer):                ${f} s  (runs: ${flav[*]})"
echo "template: warm rebuild of web after one file changed:   ${t} s  (runs: ${tmpl[*]})"
echo "template: ratio template / flavor: $(/usr/bin/python3 -c "print(f'{$t / $f:.2f}')")  (target <= 1.3)"
