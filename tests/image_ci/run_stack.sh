#!/bin/bash
# Test helper: inside a fresh network+mount+pid namespace (see test_ci_image.py),
# start jupyter.service's and code-interpreter.service's commands from an
# e2b-ci image tree as uid 1000, with the tree's real envd on 127.0.0.1:49983,
# then print what the test checks. Everything dies with the namespace.
set -u
tree=$1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
. "$(dirname "$0")/stack.sh"
start_e2b_ci_stack "$tree" "$logs"
echo "HEALTH $(curl -sS http://127.0.0.1:49999/health)"
echo "CONTEXTS $(curl -sS http://127.0.0.1:49999/contexts)"
echo LISTEN-BEGIN
ss -Hltn
echo LISTEN-END
echo "--- jupyter log"; tail -5 "$logs/jupyter.log"
echo "--- server log"; tail -5 "$logs/server.log"
