#!/usr/bin/env bash
# E2B Template JSON build figures (issue 39), for examples/templates/e2b-sdk
# (its JSON written by E2B's Python SDK, as tests/template/test_e2b_build.py):
# - a warm rebuild after one copied file changed (the JSON written again,
#   its filesHash new), against a warm rebuild of e2b-base (the peer),
#   alternated, median of BENCH_RUNS (3). Target: e2b-sdk / e2b-base <= 1.3,
#   as for template.conf templates (bench/template.sh);
# - the first build of the example over a warm e2b-base, split by phase from
#   the build log's timestamps: runtime (mkosi up to the template's step),
#   steps (the template's steps), finalize (mkosi after them), pack. No pull:
#   the example builds on fromTemplate base (e2b-base).
# Prints the medians, every run, the ratio and the load.
#
# Builds with tests/testimages.py's recipes and pin mirror (as bench/image.sh)
# unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) are given.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
tmp=$(mktemp -d /var/tmp/e2b-bench-e2b-template.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. bench/lib/test-recipes.sh
sdk=$(/usr/bin/python3 -c 'import sys; sys.path[:0] = ["tests", "tests/sdk"]; import sdk_helpers; print(sdk_helpers.py_sdk())')
cp -r examples/templates/e2b-sdk "$tmp/e2b-sdk"
rm -f "$tmp/e2b-sdk/e2b.template.json"
write_json() { (cd "$tmp/e2b-sdk" && "$sdk" template.py > e2b.template.json.new && mv e2b.template.json.new e2b.template.json); }

. bench/lib/stamped-build.sh
# LOG's phases, from its stamps: mkosi up to the template's postinst
# (runtime), the postinst (steps), mkosi's finalize, and the packing after.
phases() {
    /usr/bin/python3 bench/lib/phases.py "$1" runtime "template\.postinst" steps "Running finalize script" \
        finalize "Normalizing modification times" pack
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
build "$tmp/fill.log" flavor=e2b-base > /dev/null
write_json
first=$(build "$tmp/first.log" template="$tmp/e2b-sdk")
split=$(phases "$tmp/first.log")
flav=() tmpl=()
for i in $(seq 1 "$runs"); do
    echo "<p>change $i</p>" >> "$tmp/e2b-sdk/app/static/index.html"
    write_json
    tmpl+=("$(build "$tmp/t.log" template="$tmp/e2b-sdk")")
    flav+=("$(build "$tmp/f.log" flavor=e2b-base)")
done
f=$(median "${flav[@]}")
t=$(median "${tmpl[@]}")
echo "e2b-template: $(nproc) cores, load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "e2b-template: first build of e2b-sdk over a warm e2b-base: ${first} s ($split; no pull: fromTemplate base)"
echo "e2b-template: warm rebuild of e2b-base (peer):                ${f} s  (runs: ${flav[*]})"
echo "e2b-template: warm rebuild of e2b-sdk after one file changed: ${t} s  (runs: ${tmpl[*]})"
echo "e2b-template: ratio e2b-sdk / e2b-base: $(/usr/bin/python3 -c "print(f'{$t / $f:.2f}')")  (target <= 1.3)"
