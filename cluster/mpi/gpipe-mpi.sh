#!/usr/bin/env bash
# A gpipe workflow on MPI ranks, with dask-mpi (cluster/mpi/launch.py): rank 0 runs the Dask
# scheduler, ranks 2..NPROCS-1 a worker each (`dask_cuda.CUDAWorker`, one worker per GPU the
# rank sees, where it sees GPUs), and rank 1 `gpipe run WORKFLOW` once they have joined; when it
# ends, dask-mpi stops the rest. For sites where mpirun is how processes start on many nodes:
# run it inside a batch job, or with a host file. No scheduler file is needed.
#
#   NPROCS=6 cluster/mpi/gpipe-mpi.sh my-workflow.yaml [--set key.sub=value ...]
#   MPIRUN="mpirun --hostfile hosts --map-by ppr:2:node" NPROCS=8 cluster/mpi/gpipe-mpi.sh my-workflow.yaml
#
# Needs dask-mpi and mpi4py (pip install dask-mpi mpi4py, against the site's MPI). Settings:
# environment variables, each with its default; see cluster/README.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

WORKFLOW="${1:-${WORKFLOW:-}}"        # the workflow YAML (gpipe run's argument); the other arguments go to gpipe run
[ $# -gt 0 ] && shift
NPROCS="${NPROCS:-4}"                 # MPI ranks: the scheduler, gpipe run, and NPROCS - 2 workers
MPIRUN="${MPIRUN:-mpirun}"            # the launcher with its options (host file, ranks per node)
PYTHON="${PYTHON:-python}"
PROTOCOL="${PROTOCOL:-tcp}"           # ucx where distributed-ucxx is installed
INTERFACE="${INTERFACE:-}"            # e.g. ib0: the network interface the scheduler and workers listen on
THREADS="${THREADS:-1}"               # threads per worker
WORKER_CLASS="${WORKER_CLASS:-auto}"  # auto: dask_cuda.CUDAWorker on ranks that see GPUs, else distributed.Worker
DASHBOARD="${DASHBOARD:-127.0.0.1:8787}"   # loopback of the scheduler's node: ssh -L 8787:localhost:8787 NODE

if [ -z "$WORKFLOW" ]; then
  echo "usage: gpipe-mpi.sh WORKFLOW.yaml [--set key.sub=value ...] (or WORKFLOW=... in the environment)" >&2
  exit 2
fi
if ! "$PYTHON" -c "import dask_mpi, mpi4py" 2>/dev/null; then
  echo "gpipe-mpi.sh: error: dask-mpi is not installed for $PYTHON: pip install dask-mpi mpi4py" \
       "(mpi4py needs an MPI library, e.g. the cluster's MPI module)" >&2
  exit 2
fi
# shellcheck disable=SC2086  # MPIRUN is a command with its options
exec $MPIRUN -n "$NPROCS" "$PYTHON" "$HERE/launch.py" "$WORKFLOW" --protocol "$PROTOCOL" \
  ${INTERFACE:+--interface "$INTERFACE"} --nthreads "$THREADS" --worker-class "$WORKER_CLASS" \
  --dashboard-address "$DASHBOARD" "$@"
