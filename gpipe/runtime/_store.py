"""Worker-side state: one WorkerPlugin per worker holds graph partitions and run buffers.

Tasks pass keys, never the arrays: a partition is put here once when the graph
is built and looked up by ``(graph_id, partition)`` by every task that runs on
this worker. Off a worker, :func:`store` raises a clear error.
"""

from __future__ import annotations

from collections import defaultdict

from distributed import WorkerPlugin, get_worker

from ..backend import set_cpu_threads
from ..errors import GpipeError

PLUGIN_NAME = "gpipe"


class GpipeStore(WorkerPlugin):
    """The gpipe state of one worker: its device, its partitions and its run buffers."""

    name = PLUGIN_NAME

    def __init__(self, device: str):
        self.device = device
        self.partitions: dict[tuple[str, int], object] = {}
        self.pieces: dict[tuple[str, int], list] = defaultdict(list)

    def setup(self, worker):
        self.worker_address = worker.address
        set_cpu_threads(worker.state.nthreads)

    def teardown(self, worker):
        self.partitions.clear()
        self.pieces.clear()

    def put_partition(self, graph_id: str, part: int, partition) -> None:
        self.partitions[(graph_id, part)] = partition

    def partition(self, graph_id: str, part: int):
        try:
            return self.partitions[(graph_id, part)]
        except KeyError:
            raise GpipeError(
                f"partition {part} of graph {graph_id} is not on worker {self.worker_address} "
                "(the worker restarted or the graph was released)"
            ) from None

    def drop_graph(self, graph_id: str) -> int:
        keys = [k for k in self.partitions if k[0] == graph_id]
        for k in keys:
            del self.partitions[k]
        return len(keys)

    def add_pieces(self, run_id: str, part: int, pieces: dict) -> None:
        self.pieces[(run_id, part)].append(pieces)

    def pop_pieces(self, run_id: str, part: int) -> list:
        return self.pieces.pop((run_id, part), [])

    def drop_run(self, run_id: str) -> None:
        for k in [k for k in self.pieces if k[0] == run_id]:
            del self.pieces[k]


def store() -> GpipeStore:
    """The gpipe store of the worker running this task."""
    try:
        worker = get_worker()
    except ValueError:
        raise GpipeError("gpipe's worker store is only reachable from a task running on a Dask worker") from None
    try:
        return worker.plugins[PLUGIN_NAME]
    except KeyError:
        raise GpipeError(
            f"worker {worker.address} has no gpipe store: attach the client with gpipe.connect() "
            "or gpipe.attach(client) before building graphs"
        ) from None
