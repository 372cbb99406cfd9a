#!/usr/bin/env bash
# End-to-end harness: a real Flink 2.3 cluster, the bottleneck job, and an autoscaler command.
#
#   e2e/run-e2e.sh [OPTIONS] [--] COMMAND [ARGS...]
#   e2e/run-e2e.sh --placeholder          # manual rescale instead of an autoscaler (checks the harness)
#
# 1. setup + start the cluster (e2e/flink.sh), submit the job (bottleneck at parallelism 1);
# 2. wait until the bottleneck shows (bottleneck busy, source backpressured) and record the baseline;
# 3. run COMMAND for at most --run-timeout seconds. In its arguments @FLINK_URL@, @JOB_ID@,
#    @BOTTLENECK_ID@ and @SOURCE_ID@ are replaced, and the same values are exported as FLINK_URL,
#    JOB_ID, BOTTLENECK_ID, SOURCE_ID. Once the bottleneck's parallelism has gone up, the command
#    may keep running for --settle seconds more, then gets SIGTERM (the autoscaler is a daemon);
#    a command that exits by itself (e.g. the placeholder) is fine as long as it exits 0;
#    With --root-cause-check BIN, first `BIN bottleneck` classifies the job from its collected
#    metrics and must name the bottleneck vertex as the only bottleneck, held back: the source;
# 4. assert from Flink's own REST view: job RUNNING, every vertex RUNNING, bottleneck parallelism
#    above its initial value, source backpressure below --max-backpressure-after (ms/s) and below
#    half of the baseline;
# 5. always stop the cluster (trap EXIT).
#
# Exit: 0 = PASS (prints "e2e: PASS"), or SKIP (prints "SKIP: <reason>") only when java/javac are
# missing; non-zero with "e2e: FAIL: <reason>" otherwise. Logs: e2e/out/port-<port>/ (command.log,
# flink-log/), or $E2E_OUT.
#
# Options:
#   --rate N                   source rate, records/s (default 3000)
#   --work-us N                bottleneck cost per record, µs (default 1000 => capacity 1000/s per subtask)
#   --run-timeout S            max seconds for COMMAND to raise the parallelism (default 300)
#   --settle S                 seconds the command keeps running after the rescale, and metric settle
#                              time before the backpressure check (default 30)
#   --max-backpressure-after N source backPressuredTimeMsPerSecond allowed at the end (default 200)
#   --require-clean-shutdown   fail unless the command exits 0 on SIGTERM (it must handle it, e.g. the
#                              autoscaler finishing its cycle in flight); default: only reported
#   --job-arg ARG              extra argument for the job (repeatable), e.g. --job-arg --checkpoint-interval-ms --job-arg 0
#   --placeholder              COMMAND = `e2e/flink.sh rescale @JOB_ID@ bottleneck=4`
#   --root-cause-check BIN     before COMMAND, `BIN bottleneck --flink-url ... --job ...` (the
#                              flink-autoscaler binary) must name the bottleneck vertex as the root
#                              cause and the source as its backpressured victim; after the rescale
#                              its verdict is printed (not asserted)
# Environment: FLINK_E2E_CACHE, FLINK_E2E_PORT (default: first free even port from 18081), see flink.sh;
# E2E_OUT. Several runs may go at once (setup and start take turns via a lock in the cache dir).
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FLINK_SH="$E2E_DIR/flink.sh"
CACHE="${FLINK_E2E_CACHE:-$E2E_DIR/.cache}"

RATE=3000
WORK_US=1000
RUN_TIMEOUT=300
SETTLE=30
MAX_BP_AFTER=200
JOB_ARGS=()
CMD=()
REQUIRE_CLEAN_SHUTDOWN=0
ROOT_CAUSE_BIN=""

say() { echo "e2e: $*" >&2; }
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

