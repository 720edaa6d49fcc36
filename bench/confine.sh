#!/usr/bin/env bash
# The build sandbox's cost (sandbox/confine.py, issues 37 and 49): a warm rebuild
# of a template after one of its files changed (examples/templates/web on
# e2b-rt, as bench/template.sh) and a builder-mode build (`base=oci:…`, the
# Debian test base of tests/builder/bases.py, stopped after mkosi with
# pack=0), each in this tree (mkosi confined) and in a worktree of
# BENCH_PEER_REF (the peer: the commit before the change measured; for
# issue 49's, unprivileged ids, id-mapped mounts, the network namespace with
# slirp4netns and the copy of the sources, 3d3fff8), alternated, median of
# BENCH_RUNS (4; the order alternates). Target: this / peer <= 1.10 for both
# (issue 49). Prints both medians, every run, the ratios and the load.
#
#   BENCH_PEER_REF=<commit> bench/confine.sh
#
# Both trees share out/cache (the same warm package and incremental caches).
# Builds with tests/testimages.py's recipes and pin mirror (as bench/image.sh)
# unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) are given.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
ref=${BENCH_PEER_REF:?set BENCH_PEER_REF to a commit from before the build sandbox (the peer)}
runs=${BENCH_RUNS:-4}
tmp=$(mktemp -d /var/tmp/e2b-bench-confine.XXXXXX)
peer=$tmp/peer
cleanup() {
    git worktree remove --force "$peer" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

. bench/lib/test-recipes.sh
git worktree add --quiet --detach "$peer" "$ref"
make -C "$peer" --no-print-directory tools > "$tmp/peer-tools.log" 2>&1 ||
    { tail -20 "$tmp/peer-tools.log" >&2; exit 1; }
cp -r examples/templates/web "$tmp/web"
/usr/bin/python3 - "$tmp/base" <<'PY'
import pathlib, sys
sys.path.insert(0, "tests")
sys.path.insert(0, "tests/builder")
import bases
bases.debian_base(pathlib.Path(sys.argv[1]))
PY

now() { date +%s.%N; }
build() { # TREE NAME ARGS...: one make into $tmp/out-NAME, its seconds on stdout
    local tree=$1 name=$2 t0 t1
    shift 2
    t0=$(now)
    make -C "$tree" --no-print-directory image flavor=e2b-rt recipes="$recipes" $make_args \
        out="$tmp/out-$name" cache="$top/out/cache" "$@" > "$tmp/build.log" 2>&1 ||
        { tail -20 "$tmp/build.log" >&2; exit 1; }
    t1=$(now)
    /usr/bin/python3 -c "print(f'{$t1 - $t0:.1f}')"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratio() { /usr/bin/python3 -c "print(f'{$1 / $2:.3f}')"; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# Fill the caches (not timed): the flavor, then the template and the base once in each tree.
build "$top" flavor > /dev/null
for tree in "$top" "$peer"; do
    build "$tree" tpl template="$tmp/web" > /dev/null
    build "$tree" base base="oci:$tmp/base:v1" pack=0 > /dev/null
done
t_new=() t_old=() b_new=() b_old=()
# Which tree goes first alternates from run to run: the first build after
# a change reads the changed inputs cold, and the page cache is shared.
for i in $(seq 1 "$runs"); do
    echo "<p>change $i</p>" >> "$tmp/web/site/index.html"
    if [ $((i % 2)) = 1 ]; then
        t_new+=("$(build "$top" tpl template="$tmp/web")")
        t_old+=("$(build "$peer" tpl template="$tmp/web")")
        b_old+=("$(build "$peer" base base="oci:$tmp/base:v1" pack=0)")
        b_new+=("$(build "$top" base base="oci:$tmp/base:v1" pack=0)")
    else
        t_old+=("$(build "$peer" tpl template="$tmp/web")")
        t_new+=("$(build "$top" tpl template="$tmp/web")")
        b_new+=("$(build "$top" base base="oci:$tmp/base:v1" pack=0)")
        b_old+=("$(build "$peer" base base="oci:$tmp/base:v1" pack=0)")
    fi
done
tn=$(median "${t_new[@]}") to=$(median "${t_old[@]}")
bn=$(median "${b_new[@]}") bo=$(median "${b_old[@]}")
echo "confine: $(nproc) cores, load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg); peer $(git rev-parse --short "$ref")"
echo "confine: web template rebuild, peer:  ${to} s  (runs: ${t_old[*]})"
echo "confine: web template rebuild, this:  ${tn} s  (runs: ${t_new[*]})"
echo "confine: builder build, peer:         ${bo} s  (runs: ${b_old[*]})"
echo "confine: builder build, this:         ${bn} s  (runs: ${b_new[*]})"
echo "confine: ratio template $(ratio "$tn" "$to"), builder $(ratio "$bn" "$bo")  (target <= 1.10 each)"
