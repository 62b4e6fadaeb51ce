#!/usr/bin/env bash
# A Dask scheduler and N workers on this machine, sharing a scheduler file — the same
# layout a batch job uses on many nodes (see cluster/README.md). Run a workflow on it with
#   gpipe run my-workflow.yaml --scheduler-file "$SCHEDULER_FILE" --wait-for-workers "$N_WORKERS"
# (or GPIPE_SCHEDULER_FILE=$SCHEDULER_FILE gpipe walk deepwalk ...).
# Stop it with: kill $(cat "$RUN_DIR"/pids)
# Everything listens on HOST, this machine's loopback by default, and speaks TLS with a certificate made for this
# cluster (in ${SCHEDULER_FILE%.json}.tls/, readable by you only, where gpipe finds it beside the scheduler file):
# Dask runs the code any client that connects sends, and on a shared machine loopback is open to every user.
set -euo pipefail
N_WORKERS="${N_WORKERS:-2}"
THREADS="${THREADS:-1}"                 # threads per worker
RUN_DIR="${RUN_DIR:-$PWD/gpipe-cluster}"
SCHEDULER_FILE="${SCHEDULER_FILE:-$RUN_DIR/scheduler.json}"
PROTOCOL="${PROTOCOL:-tls}"             # tls: only holders of the cluster's certificate connect; tcp: anyone; ucx
HOST="${HOST:-127.0.0.1}"               # where the scheduler, the workers and their dashboards listen
PORT="${PORT:-0}"                       # 0: any free port (the scheduler file says which)
DASHBOARD="${DASHBOARD:-$HOST:8787}"    # the scheduler's dashboard (another free port if taken)
WORKER="${WORKER:-dask worker}"         # `dask cuda worker` starts one worker per GPU: use it with N_WORKERS=1

mkdir -p "$RUN_DIR"
rm -f "$SCHEDULER_FILE"
TLS=()   # the cluster's certificate (its own authority) and key, made here, for the scheduler and the workers
if [ "$PROTOCOL" = tls ] && [ -z "${DASK_DISTRIBUTED__COMM__TLS__CA_FILE:-}" ]; then   # else your own
  CREDENTIALS="${SCHEDULER_FILE%.json}.tls"
  rm -rf "$CREDENTIALS"
  if ! (umask 077 && mkdir "$CREDENTIALS" && openssl req -x509 -newkey rsa:2048 -nodes -days 365 \
          -subj /CN=dask-internal -keyout "$CREDENTIALS/key.pem" -out "$CREDENTIALS/cert.pem") >/dev/null 2>&1; then
    echo "local.sh: error: cannot make the cluster's TLS certificate in $CREDENTIALS (needs openssl)" >&2
    exit 1
  fi
  TLS=(--tls-ca-file "$CREDENTIALS/cert.pem" --tls-cert "$CREDENTIALS/cert.pem" --tls-key "$CREDENTIALS/key.pem")
fi
dask scheduler --scheduler-file "$SCHEDULER_FILE" --protocol "$PROTOCOL" --host "$HOST" --port "$PORT" \
  --dashboard-address "$DASHBOARD" ${TLS[@]+"${TLS[@]}"} >"$RUN_DIR/scheduler.log" 2>&1 &
SCHEDULER_PID=$!
echo "$SCHEDULER_PID" >"$RUN_DIR/pids"
for _ in $(seq 300); do
  [ -s "$SCHEDULER_FILE" ] && break
  kill -0 "$SCHEDULER_PID" 2>/dev/null || break   # it exited: its log says why
  sleep 0.1
done
if [ ! -s "$SCHEDULER_FILE" ]; then
  kill "$SCHEDULER_PID" 2>/dev/null || true
  reason=$(grep -E '^[A-Za-z_.]+(Error|Exception|Warning): ' "$RUN_DIR/scheduler.log" | grep -v 'failed to start' \
           | head -n 1) || true
  echo "local.sh: error: the scheduler did not start${reason:+: $reason} (see $RUN_DIR/scheduler.log)" >&2
  exit 1
fi
for i in $(seq "$N_WORKERS"); do
  $WORKER --scheduler-file "$SCHEDULER_FILE" --nthreads "$THREADS" --host "$HOST" --dashboard-address "$HOST:0" \
    ${TLS[@]+"${TLS[@]}"} >"$RUN_DIR/worker-$i.log" 2>&1 &
  echo $! >>"$RUN_DIR/pids"
done
echo "scheduler file: $SCHEDULER_FILE ($N_WORKERS workers; logs in $RUN_DIR)"
