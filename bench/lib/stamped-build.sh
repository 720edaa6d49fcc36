# Sourced by bench scripts that time template builds ($tmp, $recipes and
# $make_args set: bench/lib/test-recipes.sh): build LOG ARGS... runs one
# `make image` into $tmp/out with the shared cache, each output line stamped
# into LOG (for a split by phase), and prints its seconds; median N...
now() { date +%s.%N; }
build() { # LOG ARGS...: one make image into $tmp/out, each output line stamped into LOG; its seconds on stdout
    local log=$1 t0 t1
    shift
    t0=$(now)
    if ! make --no-print-directory image recipes="$recipes" $make_args out="$tmp/out" cache=out/cache "$@" 2>&1 |
        while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done > "$log"; then
        tail -20 "$log" >&2
        exit 1
    fi
    t1=$(now)
    /usr/bin/python3 -c "print(f'{$t1 - $t0:.1f}')"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
