#!/usr/bin/env bash
# Prints the path of a `go` that can switch toolchains (Go 1.21 or newer, so
# GOTOOLCHAIN=go1.N.M fetches the pinned one): `go` on PATH first, then
# /usr/local/go and Debian's versioned /usr/lib/go-1.N (bookworm's golang-go
# is 1.19, too old; make deps installs golang-1.23-go from backports there).
# Exit 1, saying so, when there is none.
set -u
candidates=()
p=$(command -v go 2>/dev/null) && candidates+=("$p")
candidates+=(/usr/local/go/bin/go)
for d in $(ls -d /usr/lib/go-1.* 2>/dev/null | sort -V -r); do candidates+=("$d/bin/go"); done
for go in "${candidates[@]}"; do
    [ -x "$go" ] || continue
    v=$(GOTOOLCHAIN=local "$go" env GOVERSION 2>/dev/null) || continue
    minor=${v#go1.}
    minor=${minor%%.*}
    case "$minor" in ''|*[!0-9]*) continue ;; esac
    if [ "$minor" -ge 21 ]; then
        echo "$go"
        exit 0
    fi
done
echo "find-go: no Go 1.21 or newer (tried: ${candidates[*]}); \`make deps\` installs one" >&2
exit 1
