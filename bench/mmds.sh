#!/usr/bin/env bash
# mmds-serve against nginx serving the same JSON as a static file, same run.
#
# wrk on loopback, GET / with a valid MMDS token header and Accept:
# application/json, keep-alive (wrk's default). Fairness: mmds-serve is
# single-threaded, so nginx runs one worker (worker_processes 1), access log
# off, sendfile on; with BENCH_PIN=1 both servers are pinned to CPU 1 and wrk
# to CPU 0 (off by default: on a shared machine pinning starves both). The
# two are measured in alternating rounds and the medians compared, so a load
# burst from elsewhere on the machine does not land on one side only. Both listen on
# their own 127.0.0.x address in the root namespace on an ephemeral port.
# Then 400 greedy readers (BENCH_GREEDY connections, each pipelining
# BENCH_PIPELINE requests and reading every answer as fast as it can) on
# each server, once. Prints req/s and p99 ratios (mmds-serve / nginx), the
# load average before and after, and mmds-serve's peak RSS (VmHWM) over the
# whole run. Targets: >= 1.2x throughput, p99 <= nginx's, peak RSS <= 40 MiB
# under the 400 greedy readers.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
DURATION=${BENCH_DURATION:-4s}   # per round
ROUNDS=${BENCH_ROUNDS:-5}        # alternating rounds; medians reported
CONNECTIONS=${BENCH_CONNECTIONS:-32}
GREEDY=${BENCH_GREEDY:-400}      # connections of the greedy phase
PIPELINE=${BENCH_PIPELINE:-16}   # requests each greedy reader keeps in flight
bin=$BUILD/mmds-serve
[ -x "$bin" ] || { echo "bench/mmds.sh: $bin missing: run make tools" >&2; exit 1; }
for t in wrk nginx curl; do
	command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { echo "bench/mmds.sh: $t missing (make deps)" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

PIN_SERVER= PIN_CLIENT=
if [ "${BENCH_PIN:-0}" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	PIN_SERVER="taskset -c 1" PIN_CLIENT="taskset -c 0"
fi

tmp=$(mktemp -d)
chmod 755 "$tmp" # nginx workers run as www-data
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# An envd-shaped document.
mkdir -p -m 755 "$tmp/doc" "$tmp/www" "$tmp/nginx"
printf '%s' "e2b-bench-token" | sha512sum | cut -d' ' -f1 > "$tmp/hash"
cat > "$tmp/doc/document.json" <<JSON
{"instanceID":"ibench0000000000","envID":"base-template-0001","address":"http://10.0.0.1:30006","accessTokenHash":"$(cat "$tmp/hash")"}
JSON
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(json.dumps(d,sort_keys=True,separators=(",",":")))' \
	"$tmp/doc/document.json" "$tmp/www/index.json"

mport=$(free_port)
nport=$(free_port)
$PIN_SERVER "$bin" --listen "127.0.0.2:$mport" --document "$tmp/doc/document.json" 2>"$tmp/mmds.log" &
mpid=$!
pids+=("$mpid")

cat > "$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nodelay on;
	keepalive_requests 100000000;
	keepalive_timeout 60s;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen 127.0.0.3:$nport;
		root $tmp/www;
		default_type application/json;
		location = / { try_files /index.json =404; }
	}
}
CONF
$PIN_SERVER "$NGINX" -e "$tmp/nginx/error.log" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
npid=$!
pids+=("$npid")

for i in $(seq 100); do
	curl -sf -o /dev/null "http://127.0.0.3:$nport/" && \
	curl -sf -o /dev/null -X PUT -H 'X-metadata-token-ttl-seconds: 21600' "http://127.0.0.2:$mport/latest/api/token" && break
	sleep 0.05
done
token=$(curl -sf -X PUT -H 'X-metadata-token-ttl-seconds: 21600' "http://127.0.0.2:$mport/latest/api/token")
# Same bytes from both?
a=$(curl -sf -H "X-metadata-token: $token" -H 'Accept: application/json' "http://127.0.0.2:$mport/")
b=$(curl -sf "http://127.0.0.3:$nport/")
[ "$a" = "$b" ] || { echo "bench/mmds.sh: bodies differ: $a vs $b" >&2; exit 1; }

cat > "$tmp/token.lua" <<LUA
wrk.method = "GET"
wrk.headers["X-metadata-token"] = "$token"
wrk.headers["Accept"] = "application/json"
LUA
# A greedy reader: PIPELINE requests written at once, all answers read.
cat "$tmp/token.lua" - > "$tmp/greedy.lua" <<LUA
init = function(args)
	local r = {}
	for i = 1, $PIPELINE do r[i] = wrk.format() end
	batch = table.concat(r)
end
request = function() return batch end
LUA

