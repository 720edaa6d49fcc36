# Sourced by bench scripts: sets $recipes and $make_args, the recipes and
# pin mirror builds use. BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) when given;
# otherwise tests/testimages.py's (the real envd from its pinned source,
# ../shared/upstream's archive on a file:// tree mirror in $tmp/mirror: the
# tests' own mirror lives only as long as their Python process).
recipes=${BENCH_RECIPES:-}
make_args=${BENCH_MAKE_ARGS:-}
if [ -z "$recipes" ]; then
    # A failure here (no upstream archive: E2B_UPSTREAM_DIR) stops the bench.
    assignments=$(/usr/bin/python3 - "${tmp:?set tmp first}" <<'PY'
import sys, pathlib
sys.path.insert(0, "tests")
import testimages as t
d = pathlib.Path(sys.argv[1]) / "mirror"
t.fill_pin_mirror(d)
print(f"recipes={t.SHIPPED_RECIPES}; make_args='pin_mirror=file://{d}'")
PY
) || exit 1
    eval "$assignments"
fi
