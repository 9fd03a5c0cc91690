#!/usr/bin/env bash
# Client CPU per completed request: stacklab-load vs wrk vs ab vs the floor against
# a private nginx on loopback (server pinned to one CPU, clients to another).
#
#   engine/bench/compare.sh            # 5 rounds x 5 s per tool and case
#   ROUNDS=1 DURATION=2 engine/bench/compare.sh   # quick look
#
# The floor is bench/floor.c, compiled here with cc: one thread, epoll, one write and
# (for a page that fits its buffer) one read per request on the same connections — the
# syscalls the engine makes, and nothing else. A regression shows as a ratio to it,
# whatever the machine's speed that day.
#
# Needs nginx, wrk, ab (apache2-utils), cc, taskset and python3. Starts its own
# nginx from a config in a temporary directory (never the system service) and
# stops it on exit. Figures are medians over the rounds. The last two lines are the
# worst ratios over the three cases: stacklab-load / best of (ab, wrk), to stay
# <= 1.0, and stacklab-load / floor, to stay <= 1.1. On a shared machine run it
# when it is quiet: other work on the client CPU lands in every tool's figure.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
here=$(cd "$(dirname "$0")/.." && pwd)

for tool in nginx wrk ab cc taskset python3; do
    command -v "$tool" >/dev/null || { echo "compare.sh: '$tool' not found (apt-get install nginx wrk apache2-utils gcc)" >&2; exit 2; }
done

. "$here/bench/nginx.sh"
bench_setup
floor="$work/floor"
cc -O2 -Wall -o "$floor" "$here/bench/floor.c"
port=$(free_port)
start_nginx "    server { listen 127.0.0.1:$port; }" "$port"

# run TOOL CASE: prints "rps completed cpu_seconds" for one measured run.
run() {
    local tool=$1 case=$2 path keep url
    case $case in
        keepalive-600B) path=600b.html keep=1 ;;
        close-600B) path=600b.html keep=0 ;;
        keepalive-100KB) path=100k.html keep=1 ;;
    esac
    url="http://127.0.0.1:$port/$path"
    local cmd=(taskset -c "$CLIENT_CPU")
    case $tool in
        stacklab-load)
            cmd+=("$engine" --threads 1 -c "$CONNECTIONS" -d "${DURATION}s" --json)
            [[ $keep == 0 ]] && cmd+=(--no-keepalive)
            ;;
        wrk)
            cmd+=(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s")
            [[ $keep == 0 ]] && cmd+=(-H 'Connection: close')
            ;;
        ab)
            cmd+=(ab -q -c "$CONNECTIONS" -t "$DURATION" -n 10000000)
            [[ $keep == 1 ]] && cmd+=(-k)
            ;;
    esac
    cmd+=("$url")
    [[ $tool == floor ]] && cmd=(taskset -c "$CLIENT_CPU" "$floor" "$port" "/$path" "$CONNECTIONS" "$DURATION" "$keep")
    python3 - "$tool" "${cmd[@]}" <<'PY'
import json, re, resource, subprocess, sys
tool, cmd = sys.argv[1], sys.argv[2:]
out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode(errors="replace")
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
# Scraping wrk's and ab's human output is acceptable only here, in the bench.
if tool == "stacklab-load":
    r = json.loads(out)
    completed, rps = r["requests"]["completed"], r["rps"]
elif tool == "floor":
    r = json.loads(out)
    completed, rps = r["completed"], r["rps"]
elif tool == "wrk":
    completed = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
else:
    completed = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
print(rps, completed, cpu)
PY
}

cases=(keepalive-600B close-600B keepalive-100KB)
tools=(stacklab-load wrk ab floor)
results="$work/results.txt"
: > "$results"
for round in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        for tool in "${tools[@]}"; do
            line=$(run "$tool" "$case")
            echo "$round $case $tool $line" >> "$results"
            echo "round $round  $case  $tool: $line (rps completed cpu_s)" >&2
        done
    done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
data = {}
for rnd, case, tool, rps, completed, cpu in rows:
    d = data.setdefault(case, {}).setdefault(tool, {"rps": [], "us": []})
    d["rps"].append(float(rps))
    d["us"].append(float(cpu) * 1e6 / max(int(completed), 1))
worst_best, worst_floor = 0.0, 0.0
print(f"{'case':<17}{'tool':<15}{'median rps':>12}{'cpu us/req':>12}")
for case in ["keepalive-600B", "close-600B", "keepalive-100KB"]:
    med = {t: (statistics.median(v["rps"]), statistics.median(v["us"])) for t, v in data[case].items()}
    for tool in ["stacklab-load", "wrk", "ab", "floor"]:
        print(f"{case:<17}{tool:<15}{med[tool][0]:>12.0f}{med[tool][1]:>12.2f}")
    engine = med["stacklab-load"][1]
    to_best = engine / min(med["wrk"][1], med["ab"][1])
    to_floor = engine / med["floor"][1]
    worst_best, worst_floor = max(worst_best, to_best), max(worst_floor, to_floor)
    print(f"{case:<17}ratio stacklab-load / best(ab, wrk): {to_best:.2f}   stacklab-load / floor: {to_floor:.2f}")
print(f"worst ratio to best(ab, wrk): {worst_best:.2f} (keep <= 1.0)")
print(f"worst ratio to the floor: {worst_floor:.2f} (keep <= 1.1)")
PY
