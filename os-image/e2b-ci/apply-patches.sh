#!/bin/bash
# apply-patches.sh SRC [PATCHES-FILE [PATCH-DIR]]
#
# Applies the patches listed in PATCHES to an unpacked e2b-dev/code-interpreter
# tree, in order. Each one is first tried with `patch --dry-run --fuzz=0`; the
# first that does not apply stops everything, with its name and patch's output.
# Exit: 0 all applied; 1 a patch does not apply; 2 usage or PATCHES format error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: apply-patches.sh SRC [PATCHES-FILE [PATCH-DIR]]}
list=${2:-$here/PATCHES}
dir=${3:-$(dirname "$list")/patches}

die() { local code=$1; shift; echo "e2b-ci: $*" >&2; exit "$code"; }

[ -d "$src" ] || die 2 "$src: not a directory"
[ -f "$list" ] || die 2 "$list: no such PATCHES file"

# Parse PATCHES: a name at column 0, its reason indented below it.
names=()
declare -A reason=()
current=
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
	lineno=$((lineno + 1))
	case $line in
	'' | '#'*) continue ;;
	[[:space:]]*)
		[ -n "$current" ] || die 2 "$list:$lineno: reason text before any patch name"
		reason[$current]+="${line#"${line%%[![:space:]]*}"} " ;;
	*)
		current=${line%%[[:space:]]*}
		[ "$current" = "$line" ] || die 2 "$list:$lineno: $current: the reason goes on the indented lines below the name"
		case $current in */* | *.patch) ;; *) die 2 "$list:$lineno: $current: not a .patch file name" ;; esac
		case $current in */*) die 2 "$list:$lineno: $current: give a bare file name from $dir" ;; esac
		[ -z "${reason[$current]+x}" ] || die 2 "$list:$lineno: $current: listed twice"
		reason[$current]=
		names+=("$current") ;;
	esac
done < "$list"

for name in "${names[@]}"; do
	[ -n "${reason[$name]// /}" ] || die 2 "$list: $name: no reason given"
	[ -f "$dir/$name" ] || die 2 "$list: $name: no such file in $dir"
done
shopt -s nullglob
for file in "$dir"/*.patch; do
	[ -n "${reason[$(basename "$file")]+x}" ] || die 2 "$file: not listed in $list"
done

for name in "${names[@]}"; do
	if ! out=$(patch -d "$src" -p1 --fuzz=0 --forward --batch --dry-run < "$dir/$name" 2>&1); then
		printf '%s\n' "$out" | sed 's/^/  /' >&2
		die 1 "patch $name no longer applies to $src (fuzz 0); refresh it against the pinned archive or drop it from $list"
	fi
	patch -d "$src" -p1 --fuzz=0 --forward --batch --quiet --no-backup-if-mismatch < "$dir/$name" \
		|| die 1 "patch $name: applying failed after a clean dry run"
	echo "e2b-ci: applied $name"
done
