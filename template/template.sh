#!/usr/bin/env bash
# `make template=DIR` (and `make repro template=DIR`): a user's template,
# built as a layer over its base flavor in the same build (os-image/build.sh
# with the flavor's profile), so it shares our units, guard, pins, caches
# and the reproducibility gate. Called by os-image/image.mk with IMAGE_ENV
# and:
#   TEMPLATE  the template directory (template/README.md)
#   OUTROOT   out/: the template goes to OUTROOT/<name>/ (OUTROOT/repro/<name>/ with REPRO=1)
#   FLAVORS   the flavors, which a template's base must be one of and its name none of
#   TEMPLATE_PATH   the folders (colon-separated) where an E2B template's
#             fromTemplate finds a local template by its folder's name; empty:
#             none (make template_path=; never the template's own parent)
#   TENANT    whose the build is (make tenant=): the step cache's scope,
#             with the folder; empty: the folder alone
#   TRUST_IMAGE_CACHE   1: a fromImage copy in the cache is used without the
#             registry's confirmation (make trust_image_cache=)
#   E2B_SDK, E2B_SDK_REQUIREMENTS   the venv of E2B's Python SDK and its pinned
#             requirements (template/template.mk), made here on first use, for
#             a Dockerfile template only (e2b.toml, e2b.Dockerfile, Dockerfile)
#
# Order: the template is read and checked (build/e2b-template) and staged
# before build.sh runs, so a bad template stops before anything is built.
# Its packages are mkosi VolatilePackages=, installed over the flavor's
# cached package installation (not part of mkosi's cache key), so a template
# build is as warm as its flavor's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# The checkout's packages (sandbox/, template/), found through PYTHONPATH,
# which each command that needs them gets and nothing else does.
pymod() { PYTHONPATH="$top" "$PYTHON" -m "$@"; }
die() { echo "template: $*" >&2; exit 1; }
for v in TEMPLATE OUTROOT FLAVORS TOOLS PYTHON CACHE; do
    [ -n "${!v:-}" ] || die "$v is not set: build through make (os-image/image.mk)"
done
[ -d "$TEMPLATE" ] || die "template=$TEMPLATE: not a directory"
# Which format, and whether its file is a regular file of the directory, is
# e2b-template's check (template.conf or E2B's e2b.template.json; a
# symlink, a fifo, both, neither: refused, named); without either, a
# Dockerfile template goes through E2B's SDK first (read_template).
[ -x "$TOOLS/e2b-template" ] || die "$TOOLS/e2b-template missing: run \`make tools\` first"

# Set here only, for a fromImage pull (build.sh's labels): never inherited.
unset BASE_NAME BASE_DIGEST REPRO_UNPINNED STEP_CACHE BUILD_SOURCES
case "${STEP_CACHE_ON:-1}" in 0|1) ;; *) die "step_cache=${STEP_CACHE_ON}: 1 (use the step cache) or 0 (run every step)" ;; esac
case "${STEP_CACHE_MAX_MB:-4096}" in
    ''|*[!0-9]*) die "step_cache_max_mb=${STEP_CACHE_MAX_MB}: a whole number of MB (the step cache's cap)" ;;
