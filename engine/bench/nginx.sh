# Shared by compare.sh and compare_h2.sh (sourced, not run): the engine's release build,
# a temporary directory removed on exit, the two pages, and a private nginx pinned to
# $SERVER_CPU (never the system service), stopped on exit.

# bench_setup: build the engine ($engine), make $work with www/600b.html and
# www/100k.html, and clean both up (and nginx, once started) on exit.
bench_setup() {
    (cd "$here" && cargo build --release --quiet)
    engine="$here/target/release/stacklab-load"
    work=$(mktemp -d /tmp/stacklab-bench.XXXXXX)
    nginx_pid=""
    trap bench_cleanup EXIT INT TERM
    mkdir -p "$work/www" "$work/tmp"
    python3 - "$work/www" <<'PY'
import sys
base = sys.argv[1]
open(f"{base}/600b.html", "w").write(("<p>stacklab</p>\n" * 64)[:599] + "\n")
open(f"{base}/100k.html", "w").write(("0123456789abcdef" * 6400)[:102399] + "\n")
PY
}

bench_cleanup() {
    if [[ -n "$nginx_pid" ]] && kill -0 "$nginx_pid" 2>/dev/null; then
        kill -QUIT "$nginx_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$nginx_pid" 2>/dev/null || true
        wait "$nginx_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_nginx SERVER_BLOCKS PORT...: one worker, sendfile off, no access log, the given
# server blocks (their root is $work/www); returns once every PORT accepts.
start_nginx() {
    local servers=$1 user_line="" p
    shift
    [[ $(id -u) -eq 0 ]] && user_line="user root;"
    cat > "$work/nginx.conf" <<CONF
$user_line
daemon off;
master_process on;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 8192; }
http {
    access_log off;
    sendfile off;
    keepalive_requests 10000000;
    keepalive_timeout 65;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    root $work/www;
$servers
}
CONF
    taskset -c "$SERVER_CPU" nginx -p "$work" -c "$work/nginx.conf" &
    nginx_pid=$!
    for p in "$@"; do
        for _ in $(seq 50); do
            python3 -c "import socket; socket.create_connection(('127.0.0.1', $p), 0.2)" 2>/dev/null && break
            sleep 0.1
        done
    done
}
