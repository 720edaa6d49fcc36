# Sourced by the benchmarks that fetch from loopback (bench/pinfetch.sh,
# bench/pintree.sh): one nginx serving a directory of static files.
#
#   start_loopback_nginx WORKDIR ROOT FILE
#
# serves ROOT on a free 127.0.0.1 port with nginx's state in WORKDIR, waits
# until FILE (a path under ROOT) is served, and sets NGINX_PID and PORT. The
# caller's cleanup kills NGINX_PID.
start_loopback_nginx() {
	local work=$1 root=$2 probe=$3
	mkdir -p "$work/nginx-tmp"
	PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	cat > "$work/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	client_body_temp_path $work/nginx-tmp/body;
	proxy_temp_path $work/nginx-tmp/proxy;
	fastcgi_temp_path $work/nginx-tmp/fastcgi;
	uwsgi_temp_path $work/nginx-tmp/uwsgi;
	scgi_temp_path $work/nginx-tmp/scgi;
	default_type application/octet-stream;
	server { listen 127.0.0.1:$PORT; root $root; }
}
CONF
	nginx -p "$work" -c "$work/nginx.conf" &
	NGINX_PID=$!
	for _ in $(seq 50); do
		curl -sf -o /dev/null -r 0-0 "http://127.0.0.1:$PORT/$probe" && return 0
		sleep 0.1
	done
	echo "bench: nginx did not come up on 127.0.0.1:$PORT (see $work/nginx-error.log)" >&2
	return 1
}
