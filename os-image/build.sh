#!/usr/bin/env bash
# Build one flavor: out/<flavor>/{oci/,rootfs.ext4,manifest.json}.
# Called by os-image/image.mk (`make flavor=...`); every knob is an
# environment variable set there, from the make knob of the same name in
# lower case, whose default lives there or in the top Makefile (see
# os-image/README.md). Nothing is defaulted here:
#
#   FLAVOR RELEASE DISTRO RECIPES OUT CACHE TOOLS PYTHON   (required)
#   ENVD (source|release) GO_TOOLCHAIN (for ENVD=source)     (required)
#   MIRROR SECURITY_MIRROR SNAPSHOT SNAPSHOT_BASE PIN_MIRROR (empty: none)
#   OFFLINE ROOTFS_HEADROOM_MB SOURCE_DATE_EPOCH (default: the commit's time)
#   PYDEPS PIP_INDEX (e2b-ci's Python stack, for its prepare.sh)
#   KERNELS (e2b-ci's Jupyter kernels: a comma list of python, javascript, r,
#   bash, java; python and javascript are always in; empty: all five)
#   SOURCE_URL (the repository's URL for the OCI source label; empty: none)
#   TEMPLATE_JSON (set by template/template.sh: a template on FLAVOR, for its labels)
#   CONFINE_RO (set by template/template.sh: its staging, which confined mkosi reads)
#   BUILD_SOURCES (set by template/template.sh: "PATH:NAME ..." more build sources, at $SRCDIR/NAME)
#   (MKOSI_ARGS may name @SRC@/PATH: PATH in the sources mkosi is given, the
#   sandbox's copy of them for a confined build)
#   TEMPLATE, TENANT (set by template/template.sh: whose build this is; the package
#   cache a confined build writes is theirs alone)   SANDBOX_DENY (CIDRs a
#   confined build may not reach, beyond the host's own addresses)
#   BASE (builder mode: oci:PATH[:REF] or docker-archive:FILE, an image of one's
#   own our runtime is installed onto; its os-release sets DISTRO and RELEASE)
#   BASE_RELATIVE_TO (where a relative BASE path starts; default: the top directory)
#   BASE_CONFINE (1: BASE is a template's, which must stay inside BASE_RELATIVE_TO)
#   BASE_NAME, BASE_DIGEST (set by template/template.sh for an E2B fromImage:
#   the repository and registry digest BASE, a cached pull, was pulled by)
#   PACK (0: stop after mkosi, no pack.py)   MKOSI_ARGS (appended to mkosi's)
#   PREFLIGHT_ONLY (1: stop after the quick steps, before mkosi)
#   INCREMENTAL (1: reuse mkosi's cached image with the packages installed,
#   kept under CACHE/mkosi-incremental/ and keyed by mkosi on the config;
#   0: install every package afresh, as `make repro` does)
#
# Order matters: everything that can fail quickly (sources, pinned artifacts,
# the envd version) runs before mkosi, which takes the time.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

die() { echo "image: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }
# Text with bytes from a base (its name, tags, os-release): escaped (sandbox/termsafe.py).
# The checkout's packages (sandbox/, template/) are found through PYTHONPATH,
# given to each command that needs them and to nothing else.
termsafe() { PYTHONPATH="$top" $py -m sandbox.termsafe "$@"; }
say_safe() { say "$(termsafe "$*")"; }

for v in FLAVOR RELEASE DISTRO RECIPES OUT CACHE TOOLS PYTHON INCREMENTAL PACK ROOTFS_HEADROOM_MB ENVD GO_TOOLCHAIN; do
    [ -n "${!v:-}" ] || die "$v is not set: build through make (os-image/image.mk sets every knob)"
done
case "$ENVD" in
    source|release) ;;
    *) die "envd=$ENVD: unknown; envd=source builds envd from its pinned source (the default), envd=release ships the pinned release binary" ;;
esac
: "${SOURCE_DATE_EPOCH:=$(git -C "$top" log -1 --format=%ct)}"
export SOURCE_DATE_EPOCH
py=$PYTHON

# e2b-ci's kernels (checked for every flavor, so a typo fails at once): the
# names upstream's make_template(kernels=...) takes, in this order.
all_kernels=(python javascript r bash java)
declare -A want_kernel=([python]=1 [javascript]=1)
IFS=, read -r -a asked <<< "${KERNELS:-python,javascript,r,bash,java}"
for k in "${asked[@]}"; do
    k=${k//[[:space:]]/}
    [ -n "$k" ] || continue
    case " ${all_kernels[*]} " in
        *" $k "*) want_kernel[$k]=1 ;;
        *) die "kernels=$(termsafe "$k"): unknown kernel (valid: python, javascript, r, bash, java; python and javascript are always in)" ;;
    esac
