"""Run a gpipe workflow on a Dask cluster made of MPI ranks, with dask-mpi.

    mpirun -n N python cluster/mpi/launch.py WORKFLOW.yaml [--protocol tcp] [--interface ib0] [--nthreads 1]
        [--worker-class auto] [--workers W] [gpipe run options, e.g. --set key.sub=value]

Rank 0 runs the scheduler; ranks 2 to N-1 run a worker each: ``dask_cuda.CUDAWorker``
(one worker per GPU the rank sees) where the rank sees GPUs, else ``distributed.Worker``;
rank 1 runs ``gpipe run WORKFLOW.yaml --address ...`` once the workers have joined. When
rank 1 ends, dask-mpi stops the scheduler and the workers, and the exit status is gpipe
run's. ``cluster/mpi/gpipe-mpi.sh`` calls it with its ``${VAR:-default}`` settings.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpipe-mpi", description=__doc__.splitlines()[0])
    parser.add_argument("workflow", metavar="WORKFLOW.yaml", help="the workflow config that gpipe run runs")
    parser.add_argument("--protocol", default="tcp", help="tcp, or ucx where distributed-ucxx is installed")
    parser.add_argument("--interface", help="the network interface to listen on, e.g. ib0")
    parser.add_argument("--nthreads", type=int, default=1, help="threads per worker (default: %(default)s)")
    parser.add_argument("--worker-class", default="auto",
                        help="auto: dask_cuda.CUDAWorker on ranks that see GPUs, else distributed.Worker")
    parser.add_argument("--workers", type=int,
                        help="workers to wait for (default: one per worker rank, times this node's GPUs for "
                             "CUDAWorker)")
    parser.add_argument("--dashboard-address", default="127.0.0.1:8787",
                        help="where the scheduler's dashboard listens (default: %(default)s, this node only)")
    args, run_args = parser.parse_known_args(argv)
    try:
        from dask_mpi import initialize
        from mpi4py import MPI
    except ImportError as exc:
        print(f"gpipe-mpi: error: dask-mpi is not installed ({exc}): pip install dask-mpi mpi4py "
              f"(mpi4py needs an MPI library, e.g. the cluster's MPI module)", file=sys.stderr)
        return 2
    from gpipe.backend import gpu_count

    size = MPI.COMM_WORLD.Get_size()
    if size < 3:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"gpipe-mpi: error: 'mpirun -n' must be at least 3 (the scheduler, gpipe run and a worker), "
                  f"got {size}", file=sys.stderr)
        return 2
    gpus = gpu_count()
    worker_class = args.worker_class
    if worker_class == "auto":
        worker_class = "dask_cuda.CUDAWorker" if gpus else "distributed.Worker"
    # ranks 0 and 2..N-1 serve here until rank 1 is done, then exit
    initialize(interface=args.interface, nthreads=args.nthreads, protocol=args.protocol, worker_class=worker_class,
               dashboard_address=args.dashboard_address)

    import dask.config

    from gpipe.cli import main as gpipe

    workers = args.workers or (size - 2) * (gpus if worker_class.endswith("CUDAWorker") else 1)
    return gpipe(["run", args.workflow, "--address", dask.config.get("scheduler_address"),
                  "--wait-for-workers", str(workers), *run_args])


if __name__ == "__main__":
    sys.exit(main())
