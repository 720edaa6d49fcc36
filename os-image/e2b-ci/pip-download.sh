#!/bin/bash
# pip-download.sh CONSTRAINTS-DIR OUT RELEASE [FILE...]   (called by prepare.sh)
#
# Checks every constraints/*.txt (fully pinned and hashed, and together
# pinning what the kernels' wheels require), then puts exactly the wheels of
# FILE... (names in CONSTRAINTS-DIR; default all *.txt) for the image's
# CPython into OUT/wheels (and the files, as downloaded, into OUT/constraints),
# before mkosi runs; mkosi.postinst installs them offline. pydeps=pip takes
# all files; pydeps=debian e2b-ci-kernels.txt alone.
# KERNELS (comma-separated, build.sh's kernels=): a file's `# kernel: NAME`
# sections of kernels not listed are left out (unset: all are kept); a file
# left with no requirement is skipped. Each downloaded wheel's Requires-Dist
# is checked against its `# requires:` line.
#
# Wheels are kept in CACHE/pip-wheels (CACHE from build.sh; default
# OUT/../pip-cache): online, `pip download --require-hashes` fills it from the
# index; then OUT/wheels is filled from the cache alone, again hash-checked.
# OFFLINE=1 skips the index: every wheel must already be in the cache.
# The index: PIP_INDEX (pip_index=, or PIP_INDEX_URL), else the build host's
# pip configuration (global.index-url), else pip's own default; the repository
# names none.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?constraints dir} out=${2:?output dir} release=${3:?release}
shift 3

die() { echo "e2b-ci: pip-download: $*" >&2; exit 1; }

shopt -s nullglob
all=("$dir"/*.txt)
[ ${#all[@]} -gt 0 ] || die "no requirement files in $dir"
"$here/check-constraints.py" --closure "${all[@]}" || die "constraints are not fully pinned and hashed (see above); stopping before mkosi"
[ $# -gt 0 ] || set -- "${all[@]##*/}"
sel=$(mktemp -d)
log=$sel.log
trap 'rm -rf "$sel" "$log"' EXIT
files=()
for name in "$@"; do
	[[ $name == *.txt && $name != */* && -f $dir/$name ]] || die "$name: not a requirement file in $dir (one of: ${all[*]##*/})"
	if [ -n "${KERNELS:-}" ]; then
		"$here/check-constraints.py" --select-kernels "$KERNELS" "$dir/$name" > "$sel/$name"
	else
		cp "$dir/$name" "$sel/$name"
	fi
	grep -q '^[A-Za-z0-9][A-Za-z0-9._-]*==' "$sel/$name" && files+=("$sel/$name")
done
if [ ${#files[@]} -eq 0 ]; then
	rm -rf "$out"
	echo "e2b-ci: pip-download: nothing to download (kernels=${KERNELS:-}: $*)"
	exit 0
fi

case $release in
trixie) pyver=3.13 ;;
bookworm) pyver=3.11 ;;
noble) pyver=3.12 ;;
*) die "release=$release: unknown CPython version" ;;
esac
py=/usr/bin/python3
$py -m pip --version > /dev/null 2>&1 || die "needs pip on the build host (apt-get install python3-pip)"
cache=${CACHE:+$CACHE/pip-wheels}
cache=${cache:-$(dirname "$out")/pip-cache}
offline=${OFFLINE:-0}

# A local wheel directory from the host's environment never stands in for the
# index or the cache; the rest of pip's configuration (certificates, proxies) applies.
pipenv=(env -u PIP_FIND_LINKS -u PIP_NO_INDEX -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL
	-u PIP_REQUIRE_HASHES -u PIP_ONLY_BINARY -u PIP_NO_BINARY PYTHONHASHSEED=0)
target=(--require-hashes --no-deps --only-binary :all:
	--implementation cp --python-version "$pyver" --abi "cp${pyver/./}"
	--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
	--platform manylinux_2_28_x86_64 --platform manylinux_2_5_x86_64
	--platform manylinux1_x86_64 --platform linux_x86_64)

# pip's failure, said with the package and the file: $1 file, $2 pip's output.
explain() {
	local f=$1 log=$2 name
	tail -n 15 "$log" >&2
	if name=$(grep -o -m1 'No matching distribution found for [^ ]*' "$log"); then
		name=${name##* }
		if [ "$3" = cache ]; then
			die "$(basename "$f"): $name: no wheel for CPython $pyver in the cache $cache (offline=1 needs one online build first); stopping before mkosi"
		fi
		die "$(basename "$f"): $name: the index has no wheel of it for CPython $pyver manylinux x86_64 (sdist only?); stopping before mkosi"
	fi
	if grep -q 'DO NOT MATCH THE HASHES' "$log"; then
		name=$(grep -A3 'DO NOT MATCH THE HASHES' "$log" | grep -o -m1 '^    [A-Za-z0-9._-]*==[^ ]*' | tr -d ' ')
		die "$(basename "$f"): ${name:-a wheel}: its hash is not one pinned in the file; stopping before mkosi"
	fi
	die "$(basename "$f"): pip download failed (see above); stopping before mkosi"
}

mkdir -p "$cache"
if [ "$offline" != 1 ]; then
	index=${PIP_INDEX:-$("${pipenv[@]}" $py -m pip config get global.index-url 2>/dev/null || true)}
	index=${index:-$($py -c 'from pip._internal.models.index import PyPI; print(PyPI.simple_url)')}
	# Fail in seconds, with the URL, when the index cannot be reached.
	first=$(grep -h -m1 -o '^[A-Za-z0-9][A-Za-z0-9._-]*==' "${files[0]}" | head -1)
	probe=${index%/}/${first%==}/
	if ! err=$(curl -sS -f -L --max-time 20 -o /dev/null "$probe" 2>&1); then
		die "package index unreachable: $probe: ${err:-error}; stopping before mkosi.
e2b-ci: pass pip_index=URL of a reachable index or mirror, or offline=1 to build from the wheel cache $cache"
	fi
	for f in "${files[@]}"; do
		"${pipenv[@]}" $py -m pip download --quiet --disable-pip-version-check --retries 2 --timeout 30 \
			--index-url "$index" "${target[@]}" --dest "$cache" -r "$f" > "$log" 2>&1 || explain "$f" "$log" index
	done
fi
rm -rf "$out"
mkdir -p "$out/wheels" "$out/constraints"
for f in "${files[@]}"; do
	"${pipenv[@]}" $py -m pip download --isolated --quiet --disable-pip-version-check \
		--no-index --find-links "$cache" "${target[@]}" --dest "$out/wheels" -r "$f" > "$log" 2>&1 \
		|| { rm -rf "$out"; explain "$f" "$log" cache; }
	install -m 0644 "$f" "$out/constraints/"
done
"$here/check-constraints.py" --wheels "$out/wheels" "${all[@]}" ||
	{ rm -rf "$out"; die "a wheel's requirements differ from its \`# requires:\` line (see above); stopping before mkosi"; }
echo "e2b-ci: pip-download: $(ls "$out/wheels" | wc -l) wheels of ${files[*]##*/} for CPython $pyver (cache $cache$([ "$offline" = 1 ] && echo ", offline"))"