done
kernels=()
for k in "${all_kernels[@]}"; do [ -z "${want_kernel[$k]:-}" ] || kernels+=("$k"); done
KERNELS=$(IFS=,; echo "${kernels[*]}")
# mkosi matches a kernel's drop-in (mkosi.profiles/e2b-ci/mkosi.conf.d/) on
# E2B_CI_KERNEL_<NAME> being set.
kernel_env=(--environment "E2B_CI_KERNELS=$KERNELS")
kernel_check=
[ "$FLAVOR" != e2b-ci ] || kernel_check=1
for k in "${kernels[@]}"; do kernel_env+=(--environment "E2B_CI_KERNEL_${k^^}=1"); done

# A flavor is a mkosi profile (os-image/mkosi.profiles/<flavor>/), plus,
# when it needs them, pins and a prepare.sh in os-image/<flavor>/.
profile=$here/mkosi.profiles/$FLAVOR
flavordir=$here/$FLAVOR
[ -f "$profile/mkosi.conf" ] || die "flavor=$FLAVOR: no $profile/mkosi.conf (flavors: $(cd "$here/mkosi.profiles" && ls -d */mkosi.conf 2>/dev/null | cut -d/ -f1 | tr '\n' ' '))"
[ -d "$RECIPES" ] || die "recipes=$RECIPES: not a directory"
for t in pinfetch envd-version; do
    [ -x "$TOOLS/$t" ] || die "$TOOLS/$t missing: run \`make tools\` first"
done
RECIPES=$(cd "$RECIPES" && pwd)

work=$OUT/work
extra=$work/extra
ws=
basework=
srccopy=
made_out=0
[ -e "$OUT" ] || made_out=1
# A build that stops leaves no half-made work behind (a finished one keeps
# work/ for inspection; out/<flavor>'s outputs are replaced only by pack.py).
finish() {
    local rc=$?
    [ -z "$ws" ] || rm -rf "$ws"
    [ -z "$basework" ] || rm -rf "$basework"
    [ -z "$srccopy" ] || rm -rf "$srccopy"
    [ "$rc" = 0 ] || rm -rf "$work"
    # Nor an empty out/<flavor>/ it made itself.
    if [ "$rc" != 0 ] && [ "$made_out" = 1 ]; then rmdir "$OUT" 2>/dev/null || true; fi
}
trap finish EXIT
rm -rf "$work"
PYTHONPATH="$top" $py -m regcache check || exit 1
# work/ keeps the image tree mkosi made (setuid programs a template may have
# planted among them): the build host's other users have no way into it.
mkdir -p -m 0700 "$work"
mkdir -p "$extra" "$CACHE"
# Where each step, artifact and envd came from (regcache/shared.py);
# template.sh starts it for a template, whose steps come first.
: "${CACHE_LEDGER:=$work/cache-ledger}"
export CACHE_LEDGER

# 0. Builder mode: the base image is found, inspected, unpacked and checked
# (apt and dpkg, a Debian release we serve) before anything else; its
# os-release decides the distro and release the runtime is installed from.
base_json=
if [ -n "${BASE:-}" ]; then
    basework=$(mktemp -d "${TMPDIR:-/var/tmp}/e2b-images-base.XXXXXX")
    say_safe "base: $BASE: unpacking and checking it"
    PYTHONPATH="$top" $py "$here/builder_base.py" --base "$BASE" --dest "$basework" \
        --relative-to "${BASE_RELATIVE_TO:-$top}" ${BASE_CONFINE:+--confine} \
        ${BASE_NAME:+--name "$BASE_NAME" --digest "$BASE_DIGEST"} > "$work/base.json" || exit 1
    base_json=$work/base.json
    basefield() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$base_json" "$1"; }
    base_distro=$(basefield distro) base_release=$(basefield release)
    if [ "$base_distro/$base_release" != "$DISTRO/$RELEASE" ]; then
        say_safe "base: $BASE is $base_distro/$base_release: our runtime comes from that release (not $DISTRO/$RELEASE)"
    fi
    DISTRO=$base_distro RELEASE=$base_release
    say_safe "base: $BASE = $(basefield name)@$(basefield digest) ($(basefield os))"
fi

