#!/usr/bin/env bash
# Client CPU per completed request over HTTP/2: stacklab-load vs h2load (nghttp2) against a
# private nginx on loopback (server pinned to one CPU, clients to another), side by side
# in each round, and HTTP/1.1 keep-alive for reference (stacklab-load vs wrk vs ab).
#
#   engine/bench/compare_h2.sh            # 6 rounds x 5 s per tool and case
#   ROUNDS=1 DURATION=2 engine/bench/compare_h2.sh   # quick look
#
# Cases: h2c and h2 (TLS, ALPN) at CONNECTIONS=50 connections x STREAMS=10 streams, the
# 600-byte page. h2load runs with -t 1 -c 50 -m 10, stacklab-load with --threads 1 -c 50
# --streams 10. Needs nginx, h2load (nghttp2-client), wrk, ab, openssl, taskset and
# python3. Starts its own nginx (never the system service) and stops it on exit. Figures
# are medians over the rounds; the ratio per case is the median of the per-round ratios
# (each round runs both tools back to back, taking turns at running first, so that the
# run just after the previous case's load is not always the same tool's: keep ROUNDS
# even). The last line is the worst HTTP/2 case's ratio, to stay <= 1.0.
set -euo pipefail

ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-50}
STREAMS=${STREAMS:-10}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
here=$(cd "$(dirname "$0")/.." && pwd)

for tool in nginx h2load wrk ab openssl taskset python3; do
    command -v "$tool" >/dev/null || { echo "compare_h2.sh: '$tool' not found (apt-get install nginx nghttp2-client wrk apache2-utils openssl)" >&2; exit 2; }
done

. "$here/bench/nginx.sh"
bench_setup
port=$(free_port)
h2c_port=$(free_port)
tls_port=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
start_nginx "    server { listen 127.0.0.1:$port; }
    server { listen 127.0.0.1:$h2c_port http2; }
    server {
        listen 127.0.0.1:$tls_port ssl http2;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
    }" "$port" "$h2c_port" "$tls_port"

# run TOOL CASE: prints "rps completed cpu_seconds" for one measured run.
run() {
    local tool=$1 case=$2 url
    case $case in
        h2c-600B) url="http://127.0.0.1:$h2c_port/600b.html" ;;
        h2-600B) url="https://127.0.0.1:$tls_port/600b.html" ;;
        http1-600B) url="http://127.0.0.1:$port/600b.html" ;;
    esac
    local cmd=(taskset -c "$CLIENT_CPU")
    case $tool in
        stacklab-load)
            cmd+=("$engine" --threads 1 -c "$CONNECTIONS" -d "${DURATION}s" --json)
            case $case in
                h2c-*) cmd+=(--protocol h2c --streams "$STREAMS") ;;
                h2-*) cmd+=(--protocol h2 --streams "$STREAMS" --insecure) ;;
            esac
            ;;
        h2load) cmd+=(h2load -t 1 -c "$CONNECTIONS" -m "$STREAMS" -D "$DURATION") ;;
        wrk) cmd+=(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s") ;;
        ab) cmd+=(ab -q -k -c "$CONNECTIONS" -t "$DURATION" -n 10000000) ;;
    esac
    cmd+=("$url")
    python3 - "$tool" "${cmd[@]}" <<'PY'
import json, re, resource, subprocess, sys
tool, cmd = sys.argv[1], sys.argv[2:]
out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode(errors="replace")
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
# Scraping h2load's, wrk's and ab's human output is acceptable only here, in the bench.
if tool == "stacklab-load":
    r = json.loads(out)
    completed, rps = r["requests"]["completed"], r["rps"]
    asked = r["config"]["protocol"]
    if r["protocol"] != asked or r["requests"]["failed"]:
        sys.exit(f"stacklab-load: {r['requests']['failed']} failed, protocol {r['protocol']} (asked {asked})")
elif tool == "h2load":
    completed = int(re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out).group(1))
    rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
    if not re.search(r"Application protocol: h2c?\b", out):
        sys.exit("h2load did not speak HTTP/2:\n" + out)
elif tool == "wrk":
    completed = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
else:
    completed = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
print(rps, completed, cpu)
PY
}

declare -A tools=([h2c-600B]="stacklab-load h2load" [h2-600B]="stacklab-load h2load"
                  [http1-600B]="stacklab-load wrk ab")
cases=(h2c-600B h2-600B http1-600B)
results="$work/results.txt"
: > "$results"
for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        order=(${tools[$case]})
        if (( round % 2 == 0 )); then    # every other round the other way round
            for ((i = ${#order[@]} - 1, j = 0; i > j; i--, j++)); do
                t=${order[i]}; order[i]=${order[j]}; order[j]=$t
            done
        fi
        for tool in "${order[@]}"; do
            line=$(run "$tool" "$case")
            echo "$round $case $tool $line" >> "$results"
            echo "round $round  $case  $tool: $line (rps completed cpu_s)" >&2
        done
    done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
us = {}
rps = {}
for rnd, case, tool, r, completed, cpu in rows:
    us.setdefault(case, {}).setdefault(tool, {})[rnd] = float(cpu) * 1e6 / max(int(completed), 1)
    rps.setdefault(case, {}).setdefault(tool, []).append(float(r))
print(f"{'case':<12}{'tool':<15}{'median rps':>12}{'cpu us/req':>12}")
worst = 0.0
for case in ["h2c-600B", "h2-600B", "http1-600B"]:
    for tool in us[case]:
        print(f"{case:<12}{tool:<15}{statistics.median(rps[case][tool]):>12.0f}"
              f"{statistics.median(us[case][tool].values()):>12.2f}")
    other = "h2load" if case.startswith("h2") else None
    if other:
        ratios = [us[case]["stacklab-load"][r] / us[case][other][r] for r in us[case][other]]
        ratio = statistics.median(ratios)
        worst = max(worst, ratio)
        print(f"{case:<12}ratio stacklab-load / h2load: median {ratio:.2f} "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f})")
    else:
        best = min(statistics.median(us[case][t].values()) for t in ("wrk", "ab"))
        print(f"{case:<12}ratio stacklab-load / best(ab, wrk): "
              f"{statistics.median(us[case]['stacklab-load'].values()) / best:.2f}")
print(f"worst HTTP/2 ratio to h2load: {worst:.2f} (keep <= 1.0)")
PY
