#!/bin/bash
# Test helper: inside a fresh network+mount+pid namespace (see
# test_ci_stack.py), start the e2b-ci stack from TREE (stack.sh), then run the
# code in CASES (a JSON file) through the API server's POST /execute on
# 127.0.0.1:49999 (execute_client.py), and print what came back. Everything
# dies with the namespace.
set -u
tree=$1 cases=$2
here=$(dirname "$0")
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
. "$here/stack.sh"
if ! start_e2b_ci_stack "$tree" "$logs"; then
	echo "exec_stack: the API server never answered /health"
	tail -n 20 "$logs"/*.log
	exit 1
fi
/usr/bin/python3 "$here/execute_client.py" "$cases"
rc=$?
if [ $rc != 0 ]; then tail -n 20 "$logs"/*.log; fi
exit $rc