esac
case "${TRUST_IMAGE_CACHE:-0}" in 0|1) ;; *) die "trust_image_cache=$(pymod sandbox.termsafe "$TRUST_IMAGE_CACHE"): 0 (a cached fromImage is used once its registry confirms access) or 1 (used unconfirmed)" ;; esac
# tenant=: letters, digits, '.', '_', '-', 1 to 64 of them, a letter or digit first.
if [ -n "${TENANT:-}" ] && ! [[ "$TENANT" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
    die "tenant=$(pymod sandbox.termsafe "$TENANT"): not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -, a letter or digit first); it scopes the step cache (template/README.md, \"The step cache\")"
fi
# template_path=: each folder where fromTemplate may find a local template.
tpath=()
IFS=: read -r -a tpath_in <<< "${TEMPLATE_PATH:-}"
for d in "${tpath_in[@]}"; do
    [ -n "$d" ] || continue
    [ -d "$d" ] || die "template_path=$(pymod sandbox.termsafe "$TEMPLATE_PATH"): $(pymod sandbox.termsafe "$d") is not a folder"
    tpath+=("$(cd "$d" && pwd)")
done
pymod regcache check || exit 1
pulled=
stage=$(mktemp -d "${TMPDIR:-/var/tmp}/e2b-template.XXXXXX")
# The shared cache's ledger of this build (regcache/shared.py): the step
# cache's stage starts it, build.sh prints its line.
export CACHE_LEDGER=$stage/cache-ledger
out=
made_out=0
finish() {
    local rc=$?
    rm -rf "$stage"
    # Nothing half-built: a failed first build leaves no out/<name>/.
    if [ "$rc" != 0 ] && [ "$made_out" = 1 ]; then rm -rf "$out"; fi
}
trap finish EXIT

# e2b_template OUT ARGS...: build/e2b-template ARGS > OUT, its messages
# escaped for the terminal: they name the folder and its files, whose names
# are the user's bytes.
e2b_template() {
    local dest=$1 rc=0
    shift
    "$TOOLS/e2b-template" --flavors "$FLAVORS" "$@" > "$dest" 2> "$stage/read.err" || rc=$?
    pymod sandbox.termsafe < "$stage/read.err" >&2
    return $rc
}
there() { [ -e "$1/$2" ] || [ -L "$1/$2" ]; }
# DIR's template, read and checked, as build/e2b-template's normal form in
# OUT. template.conf and e2b.template.json come first (both: refused); else
# e2b.toml, e2b.Dockerfile or Dockerfile, converted to E2B's Template JSON
# by E2B's own SDK (template/e2b/dockerfile.py in the $E2B_SDK venv). An
# e2b.toml's cpu_count and memory_mb go into OUT.meta (beside a Dockerfile or
# beside e2b.template.json; template.conf beside it is refused).
read_template() {
    local dir=$1 dest=$2 sdk
    if ! there "$dir" template.conf && ! there "$dir" e2b.template.json &&
        { there "$dir" e2b.toml || there "$dir" e2b.Dockerfile || there "$dir" Dockerfile; }; then
        [ -n "${E2B_SDK:-}" ] && [ -n "${E2B_SDK_REQUIREMENTS:-}" ] ||
            die "E2B_SDK is not set: build through make (os-image/image.mk)"
        sdk=$(pymod template.e2b.sdk_venv --venv "$E2B_SDK" --requirements "$E2B_SDK_REQUIREMENTS") || return 1
        PYTHONPATH="$top" "$sdk" -m template.e2b.dockerfile --dir "$dir" --out "$dest.sdk" --meta "$dest.meta" || return 1
        e2b_template "$dest" --dir "$dir" --json "$dest.sdk"
    else
        e2b_template "$dest" --dir "$dir" || return 1
        # e2b.toml beside e2b.template.json: its start and ready commands
        # into the normal form, its cpu_count and memory_mb into OUT.meta,
        # as for a Dockerfile template (template/e2b/e2btoml.py).
        if there "$dir" e2b.template.json && there "$dir" e2b.toml; then
            pymod template.e2b.e2btoml --dir "$dir" --normal "$dest" --meta "$dest.meta" || return 1
        fi
    fi
}

json=$stage/template.json
read_template "$TEMPLATE" "$json" || exit 1
# field_of FILE KEY [SUBKEY]: a field of a JSON object ("" when absent; a list joined by blanks).
field_of() { "$PYTHON" -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v = (v or {}).get(k)
print(" ".join(v) if isinstance(v, list) else "" if v is None else v)' "$@"; }
field() { field_of "$json" "$1"; }
name=$(field name)
format=$(field format)
if [ "$format" = e2b ]; then
    # E2B's Template JSON (or a Dockerfile template, converted to one).
    # fromTemplate naming another local template: the folder of that name
    # in the first folder of template_path= that has one (never, by
    # default, one beside this one: another tenant's folder may sit there),
    # itself E2B's format or a Dockerfile one, built first in the same build
    # (its steps, then these); the chain ends at one of E2B's own templates,
    # as our flavor, or a registry image.
    from() { field_of "$1" from "$2"; }
    chain=("$json" "$TEMPLATE")
    cur=$json names=$name
    while [ "$(from "$cur" kind)" = template ]; do
        parent=$(from "$cur" name)
        case " $names " in *" $parent "*) die "template=$TEMPLATE: fromTemplate cycle: $names $parent" ;; esac
        [ "${#chain[@]}" -lt 32 ] || die "template=$TEMPLATE: fromTemplate: more than 16 templates deep ($names)"
        pdir=
        for d in "${tpath[@]}"; do
            if [ -d "$d/$parent" ]; then pdir=$d/$parent; break; fi
        done
        [ "${#tpath[@]}" -gt 0 ] || die "template=$TEMPLATE: fromTemplate '$parent': a local template is looked up only in the folders template_path= names, and none is given: pass template_path=DIR, DIR the folder that holds $parent/"
        [ -n "$pdir" ] || die "template=$TEMPLATE: fromTemplate '$parent': no template folder $parent/ in template_path=$(pymod sandbox.termsafe "$TEMPLATE_PATH")"
        cur=$stage/from-${#chain[@]}.json
        read_template "$pdir" "$cur" ||
            die "template=$TEMPLATE: fromTemplate '$parent': its template is refused (see above)"
        [ "$(field_of "$cur" format)" = e2b ] ||
            die "template=$TEMPLATE: fromTemplate '$parent': $pdir is a template.conf template; an E2B template builds on E2B templates (write $parent's as e2b.template.json, e2b.Dockerfile or Dockerfile)"
        chain=("$cur" "$pdir" "${chain[@]}")
        names="$names $parent"
    done
    case "$(from "$cur" kind)" in
        flavor) base=$(from "$cur" name) ;;
        image)
            # A registry image: pulled by digest into the cache and pinned
            # by the lock in the template= folder, which names the template
            # of the chain it pins (template/e2b/pull.py); then builder
            # mode, as for any base of one's own. Its config's Env starts
            # the steps' ENVs.
            pulled=$stage/pulled.json
            pull_flags=()
            [ "${OFFLINE:-0}" != 1 ] || pull_flags+=(--offline)
            [ "${TRUST_IMAGE_CACHE:-0}" != 1 ] || pull_flags+=(--trust-cache)
            pymod template.e2b.pull --ref "$(from "$cur" ref)" --template "$TEMPLATE" --holder "$(field_of "$cur" name)" \
                --cache "$CACHE" ${CERT_DIR:+--cert-dir "$CERT_DIR"} --registry-auth "$(field_of "$cur" registry_auth)" \
                "${pull_flags[@]}" > "$pulled" || exit 1
            base=$(field_of "$pulled" base)
            BASE_NAME=$(field_of "$pulled" name) BASE_DIGEST=$(field_of "$pulled" digest)
            export BASE_NAME BASE_DIGEST ;;
    esac
else
    base=$(field base)
fi
[ -z "${BASE:-}" ] || die "base=$BASE and template=$TEMPLATE together: a template names its base in its template.conf"
# Builder mode: an image of one's own (a path relative to the template
# directory, confined to it: os-image/builder_base.py --confine) gets e2b-rt's
# runtime, then the template on top.
flavor=$base
case "$base" in
    oci:*|docker-archive:*)
        flavor=e2b-rt
        export BASE=$base BASE_RELATIVE_TO=$TEMPLATE
        # Only a pull of our own, into the cache, is outside the folder.
        [ -n "$pulled" ] || export BASE_CONFINE=1 ;;
