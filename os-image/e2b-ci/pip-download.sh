#!/bin/bash
# pip-download.sh CONSTRAINTS-DIR OUT RELEASE   (pydeps=pip, called by prepare.sh)
#
# Checks every constraints/*.txt (fully pinned and hashed), then downloads
# exactly those wheels for the image's CPython into OUT/wheels with
# --require-hashes, before mkosi runs. mkosi.postinst installs them offline.
# The index is the build's choice: PIP_INDEX (from pip_index= or
# PIP_INDEX_URL); nothing is assumed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?constraints dir} out=${2:?output dir} release=${3:?release}

die() { echo "e2b-ci: pydeps=pip: $*" >&2; exit 1; }

shopt -s nullglob
files=("$dir"/*.txt)
[ ${#files[@]} -gt 0 ] || die "no requirement files in $dir"
"$here/check-constraints.py" "${files[@]}" || die "constraints are not fully pinned and hashed (see above)"

case $release in
trixie) pyver=3.13 ;;
bookworm) pyver=3.11 ;;
noble) pyver=3.12 ;;
*) die "release=$release: unknown CPython version" ;;
esac
index=${PIP_INDEX:-}
[ -n "$index" ] || die "no package index: pass pip_index=URL (a PEP 503 simple index) or set PIP_INDEX_URL"
/usr/bin/python3 -m pip --version > /dev/null 2>&1 || die "needs pip on the build host (apt-get install python3-pip)"

# Fail in seconds, with the URL, when the index cannot be reached.
first=$(grep -h -m1 -o '^[A-Za-z0-9][A-Za-z0-9._-]*==' "${files[0]}" | head -1)
first=${first%==}
probe=${index%/}/$first/
if ! err=$(curl -sS -f -L --max-time 20 -o /dev/null "$probe" 2>&1); then
	die "package index unreachable: $probe: ${err:-error}; stopping before mkosi.
e2b-ci: use the default pydeps=debian, or pip_index=URL of a reachable index or mirror"
fi

mkdir -p "$out/wheels" "$out/constraints"
for f in "${files[@]}"; do
	PYTHONHASHSEED=0 /usr/bin/python3 -m pip download --isolated --quiet --disable-pip-version-check \
		--no-cache-dir --retries 1 --timeout 20 --index-url "$index" \
		--require-hashes --no-deps --only-binary :all: \
		--implementation cp --python-version "$pyver" --abi "cp${pyver/./}" \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_5_x86_64 \
		--platform manylinux1_x86_64 --platform linux_x86_64 \
		--dest "$out/wheels" -r "$f" || die "$(basename "$f"): download failed (see above)"
	install -m 0644 "$f" "$out/constraints/"
done
echo "e2b-ci: pydeps=pip: $(ls "$out/wheels" | wc -l) wheels for CPython $pyver"