# 1. apt sources for mkosi (and the archive list for the manifest).
pkgmngr=$work/pkgmngr
srcargs=(--distro "$DISTRO" --release "$RELEASE"
         --output "$pkgmngr/etc/apt/sources.list.d/mkosi.sources" --print-json)
[ -n "${MIRROR:-}" ] && srcargs+=(--mirror "$MIRROR")
[ -n "${SECURITY_MIRROR:-}" ] && srcargs+=(--security-mirror "$SECURITY_MIRROR")
[ -n "${SNAPSHOT:-}" ] && srcargs+=(--snapshot "$SNAPSHOT")
[ -n "${SNAPSHOT_BASE:-}" ] && srcargs+=(--snapshot-base "$SNAPSHOT_BASE")
$py "$here/sources.py" "${srcargs[@]}" > "$work/archives.json" || die "no apt sources (see above)"

install -D -m 0644 "$pkgmngr/etc/apt/sources.list.d/mkosi.sources" \
        "$extra/etc/apt/sources.list.d/e2b.sources"

# 2. Pinned artifacts, through pinfetch, before anything slow.
lists() { # the base list, then the flavor's
    for f in "$here/$1" "$flavordir/$1"; do
        if [ -f "$f" ]; then grep -v '^[[:space:]]*\(#\|$\)' "$f" || true; fi
    done
    return 0
}
pinargs=(--cache "$CACHE/pinfetch")
[ -n "${PIN_MIRROR:-}" ] && for m in $PIN_MIRROR; do pinargs+=(--mirror "$m"); done
[ "${OFFLINE:-0}" = 1 ] && pinargs+=(--offline)
: > "$work/artifacts.jsonl"
while read -r lock name dest mode; do
    # envd=source: envd is built from its source pin below, not fetched.
    [ "$ENVD" = source ] && [ "$name" = envd ] && { envd_pin=("$lock" "$dest" "$mode"); continue; }
    lockfile=$RECIPES/$lock
    [ -f "$lockfile" ] || die "artifact $name: lock file $lockfile not found (recipes=$RECIPES)"
    mkdir -p "$extra$(dirname "$dest")"
    if ! PYTHONPATH="$top" $py -m regcache pinfetch -- "$TOOLS/pinfetch" --lock "$lockfile" --name "$name" \
            --output "$extra$dest" --mode "$mode" "${pinargs[@]}"; then
        url=$("$TOOLS/pinfetch" --lock "$lockfile" --name "$name" --field url 2>/dev/null || echo '?')
        die "artifact $name ($url) could not be fetched; stopping before mkosi.
image: supply it with pin_mirror=PREFIX (a copy of out/cache/pinfetch: PREFIX/sha256/<hex>, PREFIX/tree/<hex> for a tree pin),
image: offline=1 with a filled cache ($CACHE/pinfetch), or recipes=DIR with a lock that points elsewhere."
    fi
    "$TOOLS/pinfetch" --lock "$lockfile" --name "$name" --json | \
        $py -c 'import json,sys; d=json.load(sys.stdin); d["path"]=sys.argv[1]; d["mode"]=sys.argv[2]; print(json.dumps(d, sort_keys=True))' \
        "$dest" "$mode" >> "$work/artifacts.jsonl"
done < <(lists pins)

# 2a. envd=source: envd built from [envd-source] in the envd lock, cached by
# the pin (os-image/envd-source.sh); its record goes into the manifest.
if [ "$ENVD" = source ]; then
    [ -n "${envd_pin:-}" ] || die "envd=source: no envd line in the pins lists (os-image/pins)"
    lockfile=$RECIPES/${envd_pin[0]}
    [ -f "$lockfile" ] || die "envd=source: lock file $lockfile not found (recipes=$RECIPES)"
    mkdir -p "$extra$(dirname "${envd_pin[1]}")"
    bash "$here/envd-source.sh" "$lockfile" envd-source "$extra${envd_pin[1]}" "$work/envd-build.json" \
            "${pinargs[@]}" || die "envd: no envd from source (see above); stopping before mkosi"
    chmod "${envd_pin[2]}" "$extra${envd_pin[1]}"
    $py -c 'import json,sys; b=json.load(open(sys.argv[1]))
d={"name": "envd", "version": b["built_from"]["version"], "path": sys.argv[2], "mode": sys.argv[3],
   "sha256": b["sha256"], "built_from": b["built_from"], "go": b["go"], "modules": b["modules"],
   "build_settings": b["build_settings"]}