while (($#)); do
    case "$1" in
        --rate) RATE="$2"; shift 2 ;;
        --work-us) WORK_US="$2"; shift 2 ;;
        --run-timeout) RUN_TIMEOUT="$2"; shift 2 ;;
        --settle) SETTLE="$2"; shift 2 ;;
        --max-backpressure-after) MAX_BP_AFTER="$2"; shift 2 ;;
        --job-arg) JOB_ARGS+=("$2"); shift 2 ;;
        --require-clean-shutdown) REQUIRE_CLEAN_SHUTDOWN=1; shift ;;
        --placeholder) CMD=("$FLINK_SH" rescale @JOB_ID@ bottleneck=4); shift ;;
        --root-cause-check) ROOT_CAUSE_BIN="$2"; shift 2 ;;
        --) shift; CMD=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        -*) fail "unknown option $1 (see --help)" ;;
        *) CMD=("$@"); break ;;
    esac
done
((${#CMD[@]})) || fail "no command given (see --help; --placeholder runs a manual rescale)"

# The only reason to skip: no JDK to run Flink or compile the job.
for tool in java javac; do
    if ! command -v "$tool" >/dev/null; then
        # In CI (CI=true) a missing tool is a failure; on a laptop the run skips, saying why.
        [[ "${CI:-}" == "true" ]] && fail "CI=true but $tool not found (a JDK 17 is needed to run Flink 2.3)"
        echo "SKIP: $tool not found (a JDK 17 is needed to run Flink 2.3)"
        exit 0
    fi
done
for tool in python3 curl; do
    command -v "$tool" >/dev/null || fail "$tool not found"
done

mkdir -p "$CACHE"
# Concurrent runs (e.g. parallel cargo tests) take turns for setup, port choice and start; the
# rest runs side by side. Released after `start`, or by the exit.
exec 9>"$CACHE/.start.lock"
flock -w 900 9 || fail "waited 900 s for another run-e2e.sh to start its cluster"
if [[ -z "${FLINK_E2E_PORT:-}" ]]; then
    # REST port P and RPC port P+1 must both be free.
    for ((p = 18081; p < 18181; p += 2)); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
            FLINK_E2E_PORT=$p
            break
        fi
    done
    [[ -n "${FLINK_E2E_PORT:-}" ]] || fail "no free port pair in 18081..18180"
fi
export FLINK_E2E_PORT
FLINK_URL="http://127.0.0.1:$FLINK_E2E_PORT"
rest() { curl -sS -m 30 --noproxy '*' "$@"; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); r=eval(sys.argv[1]); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"; }
now_s() { date +%s; }

OUT="${E2E_OUT:-$E2E_DIR/out/port-$FLINK_E2E_PORT}"
rm -rf "$OUT"
mkdir -p "$OUT"
CMD_PID=""
T_START=$(now_s)

cleanup() {
    local rc=$?
    if [[ -n "$CMD_PID" ]] && kill -0 "$CMD_PID" 2>/dev/null; then
        kill -TERM -- "-$CMD_PID" 2>/dev/null || true
        sleep 2
        kill -KILL -- "-$CMD_PID" 2>/dev/null || true
    fi
    local cluster="$CACHE/cluster-$FLINK_E2E_PORT"
    [[ -d "$cluster/log" ]] && cp -r "$cluster/log" "$OUT/flink-log" 2>/dev/null || true
    "$FLINK_SH" stop || echo "e2e: WARNING: could not stop the cluster on port $FLINK_E2E_PORT" >&2
    say "total $(( $(now_s) - T_START )) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 9>&-: the Flink daemons must not inherit the lock.
t=$(now_s); "$FLINK_SH" setup 9>&-; say "setup $(( $(now_s) - t )) s"
t=$(now_s); "$FLINK_SH" start >/dev/null 9>&-; say "start $(( $(now_s) - t )) s ($FLINK_URL)"
flock -u 9
exec 9>&-
t=$(now_s)
JOB_ID="$("$FLINK_SH" submit --rate "$RATE" --work-us "$WORK_US" ${JOB_ARGS[@]+"${JOB_ARGS[@]}"})"
say "submit $(( $(now_s) - t )) s, job $JOB_ID"

vertex() { rest "$FLINK_URL/jobs/$JOB_ID" | json "[v['$2'] for v in d['vertices'] if v['name'].startswith('$1')][0]"; }
metric() {
    local vid="$1" name="$2" agg="${3:-avg}"
    rest "$FLINK_URL/jobs/$JOB_ID/vertices/$vid/subtasks/metrics?get=$name&agg=$agg" | json "d[0]['$agg'] if d else -1"
}
SOURCE_ID="$(vertex Source id)"
BOTTLENECK_ID="$(vertex bottleneck id)"
P0="$(vertex bottleneck parallelism)"

# 2. The bottleneck must be visible before the autoscaler starts, or the test proves nothing.
t=$(now_s)
deadline=$(( t + 180 ))
while :; do
    busy="$(metric "$BOTTLENECK_ID" busyTimeMsPerSecond)"
    bp="$(metric "$SOURCE_ID" backPressuredTimeMsPerSecond)"
    if python3 -c "import sys; sys.exit(0 if $busy > 800 and $bp > 300 else 1)"; then break; fi
    (( $(now_s) < deadline )) || fail "bottleneck never showed (bottleneck busy=$busy, source backpressure=$bp)"
    sleep 2
done
BP_BEFORE="$bp"
say "bottleneck visible after $(( $(now_s) - t )) s: bottleneck p=$P0 busy=$busy ms/s, source backpressured=$bp ms/s"

# 2b. The root cause, from the autoscaler's own collection of the job's metrics.
root_cause() { "$ROOT_CAUSE_BIN" bottleneck --flink-url "$FLINK_URL" --job "$JOB_ID" --samples 3 --interval "5 s"; }
if [[ -n "$ROOT_CAUSE_BIN" ]]; then
    t=$(now_s)
    verdict="$(root_cause 2>"$OUT/root-cause.log")" || { cat "$OUT/root-cause.log" >&2; fail "root-cause check could not run"; }
    echo "$verdict" >"$OUT/root-cause-before.json"
    check="$(echo "$verdict" | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
e = d["explanation"] or {}
b, s = sys.argv[1], sys.argv[2]
v = e.get("vertices", {})
problems = []
if e.get("bottlenecks") != [b]:
    problems.append("bottlenecks %s, expected [%s]" % (e.get("bottlenecks"), b))
if v.get(s) != {"role": "backpressured", "bottleneck": b}:
    problems.append("source %s, expected backpressured by %s" % (v.get(s), b))
print("; ".join(problems) if problems else "ok: " + str(d["summary"]))
' "$BOTTLENECK_ID" "$SOURCE_ID")"
    [[ "$check" == ok:* ]] || fail "root cause: $check (verdict: $verdict)"
    say "root cause in $(( $(now_s) - t )) s: ${check#ok: }"
fi

# 3. Run the command.
export FLINK_URL JOB_ID BOTTLENECK_ID SOURCE_ID
ARGS=()
for a in "${CMD[@]}"; do
    a="${a//@FLINK_URL@/$FLINK_URL}"
    a="${a//@JOB_ID@/$JOB_ID}"
    a="${a//@BOTTLENECK_ID@/$BOTTLENECK_ID}"
    a="${a//@SOURCE_ID@/$SOURCE_ID}"
    ARGS+=("$a")
done
say "running: ${ARGS[*]} (log: $OUT/command.log)"
T_CMD=$(now_s)
# Own process group, so the command and its children can be stopped together.
setsid "${ARGS[@]}" >"$OUT/command.log" 2>&1 &
CMD_PID=$!

cmd_rc=""
rescaled_at=""
deadline=$(( T_CMD + RUN_TIMEOUT ))
while :; do
    if [[ -z "$cmd_rc" ]] && ! kill -0 "$CMD_PID" 2>/dev/null; then
        wait "$CMD_PID" && cmd_rc=0 || cmd_rc=$?
        say "command exited with $cmd_rc after $(( $(now_s) - T_CMD )) s"
        if [[ "$cmd_rc" != 0 ]]; then
            tail -n 40 "$OUT/command.log" >&2 || true
            fail "command exited with status $cmd_rc"
        fi
    fi
    if [[ -z "$rescaled_at" ]]; then
        p="$(vertex bottleneck parallelism 2>/dev/null || echo "$P0")"
        if (( p > P0 )); then
            rescaled_at=$(now_s)
            say "bottleneck parallelism $P0 -> $p after $(( rescaled_at - T_CMD )) s"
        fi
    fi
    [[ -n "$rescaled_at" ]] && (( $(now_s) >= rescaled_at + SETTLE )) && break
    if (( $(now_s) >= deadline )); then
        tail -n 40 "$OUT/command.log" >&2 || true
        fail "bottleneck parallelism still $P0 after ${RUN_TIMEOUT}s of the command"
    fi
    sleep 2
done
if [[ -z "$cmd_rc" ]] && kill -0 "$CMD_PID" 2>/dev/null; then
    say "stopping the command (SIGTERM)"
    kill -TERM -- "-$CMD_PID" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$CMD_PID" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$CMD_PID" 2>/dev/null; then
        kill -KILL -- "-$CMD_PID" 2>/dev/null || true
        say "WARNING: command ignored SIGTERM for 15 s, killed"
    fi
    wait "$CMD_PID" 2>/dev/null && cmd_rc=0 || cmd_rc=$?
    say "command stopped (status $cmd_rc)"
    if ((REQUIRE_CLEAN_SHUTDOWN)) && [[ "$cmd_rc" != 0 ]]; then
        tail -n 40 "$OUT/command.log" >&2 || true
        fail "command did not shut down cleanly on SIGTERM (status $cmd_rc)"
    fi
fi
CMD_PID=""

if [[ -n "$ROOT_CAUSE_BIN" ]]; then
    after="$(root_cause 2>>"$OUT/root-cause.log" || true)"
    echo "$after" >"$OUT/root-cause-after.json"
    say "root cause after the rescale: $(echo "$after" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["summary"])' 2>/dev/null || echo unavailable)"
fi

# 4. Flink's own view.
details="$(rest "$FLINK_URL/jobs/$JOB_ID")"
state="$(echo "$details" | json 'd["state"]')"
[[ "$state" == RUNNING ]] || fail "job is $state, expected RUNNING"
not_running="$(echo "$details" | json '",".join(v["name"] + "=" + v["status"] for v in d["vertices"] if v["status"] != "RUNNING")')"
[[ -z "$not_running" ]] || fail "vertices not RUNNING: $not_running"
P1="$(echo "$details" | json "[v['parallelism'] for v in d['vertices'] if v['name'].startswith('bottleneck')][0]")"
(( P1 > P0 )) || fail "bottleneck parallelism is $P1, expected above $P0"
BP_AFTER="$(metric "$SOURCE_ID" backPressuredTimeMsPerSecond)"
BUSY_AFTER="$(metric "$BOTTLENECK_ID" busyTimeMsPerSecond)"
RATE_AFTER="$(metric "$SOURCE_ID" numRecordsOutPerSecond sum)"
say "after: bottleneck p=$P1 busy avg=$BUSY_AFTER ms/s, source backpressured=$BP_AFTER ms/s (before $BP_BEFORE), source rate=$RATE_AFTER/s"
python3 -c "import sys; sys.exit(0 if 0 <= $BP_AFTER <= $MAX_BP_AFTER and $BP_AFTER < $BP_BEFORE / 2 else 1)" \
    || fail "source backpressure did not fall: $BP_BEFORE -> $BP_AFTER ms/s (allowed <= $MAX_BP_AFTER and < half)"
echo "e2e: PASS (bottleneck $P0 -> $P1, source backpressure $BP_BEFORE -> $BP_AFTER ms/s)"
