#!/usr/bin/env bash
# A real Apache Flink 2.3.0 session cluster on 127.0.0.1 for the autoscaler's end-to-end tests.
#
#   e2e/flink.sh setup                 download the PyPI wheels (once) and assemble FLINK_HOME (once)
#   e2e/flink.sh start                 start JobManager + TaskManager, wait until REST shows all slots
#   e2e/flink.sh submit [JOB ARGS...]  build + submit e2e/job (BottleneckJob), wait until RUNNING, print the job id
#   e2e/flink.sh stop                  stop what `start` started (by recorded PID), verify it is gone
#   e2e/flink.sh status                print the cluster's state file, exit 1 if it is not running
#   e2e/flink.sh rescale JOB VERTEX_NAME=N ...   PUT /jobs/JOB/resource-requirements (upper bounds), others unchanged
#   e2e/flink.sh wait-parallelism JOB VERTEX_NAME N [TIMEOUT_S]   wait until the vertex runs at N, all RUNNING
#   e2e/flink.sh vertex-metric JOB VERTEX_NAME METRIC [AGG]       one aggregated subtask metric (default agg: avg)
#   e2e/flink.sh vertices JOB          one line per vertex: id, parallelism, status, name
#   e2e/flink.sh set-rate N            change the source rate of running jobs (0 pauses); read within ~1 s
#
# Environment (all optional):
#   FLINK_E2E_CACHE   where wheels, FLINK_HOME, the job jar and cluster dirs live (default: e2e/.cache)
#   FLINK_E2E_PORT    REST port (default 18081); the RPC port is PORT+1
#   FLINK_E2E_SLOTS   task slots of the single TaskManager (default 8)
#   FLINK_E2E_START_TIMEOUT  seconds to wait for REST after start (default 300)
# Each step's comment says which Flink fact or gotcha it works around.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${FLINK_E2E_CACHE:-$E2E_DIR/.cache}"
FLINK_VERSION=2.3.0
WHEEL_DIR="$CACHE/wheels"
FLINK_HOME="$CACHE/flink-$FLINK_VERSION"
PORT="${FLINK_E2E_PORT:-18081}"
RPC_PORT=$((PORT + 1))
SLOTS="${FLINK_E2E_SLOTS:-8}"
START_TIMEOUT="${FLINK_E2E_START_TIMEOUT:-300}"
CLUSTER="$CACHE/cluster-$PORT"
STATE="$CLUSTER/state.env"
REST="http://127.0.0.1:$PORT"
JOB_SRC="$E2E_DIR/job/src"
JOB_JAR="$CACHE/job/autoscaler-e2e-job.jar"

log() { echo "flink.sh: $*" >&2; }
die() { echo "flink.sh: ERROR: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# curl against the cluster: loopback only, every call bounded.
rest() { curl -sS -m 30 --noproxy '*' "$@"; }

# Evaluates a Python expression over the JSON document on stdin (bound to `d`); prints the result.
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); r=eval(sys.argv[1]); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"; }