print(json.dumps(d, sort_keys=True))' "$work/envd-build.json" "${envd_pin[1]}" "${envd_pin[2]}" >> "$work/artifacts.jsonl"
fi

# 2b. A flavor's own preparation, still before anything slow (e2b-ci unpacks
# and patches its archive here).
if [ -x "$flavordir/prepare.sh" ]; then
    EXTRA=$extra WORK=$work RELEASE=$RELEASE PYDEPS=${PYDEPS:-} PIP_INDEX=${PIP_INDEX:-} KERNELS=$KERNELS \
        TOOLS=$TOOLS RECIPES=$RECIPES CACHE=$CACHE PIN_MIRROR=${PIN_MIRROR:-} OFFLINE=${OFFLINE:-0} \
        PYTHON=$py "$flavordir/prepare.sh" \
        || die "flavor $FLAVOR: $flavordir/prepare.sh failed (see above); stopping before mkosi"
fi

# 3. /etc/envd-version from the binary itself, checked against the lock.
envd_lock=$RECIPES/$(lists pins | awk '$2 == "envd" { print $1; exit }')
envd_stanza=envd
[ "$ENVD" = source ] && envd_stanza=envd-source
envd_version=$("$TOOLS/pinfetch" --lock "$envd_lock" --name "$envd_stanza" --field version) ||
    die "envd: cannot read its version from [$envd_stanza] of $envd_lock (see above)"
mkdir -p "$extra/etc"
"$TOOLS/envd-version" --envd "$extra/usr/bin/envd" --expect "$envd_version" \
        --output "$extra/etc/envd-version" || die "envd: version check failed (see above)"

