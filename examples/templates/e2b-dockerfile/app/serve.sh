#!/bin/sh
# The example's start command: static/ on port $1, the template's GREETING first.
set -e
echo "$GREETING" > /tmp/greeting.txt
exec python3 -m http.server "${1:?a port}" --bind 0.0.0.0 --directory /opt/app/static