# ---------------------------------------------------------------------------------------------
# setup: wheels -> FLINK_HOME
# ---------------------------------------------------------------------------------------------
cmd_setup() {
    command -v python3 >/dev/null || die "python3 is required (pip downloads the Flink wheels)"
    mkdir -p "$CACHE"
    # One assembler at a time; the others wait and then find the home ready.
    exec 8>"$CACHE/.setup.lock"
    flock -w 1800 8 || die "waited 1800 s for another setup"
    if [[ -x "$FLINK_HOME/bin/jobmanager.sh" && -f "$FLINK_HOME/lib/flink-dist-$FLINK_VERSION.jar" \
          && -f "$FLINK_HOME/bin/bash-java-utils.jar" ]]; then
        log "FLINK_HOME already assembled: $FLINK_HOME"
        return 0
    fi
    mkdir -p "$WHEEL_DIR"
    if ! compgen -G "$WHEEL_DIR/apache_flink-$FLINK_VERSION-*.whl" >/dev/null \
        || ! compgen -G "$WHEEL_DIR/apache_flink_libraries-$FLINK_VERSION-*.whl" >/dev/null; then
        log "downloading apache-flink==$FLINK_VERSION and apache-flink-libraries==$FLINK_VERSION (~330 MB)"
        # --platform/--python-version: only the files are wanted, whatever the local Python is.
        timeout 1800 python3 -m pip download --quiet --no-deps --only-binary=:all: \
            --python-version 3.11 --platform manylinux2014_x86_64 -d "$WHEEL_DIR" \
            "apache-flink==$FLINK_VERSION" "apache-flink-libraries==$FLINK_VERSION" >&2 \
            || die "pip download of the Flink wheels failed"
    fi
    local tmp="$FLINK_HOME.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    log "assembling $FLINK_HOME"
    python3 - "$WHEEL_DIR" "$tmp" "$FLINK_VERSION" <<'PY'
import glob, os, sys, zipfile
wheels, home, version = sys.argv[1:4]
def extract(wheel, wanted):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith("/") or not any(name.startswith(p) for p in wanted):
                continue
            rel = name[len("pyflink/"):]
            dest = os.path.join(home, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as out:
                out.write(src.read())
# Scripts and default conf are in apache-flink; the jars (and bin/bash-java-utils.jar, which
# config.sh needs) are in apache-flink-libraries.
extract(glob.glob(f"{wheels}/apache_flink-{version}-*.whl")[0], ["pyflink/bin/", "pyflink/conf/"])
extract(glob.glob(f"{wheels}/apache_flink_libraries-{version}-*.whl")[0],
        ["pyflink/lib/", "pyflink/opt/", "pyflink/plugins/", "pyflink/bin/"])
PY
    chmod +x "$tmp"/bin/*
    mkdir -p "$tmp/log"
    rm -rf "$FLINK_HOME"
    mv "$tmp" "$FLINK_HOME"
    log "FLINK_HOME ready: $FLINK_HOME"
}

# ---------------------------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------------------------
pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# A PID counts as ours only if its command line names this cluster's directory (PIDs get reused).
pid_is_ours() { pid_alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$CLUSTER"; }

cmd_start() {
    command -v java >/dev/null || die "java is required"
    [[ -x "$FLINK_HOME/bin/jobmanager.sh" ]] || die "FLINK_HOME missing; run: $0 setup"
    if [[ -f "$STATE" ]]; then
        # shellcheck disable=SC1090
        source "$STATE"
        if pid_is_ours "${JM_PID:-}" && pid_is_ours "${TM_PID:-}"; then
            log "cluster already running on $REST"
            cat "$STATE"
            return 0
        fi
        log "stale state file (cluster not running), cleaning up"
        cmd_stop
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port $PORT is already in use; set FLINK_E2E_PORT to a free port"
    fi
    rm -rf "$CLUSTER"
    mkdir -p "$CLUSTER"/{conf,log,run,tmp,web,checkpoints,savepoints}
    cp "$FLINK_HOME"/conf/log4j*.properties "$CLUSTER/conf/"
    # Java 17 needs the --add-opens list of the distribution's own config.yaml.
    local java_opts
    java_opts="$(grep -E '^\s+all: ' "$FLINK_HOME/conf/config.yaml" | head -1 | sed -E 's/^\s+all: //')"
    [[ -n "$java_opts" ]] || die "could not read env.java.opts.all from $FLINK_HOME/conf/config.yaml"
    cat >"$CLUSTER/conf/config.yaml" <<EOF
env.java.opts.all: $java_opts
env.pid.dir: $CLUSTER/run
env.log.dir: $CLUSTER/log
io.tmp.dirs: $CLUSTER/tmp
web.tmpdir: $CLUSTER/web
web.upload.dir: $CLUSTER/web
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $RPC_PORT
jobmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $PORT
blob.server.port: 0
jobmanager.memory.process.size: 1024m
taskmanager.memory.process.size: 1536m
taskmanager.memory.managed.fraction: 0.1
taskmanager.numberOfTaskSlots: $SLOTS
parallelism.default: 1
# The rescale API (GET/PUT /jobs/:id/resource-requirements) exists only with the adaptive scheduler.
jobmanager.scheduler: adaptive
jobmanager.execution.failover-strategy: region
execution.checkpointing.dir: file://$CLUSTER/checkpoints
execution.checkpointing.savepoint-dir: file://$CLUSTER/savepoints
# Test timing: metrics and job details fresh within 1 s, rescales acted on within seconds.
metrics.fetcher.update-interval: 1000
web.refresh-interval: 1000
# (cooldown-after-rescaling is the current name of the deprecated scaling-interval.min; default 30s)
jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling: 5s
jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout: 10s
# Short checkpoints under backpressure, so a checkpoint-synchronized rescale does not wait ~25 s.
taskmanager.network.memory.buffer-debloat.enabled: true
EOF
    local t0
    t0=$(now_ms)
    log "starting JobManager + TaskManager ($SLOTS slots) on $REST"
    # The two start scripts each run a helper JVM; run them side by side. They daemonize.
    (FLINK_CONF_DIR="$CLUSTER/conf" FLINK_IDENT_STRING=e2e timeout 120 "$FLINK_HOME/bin/jobmanager.sh" start \
        >"$CLUSTER/log/jobmanager-start.out" 2>&1) &
    local jm_start=$!
    (FLINK_CONF_DIR="$CLUSTER/conf" FLINK_IDENT_STRING=e2e timeout 120 "$FLINK_HOME/bin/taskmanager.sh" start \
        >"$CLUSTER/log/taskmanager-start.out" 2>&1) &
    local tm_start=$!
    local rc=0
    wait "$jm_start" || rc=$?
    wait "$tm_start" || rc=$?
    local jm_pid tm_pid
    jm_pid="$(head -1 "$CLUSTER/run/flink-e2e-standalonesession.pid" 2>/dev/null || true)"
    tm_pid="$(head -1 "$CLUSTER/run/flink-e2e-taskexecutor.pid" 2>/dev/null || true)"
    cat >"$STATE" <<EOF
FLINK_HOME=$FLINK_HOME
REST_URL=$REST
JM_PID=$jm_pid
TM_PID=$tm_pid
EOF
    if [[ $rc -ne 0 || -z "$jm_pid" || -z "$tm_pid" ]]; then
        tail -n 20 "$CLUSTER"/log/*.out >&2 || true
        cmd_stop
        die "start scripts failed (rc=$rc)"
    fi
    local deadline=$(( $(date +%s) + START_TIMEOUT )) slots=""
    while :; do
        slots="$(rest "$REST/overview" 2>/dev/null | json 'd.get("slots-total", 0)' 2>/dev/null || true)"
        [[ "$slots" == "$SLOTS" ]] && break
        if ! pid_alive "$jm_pid" || ! pid_alive "$tm_pid" || (( $(date +%s) >= deadline )); then
            tail -n 30 "$CLUSTER"/log/*.log >&2 || true
            cmd_stop
            die "cluster did not become ready within ${START_TIMEOUT}s (slots-total=${slots:-none})"
        fi
        sleep 1
    done
    echo "STARTUP_MS=$(( $(now_ms) - t0 ))" >>"$STATE"
    log "ready in $(( $(now_ms) - t0 )) ms"
    cat "$STATE"
}

# ---------------------------------------------------------------------------------------------
# stop
# ---------------------------------------------------------------------------------------------
cmd_stop() {
    [[ -f "$STATE" ]] || { log "no cluster state at $STATE, nothing to stop"; return 0; }
    # shellcheck disable=SC1090
    source "$STATE"
    local pids=() p
    for p in "${JM_PID:-}" "${TM_PID:-}"; do
        if pid_is_ours "$p"; then pids+=("$p"); fi
    done
    if ((${#pids[@]})); then
        log "stopping PIDs ${pids[*]}"
        kill -TERM "${pids[@]}" 2>/dev/null || true
        local deadline=$(( $(date +%s) + 20 ))
        while (( $(date +%s) < deadline )); do
            local alive=0
            for p in "${pids[@]}"; do pid_alive "$p" && alive=1; done
            ((alive)) || break
            sleep 0.5
        done
        for p in "${pids[@]}"; do
            if pid_alive "$p"; then log "PID $p ignored SIGTERM, killing"; kill -KILL "$p" 2>/dev/null || true; fi
        done
        sleep 0.5
        for p in "${pids[@]}"; do
            pid_alive "$p" && die "PID $p is still alive after SIGKILL"
        done
    fi
    rm -f "$STATE"
    log "stopped"
}

cmd_status() {
    [[ -f "$STATE" ]] || { echo "not running (no $STATE)"; return 1; }
    # shellcheck disable=SC1090
    source "$STATE"
    cat "$STATE"
    pid_is_ours "${JM_PID:-}" && pid_is_ours "${TM_PID:-}"
}

# ---------------------------------------------------------------------------------------------
# submit: compile the job against flink-dist, upload, run
# ---------------------------------------------------------------------------------------------
build_job() {
    command -v javac >/dev/null || die "javac is required"
    local hash_file="$CACHE/job/source.sha256" hash
    mkdir -p "$CACHE/job"
    exec 7>"$CACHE/job/.build.lock"
    flock -w 600 7 || die "waited 600 s for another job build"
    hash="$(cat "$JOB_SRC"/e2e/*.java | sha256sum | cut -d' ' -f1)"
    if [[ -f "$JOB_JAR" && -f "$hash_file" && "$(cat "$hash_file")" == "$hash" ]]; then
        flock -u 7
        return 0
    fi
    log "compiling the e2e job"
    rm -rf "$CACHE/job/classes"
    mkdir -p "$CACHE/job/classes"
    timeout 300 javac --release 17 -nowarn -cp "$FLINK_HOME/lib/flink-dist-$FLINK_VERSION.jar" \
        -d "$CACHE/job/classes" "$JOB_SRC"/e2e/*.java >&2 || die "javac failed"
    timeout 120 jar --create --file "$JOB_JAR" --main-class e2e.BottleneckJob -C "$CACHE/job/classes" . >&2 \
        || die "jar failed"
    echo "$hash" >"$hash_file"
    flock -u 7
}

cmd_submit() {
    cmd_status >/dev/null || die "cluster is not running; run: $0 start"
    build_job
    local args_json upload jar_id run job_id t0 extra=()
    # Unless told otherwise the job follows this cluster's rate file, so `set-rate` can steer it.
    # A fresh submission starts at its --rate: a rate file left by an earlier set-rate is removed.
    if [[ " $* " != *" --rate-file "* ]]; then
        extra=(--rate-file "$CLUSTER/rate")
        rm -f "$CLUSTER/rate"
    fi
    args_json="$(python3 -c 'import json,sys; print(json.dumps({"programArgsList": sys.argv[1:]}))' "$@" ${extra[@]+"${extra[@]}"})"
    t0=$(now_ms)
    upload="$(rest -X POST -F "jarfile=@$JOB_JAR;type=application/x-java-archive" "$REST/jars/upload")" \
        || die "jar upload failed"
    jar_id="$(echo "$upload" | json 'd["filename"].rsplit("/",1)[-1]')" || die "unexpected upload answer: $upload"
    run="$(rest -X POST -H 'Content-Type: application/json' -d "$args_json" "$REST/jars/$jar_id/run")" \
        || die "jar run failed"
    job_id="$(echo "$run" | json 'd["jobid"]' 2>/dev/null)" || die "job did not start: $run"
    rest -X DELETE "$REST/jars/$jar_id" >/dev/null || true
    wait_all_running "$job_id" 120
    log "job $job_id RUNNING after $(( $(now_ms) - t0 )) ms"
    echo "$job_id"
}

# Waits until the job is RUNNING and every vertex is RUNNING.
wait_all_running() {
    local job="$1" timeout="$2" deadline state
    deadline=$(( $(date +%s) + timeout ))
    while :; do
        state="$(rest "$REST/jobs/$job" 2>/dev/null | json \
            'd["state"] + ("" if all(v["status"]=="RUNNING" for v in d["vertices"]) else "-partial")' 2>/dev/null || true)"
        [[ "$state" == "RUNNING" ]] && return 0
        case "$state" in FAILED|CANCELED|FINISHED) die "job $job is $state";; esac
        (( $(date +%s) < deadline )) || die "job $job not fully RUNNING within ${timeout}s (state=${state:-unknown})"
        sleep 0.5
    done
}

# ---------------------------------------------------------------------------------------------
# helpers for the harness and for manual checks
# ---------------------------------------------------------------------------------------------
# The id of the vertex whose name starts with $2 (names: "Source: rate-source", "bottleneck", "discard-sink: Writer").
vertex_id() {
    rest "$REST/jobs/$1" | json "[v['id'] for v in d['vertices'] if v['name'].startswith('$2')][0]" 2>/dev/null \
        || die "job $1 has no vertex named $2*"
}

cmd_vertices() {
    rest "$REST/jobs/$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("job", d["jid"], d["state"])
for v in d["vertices"]:
    print(v["id"], v["parallelism"], v["status"], v["name"])'
}

cmd_set_rate() {
    [[ "${1:-}" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "set-rate needs a number of records/s, got '${1:-}'"
    # Written to a temporary file and renamed, so the job never reads half a number.
    echo "$1" >"$CLUSTER/rate.tmp" && mv "$CLUSTER/rate.tmp" "$CLUSTER/rate"
}

cmd_vertex_metric() {
    local job="$1" name="$2" metric="$3" agg="${4:-avg}" vid
    vid="$(vertex_id "$job" "$name")"
    rest "$REST/jobs/$job/vertices/$vid/subtasks/metrics?get=$metric&agg=$agg" \
        | json "d[0]['$agg'] if d else 'n/a'"
}

cmd_rescale() {
    local job="$1"; shift
    local current body pair vid
    current="$(rest "$REST/jobs/$job/resource-requirements")"
    body="$current"
    for pair in "$@"; do
        vid="$(vertex_id "$job" "${pair%=*}")"
        body="$(echo "$body" | python3 -c '
import json, sys
d = json.load(sys.stdin)
d[sys.argv[1]]["parallelism"]["upperBound"] = int(sys.argv[2])
print(json.dumps(d))' "$vid" "${pair##*=}")"
    done
    # PUT must list every vertex; unchanged ones are copied from the GET.
    rest -X PUT -H 'Content-Type: application/json' -d "$body" "$REST/jobs/$job/resource-requirements" -w ' HTTP %{http_code}\n'
}

cmd_wait_parallelism() {
    local job="$1" name="$2" want="$3" timeout="${4:-120}" deadline got t0
    t0=$(now_ms)
    deadline=$(( $(date +%s) + timeout ))
    while :; do
        got="$(rest "$REST/jobs/$job" 2>/dev/null | json \
            "[str(v['parallelism']) + ('' if all(w['status']=='RUNNING' for w in d['vertices']) and d['state']=='RUNNING' else '-moving') for v in d['vertices'] if v['name'].startswith('$name')][0]" \
            2>/dev/null || true)"
        if [[ "$got" == "$want" ]]; then
            log "$name at parallelism $want, all RUNNING, after $(( $(now_ms) - t0 )) ms"
            return 0
        fi
        (( $(date +%s) < deadline )) || die "$name not at parallelism $want within ${timeout}s (now: ${got:-unknown})"
        sleep 0.5
    done
}

main() {
    local cmd="${1:-}"
    shift || true
    case "$cmd" in
        setup) cmd_setup ;;
        start) cmd_start ;;
        submit) cmd_submit "$@" ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        rescale) cmd_rescale "$@" ;;
        wait-parallelism) cmd_wait_parallelism "$@" ;;
        vertex-metric) cmd_vertex_metric "$@" ;;
        vertices) cmd_vertices "$@" ;;
        set-rate) cmd_set_rate "$@" ;;
        *) usage >&2; exit 2 ;;
    esac
}

main "$@"