# 4. Units from units/: those the presets of the base and the flavor enable
# (the one list of a flavor's units) and, transitively, every units/ file a
# shipped unit names in Service=, Wants= or Requires= (mmds.socket ->
# mmds.service -> mmds-fwcfg.service). A shipped NAME.service's NAME.tmpfiles
# goes to /usr/lib/tmpfiles.d/NAME.conf. Units the presets name that are not
# in units/ are Debian's.
shopt -s nullglob
presets=("$here"/mkosi.extra/usr/lib/systemd/system-preset/*.preset
         "$profile"/mkosi.extra/usr/lib/systemd/system-preset/*.preset)
shopt -u nullglob
mkdir -p "$extra/usr/lib/systemd/system" "$extra/usr/lib/tmpfiles.d"
declare -A shipped=()
ship() {
    local unit=$1 dep
    [ -z "${shipped[$unit]:-}" ] || return 0
    shipped[$unit]=1
    install -m 0644 "$top/units/$unit" "$extra/usr/lib/systemd/system/$unit"
    local base=${unit%.service}
    base=${base%@}  # a template (NAME@.service) has its NAME.tmpfiles too
    if [ -f "$top/units/$base.tmpfiles" ] && [ "${unit##*.}" = service ]; then
        install -m 0644 "$top/units/$base.tmpfiles" "$extra/usr/lib/tmpfiles.d/$base.conf"
    fi
    # A socket without Service= activates the service of its own name, or
    # with Accept=yes its template (NAME@.service).
    if [ "${unit##*.}" = socket ] && ! grep -q '^Service=' "$top/units/$unit"; then
        local svc=${unit%.socket}.service
        grep -q '^Accept=yes' "$top/units/$unit" && svc=${unit%.socket}@.service
        [ -f "$top/units/$svc" ] || die "unit $unit activates $svc: $top/units/$svc not found"
        ship "$svc"
    fi
    for dep in $(sed -n 's/^\(Service\|Wants\|Requires\)=//p' "$top/units/$unit"); do
        dep=${dep/@%i./@.}  # a template's instance (vsock-proxy@%i.service) ships as the template
        if [ -f "$top/units/$dep" ]; then
            ship "$dep"
        elif grep -q "^Service=${dep/@./@%i.}\$\|^Service=$dep\$" "$top/units/$unit"; then
            die "unit $unit activates $dep: $top/units/$dep not found"
        fi
    done
}
while read -r verb unit _; do
    [ "$verb" = enable ] && [ -f "$top/units/$unit" ] || continue
    ship "$unit"
done < <(cat "${presets[@]}")
[ "${#shipped[@]}" -gt 0 ] || die "flavor $FLAVOR: its presets enable no unit from $top/units"

incargs=()
# A base image is not cached by mkosi (BaseTrees= turns Incremental= off):
# its packages are installed over it afresh each time.
if [ -n "$base_json" ]; then
    incargs=(--base-tree "$(basefield rootfs)")
elif [ "$INCREMENTAL" = 1 ]; then
    # pydeps=pip installs other packages: its own cache, so the two paths do not evict each other.
    inc=$CACHE/mkosi-incremental/$FLAVOR-$DISTRO-$RELEASE
    if [ "${PYDEPS:-}" = pip ]; then inc=$inc-pip; fi
    # So does an e2b-ci with fewer kernels than the default.
    if [ "$FLAVOR" = e2b-ci ] && [ "${#kernels[@]}" != "${#all_kernels[@]}" ]; then inc=$inc-${KERNELS//,/-}; fi
    mkdir -p "$inc"
    incargs=(--incremental yes --cache-dir "$inc")
fi

if [ "${PREFLIGHT_ONLY:-0}" = 1 ]; then
    say "preflight ok: sources, pinned artifacts, envd version and units are ready in $extra"
    exit 0
fi

# Sources a flavor's prepare.sh hands to its build scripts: WORK/build-sources/NAME
# is mounted at $SRCDIR/NAME beside the repository (e2b-ci: zeromq's addon);
# a template's (BUILD_SOURCES, its step cache) likewise.
extra_src=()
shopt -s nullglob
for d in "$work"/build-sources/*/; do d=${d%/}; extra_src+=("$d:${d##*/}"); done
shopt -u nullglob
for s in ${BUILD_SOURCES:-}; do extra_src+=("$s"); done

# 5. mkosi: packages, guest tools, users, presets. Directory output.
# mkosi refuses a workspace inside its build sources (the repository).
ws=$(mktemp -d "${TMPDIR:-/var/tmp}/e2b-images-mkosi.XXXXXX")
mkdir -p "$CACHE/mkosi/$DISTRO-$RELEASE" "$work/mkosi-out"
pkgcache=$CACHE/mkosi/$DISTRO-$RELEASE
# A base image or a template runs code of its own as root inside mkosi (a
# base's dpkg and maintainer scripts, a template's build steps). So mkosi
# runs confined (sandbox/confine.py, sandbox/README.md): as unprivileged
# host ids, in a network of its own whose way out skips the host, seeing
# only what is listed here. Read-only: this build's copy of the sources
# mkosi and its scripts read (never the checkout: not out/, not a template
# folder), its extra tree, apt configuration, unpacked base and a template's
# staging. Writable: mkosi's workspace, its output inside it (mkosi moves the
# image out of the workspace with rename(2), which does not cross mounts),
# and the package cache of this build's tenant alone. Through an overlay
# whose changes are dropped: the flavor's cached installation, the image
# this build starts from. Nothing else of the host, and no other cache.
confine=()
buildsrc=$top
mkosi_dir=$here
mkosi_out=$work/mkosi-out
if [ -n "$base_json" ] || [ -n "${TEMPLATE_JSON:-}" ]; then
    mkosi_out=$ws/mkosi-out
    mkdir "$mkosi_out"
    srccopy=$(mktemp -d "${TMPDIR:-/var/tmp}/e2b-images-src.XXXXXX")
    bash "$top/sandbox/sources.sh" "$top" "$srccopy" "${extra_src[@]##*:}" || die "no copy of the build's sources (see above)"
    buildsrc=$srccopy
    mkosi_dir=$srccopy/os-image
    # The tenant's own package cache (apt's lists seeded from the shared
    # one, which only flavor builds fill): what it downloads is its own.
    if [ -n "${TENANT:-}" ]; then scope=tenant:$TENANT
    elif [ -n "${TEMPLATE:-}" ]; then scope=template:$TEMPLATE
    else scope=base:$BASE; fi
    scope=$(printf '%s' "$scope" | sha256sum | cut -c1-32)
    pkgcache=$CACHE/sandbox-packages/$scope/$DISTRO-$RELEASE
    if [ ! -d "$pkgcache" ]; then
        mkdir -p "$pkgcache.new/lib/apt"
        [ ! -d "$CACHE/mkosi/$DISTRO-$RELEASE/lib/apt/lists" ] ||
            cp -a "$CACHE/mkosi/$DISTRO-$RELEASE/lib/apt/lists" "$pkgcache.new/lib/apt/"
        mv "$pkgcache.new" "$pkgcache"
    fi
    confine=(env PYTHONPATH="$top" "$py" -m sandbox.confine --ro-bind "$srccopy" --ro-bind "$pkgmngr"
             --ro-bind "$extra" --bind "$ws" --bind "$pkgcache")
    [ ! -d "$work/build-sources" ] || confine+=(--ro-bind "$work/build-sources")
    [ -z "$basework" ] || confine+=(--ro-bind "$basework")
    [ -z "${inc:-}" ] || confine+=(--overlay "$inc")
    for p in ${CONFINE_RO:-}; do confine+=(--ro-bind "$p"); done
    for c in ${SANDBOX_DENY:-}; do confine+=(--deny "$c"); done
    confine+=(--chdir "$mkosi_dir" --)
fi
for s in "${extra_src[@]}"; do buildsrc+=",$s"; done
# @SRC@ in MKOSI_ARGS: a path inside the sources mkosi is given (template.sh's scripts).
MKOSI_ARGS=${MKOSI_ARGS//@SRC@/${buildsrc%%,*}}
(cd "$mkosi_dir" && "${confine[@]}" mkosi \
    --profile "$FLAVOR" \
    --environment "E2B_CI_PYDEPS=${PYDEPS:-debian}" \
    "${kernel_env[@]}" \
    --distribution "$DISTRO" --release "$RELEASE" \
    --source-date-epoch "$SOURCE_DATE_EPOCH" \
    --package-manager-tree "$pkgmngr" \
    --extra-tree "$extra" \
    --build-sources "$buildsrc" \
    --package-cache-dir "$pkgcache" \
    --workspace-dir "$ws" \
    --output-dir "$mkosi_out" \
    --output image \
    "${incargs[@]}" \
    ${MKOSI_ARGS:-} \
    --force build 2>&1 | tee "$work/mkosi.log" | termsafe >&2) || die "mkosi build failed"
if [ "$mkosi_out" != "$work/mkosi-out" ]; then
    rmdir "$work/mkosi-out"
    mv "$mkosi_out" "$work/mkosi-out"
fi

# 5a. A template: what decides how the guard and envd start is as its record
# says (template.postinst made it before the first build command, and put
# its hash on the build log, which the build cannot reach: $work/mkosi.log).
if [ -n "${TEMPLATE_JSON:-}" ]; then
    PYTHONPATH="$top" $py -m sandbox.guard_record check "$work/mkosi-out/image" "$work/mkosi-out/e2b-template-guard.json" \
        "$work/mkosi.log" || die "template: refused (see above)"
    rm -f "$work/mkosi-out/e2b-template-guard.json"
    # The step cache (template/e2b/step_cache.py): the layers this build's
    # steps made, kept only as its log vouches for them; never in the image.
    if [ -n "${STEP_CACHE:-}" ]; then
        PYTHONPATH="$top" $py -m template.e2b.step_cache store --config "$STEP_CACHE" --made "$work/mkosi-out/e2b-step-cache" \
            --log "$work/mkosi.log" || say "step cache: this build's layers are not kept (see above)"
    fi
    rm -rf "$work/mkosi-out/e2b-step-cache"
fi
# Per build: how many steps, artifacts and envd builds came from where.
PYTHONPATH="$top" $py -m regcache summary "$CACHE_LEDGER"

# 6. Deterministic outputs (PACK=0: leave mkosi's output as it is; bench/image.sh
# uses that to measure mkosi's own Format=oci as a peer).
if [ "$PACK" = 0 ]; then
    say "done (PACK=0): mkosi output in $work/mkosi-out"
    exit 0
fi
# Label inputs (os-image/labels.py): the flavor's defaults (or the
# template's), the commit.
PYTHONPATH="$top" $py "$here/labels.py" --flavor "$FLAVOR" --repo "$top" --source "${SOURCE_URL:-}" \
    ${TEMPLATE_JSON:+--template "$TEMPLATE_JSON"} ${base_json:+--base "$base_json"} \
    --out "$work/meta.json" || die "labels: no meta file (see above)"
PYTHONPATH="$top" $py "$here/pack.py" --tree "$work/mkosi-out/image" --out "$OUT" --flavor "$FLAVOR" \
    --distro "$DISTRO" --release "$RELEASE" --epoch "$SOURCE_DATE_EPOCH" \
    --archives "$work/archives.json" --artifacts "$work/artifacts.jsonl" \
    --apt-lists "$CACHE/mkosi/$DISTRO-$RELEASE" \
    --headroom-mb "$ROOTFS_HEADROOM_MB" --meta "$work/meta.json" \
    ${base_json:+--base "$base_json"} ${kernel_check:+--kernels "$KERNELS"} || die "pack failed"
say "done: $OUT/oci $OUT/rootfs.ext4 $OUT/manifest.json"
