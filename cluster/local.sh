#!/usr/bin/env bash
# A Dask scheduler and N workers on this machine, sharing a scheduler file — the same
# layout a batch job uses on many nodes (see cluster/README.md). Run a workflow on it with
#   gpipe run my-workflow.yaml --scheduler-file "$SCHEDULER_FILE" --wait-for-workers "$N_WORKERS"
# (or GPIPE_SCHEDULER_FILE=$SCHEDULER_FILE gpipe walk deepwalk ...).
# Stop it with: kill $(cat "$RUN_DIR"/pids)
# Everything listens on HOST, this machine's loopback by default: Dask runs the code any client that reaches the
# scheduler sends, so open it up (HOST=<a private address>) only as cluster/README.md says.
set -euo pipefail
N_WORKERS="${N_WORKERS:-2}"
THREADS="${THREADS:-1}"                 # threads per worker
RUN_DIR="${RUN_DIR:-$PWD/gpipe-cluster}"
SCHEDULER_FILE="${SCHEDULER_FILE:-$RUN_DIR/scheduler.json}"
PROTOCOL="${PROTOCOL:-tcp}"             # ucx where distributed-ucxx is installed
HOST="${HOST:-127.0.0.1}"               # where the scheduler, the workers and their dashboards listen
PORT="${PORT:-0}"                       # 0: any free port (the scheduler file says which)
DASHBOARD="${DASHBOARD:-$HOST:8787}"    # the scheduler's dashboard (another free port if taken)
WORKER="${WORKER:-dask worker}"         # `dask cuda worker` starts one worker per GPU: use it with N_WORKERS=1

mkdir -p "$RUN_DIR"
rm -f "$SCHEDULER_FILE"
dask scheduler --scheduler-file "$SCHEDULER_FILE" --protocol "$PROTOCOL" --host "$HOST" --port "$PORT" \
  --dashboard-address "$DASHBOARD" >"$RUN_DIR/scheduler.log" 2>&1 &
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
    >"$RUN_DIR/worker-$i.log" 2>&1 &
  echo $! >>"$RUN_DIR/pids"
done
echo "scheduler file: $SCHEDULER_FILE ($N_WORKERS workers; logs in $RUN_DIR)"