esac

# The staged layer: the files at their destinations (mode set; owners and
# build commands applied by template.postinst), the env, the start unit.
tree=$stage/tree
if [ "$format" = e2b ]; then
    # Its steps run in template.postinst (template/e2b/steps.py); RUN steps
    # have the network, as on E2B (apt_install, pip_install).
    targs=()
    for ((i = 0; i < ${#chain[@]}; i += 2)); do targs+=(--template "${chain[i]}" "${chain[i + 1]}"); done
    meta=()
    [ ! -f "$stage/template.json.meta" ] || meta=(--meta "$stage/template.json.meta")
    pymod template.e2b.stage "${targs[@]}" "${meta[@]}" ${pulled:+--base-env "$pulled"} --tree "$tree" --labels "$stage/labels.json" || exit 1
    json=$stage/labels.json
    # What `make repro` cannot promise: RUN steps fetch from the network
    # (apt_install, pip_install, curl), and what they fetch is not pinned.
    runs=$("$PYTHON" -c 'import json, sys
t = json.load(open(sys.argv[1]))
print(" ".join("%s:%d" % (x["name"], s["index"]) for x in t["templates"] for s in x["steps"] if s["type"] == "RUN"))' \
        "$tree/usr/lib/e2b-template-build/steps.json")
    [ -z "$runs" ] || export REPRO_UNPINNED="the RUN steps (template:index) $runs have the network, as on E2B; what they fetch is not pinned by this build, so the two builds can differ where they wrote"
    # The step cache (template/e2b/step_cache.py): the layers of the steps
    # this template ran before, on the same base, staged read-only for
    # template.postinst; build.sh keeps the new ones. Not for `make repro`,
    # whose two builds run every step.
    if [ "${STEP_CACHE_ON:-1}" = 1 ] && [ "${REPRO:-0}" != 1 ]; then
        STEP_CACHE=$stage/step-cache.json
        pymod template.e2b.step_cache stage --steps "$tree/usr/lib/e2b-template-build/steps.json" \
            --tree "$tree" --scope "$TEMPLATE" ${TENANT:+--tenant "$TENANT"} --cache "$CACHE/e2b-steps" --max-mb "${STEP_CACHE_MAX_MB:-4096}" \
            --base-id "${BASE_DIGEST:-flavor:$base} ${DISTRO:-} ${RELEASE:-} ${KERNELS:-} ${PYDEPS:-}" \
            --config "$STEP_CACHE" --out "$stage/step-cache" || exit 1
        export STEP_CACHE
    fi
else
    pymod template.stage --template "$json" --tree "$tree" --conf "$TEMPLATE/template.conf" || exit 1
fi

if [ "${REPRO:-0}" = 1 ]; then out=$OUTROOT/repro/$name; else out=$OUTROOT/$name; fi
[ -e "$out" ] || made_out=1
mkdir -p "$out"
# The scripts as the build's own copy of the sources has them (@SRC@:
# build.sh's copy, what the sandbox sees; never this checkout). E2B_TEMPLATE:
# os-image/mkosi.finalize makes the linker cache with the build machine's
# ldconfig, not the image's, which a template can replace.
args=(--extra-tree "$tree" --postinst-script @SRC@/template/template.postinst
      --finalize-script @SRC@/template/template.finalize --environment E2B_TEMPLATE=1)
BUILD_SOURCES=
if [ "$format" = e2b ]; then
    args+=(--with-network=yes)
    [ -z "${STEP_CACHE:-}" ] || BUILD_SOURCES="$stage/step-cache:e2b-step-cache"
else
    for p in $(field packages); do args+=(--volatile-package "$p"); done
fi
echo "template: $name on $(pymod sandbox.termsafe "$base") -> $out" >&2
export FLAVOR=$flavor OUT=$out TEMPLATE_JSON=$json CONFINE_RO=$stage BUILD_SOURCES MKOSI_ARGS="${MKOSI_ARGS:-} ${args[*]}"
if [ "${REPRO:-0}" = 1 ]; then
    bash "$top/os-image/repro.sh" || exit 1
else
    bash "$top/os-image/build.sh" || exit 1
fi
# A tag resolved by this build is pinned only once the build succeeded.
[ -z "$pulled" ] || pymod template.e2b.pull --write-lock "$pulled" --template "$TEMPLATE"
