#!/usr/bin/env bash
# Two real Flink 2.3 clusters autoscaled by ONE `flink-autoscaler run` process:
#
#   e2e/two-clusters.sh [--run-timeout S] [--settle S]
#
# 1. starts clusters A and B (e2e/flink.sh), submits the bottleneck job to each (bottleneck at
#    parallelism 1) and waits until both bottlenecks show;
# 2. starts a fake YARN ResourceManager (e2e/fake_rm.py) whose one RUNNING Flink application
#    registered cluster B's REST address;
# 3. runs `flink-autoscaler run --flink-url a=<A> --yarn-rm-url yarn=<fake RM> --metrics-addr ...`;
# 4. passes when, from Flink's own REST view, both bottlenecks were rescaled up, both jobs and all
#    their vertices are RUNNING and both sources' backpressure fell below --max-backpressure-after
#    and below half of its baseline; /livez and /readyz answer 200; /metrics has
#    flink_autoscaler_vertex_true_processing_rate_average_records_per_second series and flink_autoscaler_scalings_total >= 1 for both
#    jobs; and SIGTERM stops the autoscaler with exit status 0.
#
# Prints "e2e2: PASS" or "e2e2: FAIL: <reason>" (exit 1). Without java/javac it fails under CI=true
# and skips (exit 0, "SKIP: ...") elsewhere. Logs: e2e/out/two-clusters/ (or $E2E_OUT).
# Environment: FLINK_E2E_CACHE (shared download), AUTOSCALER_BIN (default target/debug/flink-autoscaler).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$E2E_DIR/.." && pwd)"
FLINK_SH="$E2E_DIR/flink.sh"
CACHE="${FLINK_E2E_CACHE:-$E2E_DIR/.cache}"
BIN="${AUTOSCALER_BIN:-$ROOT/target/debug/flink-autoscaler}"
RUN_TIMEOUT=420
SETTLE=30
MAX_BP_AFTER=200

say() { echo "e2e2: $*" >&2; }
fail() { echo "e2e2: FAIL: $*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --run-timeout) RUN_TIMEOUT="$2"; shift 2 ;;
        --settle) SETTLE="$2"; shift 2 ;;
        --max-backpressure-after) MAX_BP_AFTER="$2"; shift 2 ;;
        *) fail "unknown option $1" ;;
    esac
done

for tool in java javac; do
    if ! command -v "$tool" >/dev/null; then
        [[ "${CI:-}" == true ]] && fail "$tool not found (a JDK 17 is needed to run Flink 2.3)"
        echo "SKIP: $tool not found (a JDK 17 is needed to run Flink 2.3)"
        exit 0
    fi
done
for tool in python3 curl; do command -v "$tool" >/dev/null || fail "$tool not found"; done
[[ -x "$BIN" ]] || fail "$BIN not built (cargo build --bin flink-autoscaler)"

rest() { curl -sS -m 30 --noproxy '*' "$@"; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); r=eval(sys.argv[1]); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"; }
now_s() { date +%s; }
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

OUT="${E2E_OUT:-$E2E_DIR/out/two-clusters}"
rm -rf "$OUT"
mkdir -p "$OUT" "$CACHE"
T_START=$(now_s)
PORTS=()
RM_PID=""
AS_PID=""

