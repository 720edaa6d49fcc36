#!/bin/sh
# Build the envd test stand-in reproducibly: static, no build id, no paths.
# Usage: tests/envd-standin/build.sh OUTPUT   (GOCACHE under build/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$1
export GOCACHE="$top/build/go-cache" GOPATH="$top/build/go-path" GOFLAGS=-mod=mod \
       CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GO111MODULE=on GOTOOLCHAIN=local
cd "$here"
exec go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$out" .
