#!/usr/bin/env bash
# A Dask scheduler and N workers on this machine, sharing a scheduler file —
# the same layout a batch job uses on many nodes. Attach gpipe to it with
#   GPIPE_SCHEDULER_FILE=$SCHEDULER_FILE gpipe walk deepwalk ...   (or --scheduler-file)
# Stop it with: kill $(cat "$RUN_DIR"/pids)
set -euo pipefail
N_WORKERS="${N_WORKERS:-2}"
THREADS="${THREADS:-1}"
RUN_DIR="${RUN_DIR:-$PWD/gpipe-cluster}"
SCHEDULER_FILE="${SCHEDULER_FILE:-$RUN_DIR/scheduler.json}"
PROTOCOL="${PROTOCOL:-tcp}"
WORKER="${WORKER:-dask worker}"     # `dask cuda worker` for one worker per GPU

mkdir -p "$RUN_DIR"
rm -f "$SCHEDULER_FILE"
dask scheduler --scheduler-file "$SCHEDULER_FILE" --protocol "$PROTOCOL" >"$RUN_DIR/scheduler.log" 2>&1 &
echo $! >"$RUN_DIR/pids"
for _ in $(seq 300); do [ -s "$SCHEDULER_FILE" ] && break; sleep 0.1; done
[ -s "$SCHEDULER_FILE" ] || { echo "scheduler did not start: see $RUN_DIR/scheduler.log" >&2; exit 1; }
for i in $(seq "$N_WORKERS"); do
  $WORKER --scheduler-file "$SCHEDULER_FILE" --nthreads "$THREADS" >"$RUN_DIR/worker-$i.log" 2>&1 &
  echo $! >>"$RUN_DIR/pids"
done
echo "scheduler file: $SCHEDULER_FILE ($N_WORKERS workers; logs in $RUN_DIR)"