# CPU time (user + system, clock ticks) of a server: mmds-serve, or nginx's
# master and its worker. Per request it is the figure a loaded machine
# disturbs least: CPU that others take delays a server, it does not bill it.
cpu_ticks() { # pid -> ticks of it and its children
	local p t=0
	for p in "$1" $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "$t"
}

run() { # url pid [connections [script]] -> "req/s p99_us cpu_us_per_request"
	local t0 t1
	t0=$(cpu_ticks "$2")
	$PIN_CLIENT wrk -t1 -c"${3:-$CONNECTIONS}" -d"$DURATION" --latency -s "${4:-$tmp/token.lua}" "$1" > "$tmp/wrk.out"
	t1=$(cpu_ticks "$2")
	/usr/bin/python3 - "$tmp/wrk.out" "$((t1 - t0))" "$(getconf CLK_TCK)" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
cpu_s = int(sys.argv[2]) / int(sys.argv[3])
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
scale = {"us": 1, "ms": 1000, "s": 1000000}[m.group(2)]
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
if errs:
    sys.exit(f"bench/mmds.sh: {errs.group(1)} error responses\n{out}")
n = int(re.search(r"(\d+) requests in", out).group(1))
print(rps, float(m.group(1)) * scale, cpu_s * 1e6 / n)
PY
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Warm both up, then alternate.
$PIN_CLIENT wrk -t1 -c"$CONNECTIONS" -d2s -s "$tmp/token.lua" "http://127.0.0.2:$mport/" >/dev/null
$PIN_CLIENT wrk -t1 -c"$CONNECTIONS" -d2s -s "$tmp/token.lua" "http://127.0.0.3:$nport/" >/dev/null
: > "$tmp/results"
for r in $(seq "$ROUNDS"); do
	echo "mmds $(run "http://127.0.0.2:$mport/" "$mpid")" >> "$tmp/results"
	echo "nginx $(run "http://127.0.0.3:$nport/" "$npid")" >> "$tmp/results"
done
echo "greedy-mmds $(run "http://127.0.0.2:$mport/" "$mpid" "$GREEDY" "$tmp/greedy.lua")" >> "$tmp/results"
echo "greedy-nginx $(run "http://127.0.0.3:$nport/" "$npid" "$GREEDY" "$tmp/greedy.lua")" >> "$tmp/results"
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$mpid/status")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

/usr/bin/python3 - "$tmp/results" "$rss_kb" "$CONNECTIONS" "$DURATION" "$ROUNDS" "$GREEDY" "$PIPELINE" \
	"$load_before" "$load_after" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
rss_kb = float(sys.argv[2])
conns, duration, rounds, greedy, pipeline, load_before, load_after = sys.argv[3:10]
def med(name, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == name)
m_rps, m_p99, n_rps, n_p99 = med("mmds", 1), med("mmds", 2), med("nginx", 1), med("nginx", 2)
m_cpu, n_cpu = med("mmds", 3), med("nginx", 3)
g_m, g_n = med("greedy-mmds", 1), med("greedy-nginx", 1)
print(f"mmds-serve vs nginx (1 worker), wrk -t1 -c{conns}, {rounds} alternating rounds of {duration},"
      " GET / with token, keep-alive; medians")
for r in rows:  # a pipelined batch's latency is not a request's: no p99 for the greedy phase
    p99 = f"p99 {float(r[2]):8.0f} us" if r[0] in ("mmds", "nginx") else ""
    print(f"    round: {r[0]:12s} {float(r[1]):10.0f} req/s  {float(r[3]):6.2f} us CPU/request  {p99}")
pairs = [float(m[1]) / float(n[1]) for m, n in zip([r for r in rows if r[0] == "mmds"], [r for r in rows if r[0] == "nginx"])]
print(f"  mmds-serve: {m_rps:10.0f} req/s   p99 {m_p99:8.0f} us   {m_cpu:6.2f} us CPU/request")
print(f"  nginx:      {n_rps:10.0f} req/s   p99 {n_p99:8.0f} us   {n_cpu:6.2f} us CPU/request")
print(f"  throughput ratio {m_rps/n_rps:.2f}x (target >= 1.2; round by round {min(pairs):.2f}-{max(pairs):.2f}x)"
      f"   p99 ratio {m_p99/n_p99:.2f} (target <= 1.0)   CPU per request {m_cpu/n_cpu:.2f}x nginx's")
print(f"  {greedy} greedy readers ({pipeline} pipelined each): mmds-serve {g_m:.0f} req/s, nginx {g_n:.0f} req/s"
      f" ({g_m/g_n:.2f}x);  mmds-serve peak RSS {rss_kb/1024:.2f} MiB"
      f" ({'ok' if rss_kb <= 40 * 1024 else 'OVER'}: target <= 40 MiB)")
print(f"  load average before {load_before}, after {load_after} ({__import__('os').cpu_count()} cores)")
PY