cleanup() {
    local rc=$?
    for pid in "$AS_PID" "$RM_PID"; do
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
            sleep 1
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for p in ${PORTS[@]+"${PORTS[@]}"}; do
        [[ -d "$CACHE/cluster-$p/log" ]] && cp -r "$CACHE/cluster-$p/log" "$OUT/flink-log-$p" 2>/dev/null || true
        FLINK_E2E_PORT=$p "$FLINK_SH" stop || echo "e2e2: WARNING: could not stop the cluster on port $p" >&2
    done
    say "total $(( $(now_s) - T_START )) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Two clusters. Port choice and start take turns with other runs (the lock of run-e2e.sh).
exec 9>"$CACHE/.start.lock"
flock -w 900 9 || fail "waited 900 s for another run to start its cluster"
"$FLINK_SH" setup 9>&-
for ((p = 18081; p < 18181 && ${#PORTS[@]} < 2; p += 2)); do
    if port_free "$p" && port_free $((p + 1)); then
        t=$(now_s)
        FLINK_E2E_PORT=$p "$FLINK_SH" start >/dev/null 9>&-
        PORTS+=("$p")
        say "cluster on $p started in $(( $(now_s) - t )) s"
    fi
done
flock -u 9
exec 9>&-
((${#PORTS[@]} == 2)) || fail "no two free port pairs in 18081..18180"
URL_A="http://127.0.0.1:${PORTS[0]}"
URL_B="http://127.0.0.1:${PORTS[1]}"
JOB_A="$(FLINK_E2E_PORT=${PORTS[0]} "$FLINK_SH" submit --checkpoint-interval-ms 0)"
JOB_B="$(FLINK_E2E_PORT=${PORTS[1]} "$FLINK_SH" submit --checkpoint-interval-ms 0)"
say "jobs: A $JOB_A on $URL_A, B $JOB_B on $URL_B"

vertex() { rest "$1/jobs/$2" | json "[v['$4'] for v in d['vertices'] if v['name'].startswith('$3')][0]"; }
metric() { rest "$1/jobs/$2/vertices/$3/subtasks/metrics?get=$4&agg=${5:-avg}" | json "d[0]['${5:-avg}'] if d else -1"; }
declare -A SRC BOT P0 BP0
for side in A B; do
    url_var="URL_$side"; job_var="JOB_$side"
    SRC[$side]="$(vertex "${!url_var}" "${!job_var}" Source id)"
    BOT[$side]="$(vertex "${!url_var}" "${!job_var}" bottleneck id)"
    P0[$side]="$(vertex "${!url_var}" "${!job_var}" bottleneck parallelism)"
done
deadline=$(( $(now_s) + 240 ))
for side in A B; do
    url_var="URL_$side"; job_var="JOB_$side"
    while :; do
        busy="$(metric "${!url_var}" "${!job_var}" "${BOT[$side]}" busyTimeMsPerSecond)"
        bp="$(metric "${!url_var}" "${!job_var}" "${SRC[$side]}" backPressuredTimeMsPerSecond)"
        python3 -c "import sys; sys.exit(0 if $busy > 800 and $bp > 300 else 1)" && break
        (( $(now_s) < deadline )) || fail "bottleneck of $side never showed (busy=$busy, backpressure=$bp)"
        sleep 2
    done
    BP0[$side]="$bp"
    say "$side: bottleneck p=${P0[$side]} busy=$busy ms/s, source backpressured=$bp ms/s"
done

# 2. The fake ResourceManager, and a port for the metrics server.
pick_port() { local p; for ((p = $1; p < $1 + 200; p++)); do port_free "$p" && { echo "$p"; return; }; done; fail "no free port from $1"; }
RM_PORT="$(pick_port 18300)"
setsid python3 "$E2E_DIR/fake_rm.py" --port "$RM_PORT" --am-address "127.0.0.1:${PORTS[1]}" >"$OUT/fake-rm.log" 2>&1 &
RM_PID=$!
for _ in $(seq 1 50); do rest "http://127.0.0.1:$RM_PORT/ws/v1/cluster/apps" >/dev/null 2>&1 && break; sleep 0.2; done
METRICS_PORT="$(pick_port 18500)"
METRICS="http://127.0.0.1:$METRICS_PORT"

# 3. One autoscaler for both.
say "running the autoscaler (log: $OUT/autoscaler.log)"
setsid "$BIN" run --flink-url "a=$URL_A" --yarn-rm-url "yarn=http://127.0.0.1:$RM_PORT" \
    --config "$E2E_DIR/autoscaler.yaml" --state memory --metrics-addr "127.0.0.1:$METRICS_PORT" --metrics-detail vertex \
    >"$OUT/autoscaler.log" 2>&1 &
AS_PID=$!
T_CMD=$(now_s)
declare -A P1
deadline=$(( T_CMD + RUN_TIMEOUT ))
while :; do
    kill -0 "$AS_PID" 2>/dev/null || { tail -n 40 "$OUT/autoscaler.log" >&2; fail "the autoscaler exited"; }
    for side in A B; do
        url_var="URL_$side"; job_var="JOB_$side"
        if [[ -z "${P1[$side]:-}" ]]; then
            p="$(vertex "${!url_var}" "${!job_var}" bottleneck parallelism 2>/dev/null || echo "${P0[$side]}")"
            if (( p > P0[$side] )); then
                P1[$side]=$p
                say "$side: bottleneck parallelism ${P0[$side]} -> $p after $(( $(now_s) - T_CMD )) s"
            fi
        fi
    done
    [[ -n "${P1[A]:-}" && -n "${P1[B]:-}" ]] && break
    (( $(now_s) < deadline )) || { tail -n 40 "$OUT/autoscaler.log" >&2; fail "not both bottlenecks rescaled within ${RUN_TIMEOUT}s (A: ${P1[A]:-none}, B: ${P1[B]:-none})"; }
    sleep 2
done
sleep "$SETTLE"

# 4. Health and metrics while it runs.
for path in livez readyz; do
    code="$(curl -s -o /dev/null -w '%{http_code}' -m 10 --noproxy '*' "$METRICS/$path")"
    [[ "$code" == 200 ]] || fail "/$path answered $code"
done
rest "$METRICS/metrics" >"$OUT/metrics.txt"
for side in A B; do
    job_var="JOB_$side"
    grep -q "^flink_autoscaler_vertex_true_processing_rate_average_records_per_second{.*job_id=\"${!job_var}\"" "$OUT/metrics.txt" \
        || fail "/metrics has no flink_autoscaler_vertex_true_processing_rate_average_records_per_second series for job $side (${!job_var})"
    scalings="$(awk -v id="${!job_var}" '$1 ~ "^flink_autoscaler_scalings_total[{]" && index($1, "job_id=\"" id "\"") {print $2}' "$OUT/metrics.txt")"
    [[ -n "$scalings" ]] && python3 -c "import sys; sys.exit(0 if $scalings >= 1 else 1)" \
        || fail "flink_autoscaler_scalings_total of job $side is '${scalings}', expected >= 1"
    say "$side: /metrics scalings_total=$scalings"
done
grep -q '^flink_autoscaler_cycle_duration_seconds_bucket' "$OUT/metrics.txt" || fail "/metrics has no cycle duration histogram"

# SIGTERM: a clean stop.
kill -TERM -- "-$AS_PID" 2>/dev/null || kill -TERM "$AS_PID"
for _ in $(seq 1 60); do kill -0 "$AS_PID" 2>/dev/null || break; sleep 0.5; done
kill -0 "$AS_PID" 2>/dev/null && fail "the autoscaler ignored SIGTERM for 30 s"
wait "$AS_PID" && rc=0 || rc=$?
AS_PID=""
[[ "$rc" == 0 ]] || { tail -n 40 "$OUT/autoscaler.log" >&2; fail "the autoscaler exited $rc on SIGTERM"; }
grep -q "standalone autoscaler stopped" "$OUT/autoscaler.log" || fail "no clean-stop line in the log"

# Flink's own view of both jobs.
for side in A B; do
    url_var="URL_$side"; job_var="JOB_$side"
    details="$(rest "${!url_var}/jobs/${!job_var}")"
    [[ "$(echo "$details" | json 'd["state"]')" == RUNNING ]] || fail "job $side is not RUNNING"
    not_running="$(echo "$details" | json '",".join(v["name"] + "=" + v["status"] for v in d["vertices"] if v["status"] != "RUNNING")')"
    [[ -z "$not_running" ]] || fail "job $side: vertices not RUNNING: $not_running"
    bp="$(metric "${!url_var}" "${!job_var}" "${SRC[$side]}" backPressuredTimeMsPerSecond)"
    python3 -c "import sys; sys.exit(0 if 0 <= $bp <= $MAX_BP_AFTER and $bp < ${BP0[$side]} / 2 else 1)" \
        || fail "job $side: source backpressure did not fall: ${BP0[$side]} -> $bp ms/s"
    say "$side: bottleneck ${P0[$side]} -> ${P1[$side]}, source backpressure ${BP0[$side]} -> $bp ms/s"
done
# No secret, and both sources named in the startup line.
grep -q 'sources=\["a=flink:' "$OUT/autoscaler.log" || fail "startup line does not list the sources"
echo "e2e2: PASS (A ${P0[A]} -> ${P1[A]} via --flink-url, B ${P0[B]} -> ${P1[B]} via the fake YARN RM; metrics, health, SIGTERM ok)"
