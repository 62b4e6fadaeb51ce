"""gpipe: graph sampling and random walks at scale, on Dask, on CPUs and GPUs."""

__version__ = "0.1.0"

from . import (
    config,  # noqa: F401  (merges gpipe.yaml into dask.config)
    counting,
    dynamic,
    embeddings,
    gnn,
    mining,
    sampling,
    sort,
    walks,
    workflow,
)
from .cluster import connect, warmup
from .errors import DeviceUnavailableError, GpipeError, GpipeFileError, GpipeValueError, TaskError, WorkerLostError
from .graph import Graph, from_edge_index, from_edges, from_networkx, from_scipy, generators, read_edges
from .runtime import attach
from .walks import WalkResult

__all__ = [
    "DeviceUnavailableError",
    "Graph",
    "GpipeError",
    "GpipeFileError",
    "GpipeValueError",
    "TaskError",
    "WorkerLostError",
    "WalkResult",
    "__version__",
    "attach",
    "connect",
    "counting",
    "dynamic",
    "embeddings",
    "from_edge_index",
    "from_edges",
    "from_networkx",
    "from_scipy",
    "generators",
    "gnn",
    "mining",
    "read_edges",
    "sampling",
    "sort",
    "walks",
    "warmup",
    "workflow",
]
