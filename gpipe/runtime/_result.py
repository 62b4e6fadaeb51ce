"""Results that the runtime hands to the families: sampled edges, and the blocks of a run's output."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .._files import atomic_file
from . import _advance


def assemble_blocks(client, run_id: str, partitions: dict[int, str], num_walks: int, block_rows: int, width: int,
                     dtype) -> list:
    """Futures of a walk-shaped run's output blocks, ``(rows, width)`` arrays of dense ids padded with -1: one
    task per block of ``block_rows`` rows, spread over the workers that hold pieces, each taking its pieces from
    them (so the run's pieces go as the blocks are made)."""
    n_blocks = max(1, -(-num_walks // block_rows))
    workers = sorted(set(partitions.values()))
    layout = (block_rows, n_blocks, num_walks, width, dtype)
    return [client.submit(_advance.assemble, run_id, partitions, layout, part=b, workers=[workers[b % len(workers)]],
                          allow_other_workers=False, pure=False, key=f"gpipe-assemble-{run_id}-{b}")
            for b in range(n_blocks)]


class EdgeSample:
    """Sampled subgraphs, one per instance, small enough for the client; ``stats`` says how the run went.

    ``compute()`` gives the sampled edges, one row per edge of each instance
    (``instance, depth, src, dst`` from the samplers of :mod:`gpipe.sampling`;
    ``instance, step, src, dst, time`` from frontier sampling), ``nodes()``
    each instance's vertices (``instance, vertex``): the endpoints of its edges
    and the ``vertices`` it holds without one (e.g. a seed with no out-edge, or
    a vertex random node sampling picked that induces no edge). Ids are the
    graph's original ones.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "d"]}))
    ...     s = gpipe.sampling.neighbor(g, seeds=["a", "d"], fanout=1, depth=2, seed=3)
    >>> s.compute()
       instance  depth src dst
    0         0      0   a   c
    1         0      1   c   a
    2         1      0   d   c
    3         1      1   c   b
    >>> s.nodes()
       instance vertex
    0         0      a
    1         0      c
    2         1      b
    3         1      c
    4         1      d
    """

    def __init__(self, edges: pd.DataFrame, id_map, stats: dict, vertices: pd.DataFrame | None = None):
        self._edges = edges
        self._vertices = vertices  # dense ids: instance, vertex
        self._id_map = id_map
        self.stats = stats

    def __len__(self) -> int:
        return len(self._edges)

    def __repr__(self) -> str:
        return f"<gpipe.EdgeSample {self.stats.get('algorithm', '')}: {len(self)} edges in {self.stats['seconds']:.3f} s>"

    def compute(self) -> pd.DataFrame:
        """The edges as a frame of original vertex ids."""
        edges = self._edges.copy()
        if self._id_map is not None:
            for column in ("src", "dst"):
                edges[column] = self._id_map[edges[column].to_numpy()]
        return edges

    def nodes(self) -> pd.DataFrame:
        """Each instance's vertices, once each: a frame ``instance, vertex`` (original ids) in order of instance."""
        ends = [self._edges[["instance", end]].set_axis(["instance", "vertex"], axis=1) for end in ("src", "dst")]
        nodes = pd.concat(ends + ([] if self._vertices is None else [self._vertices]), ignore_index=True)
        nodes = nodes.astype(np.int64).drop_duplicates().sort_values(["instance", "vertex"], ignore_index=True)
        if self._id_map is not None:
            nodes["vertex"] = self._id_map[nodes["vertex"].to_numpy()]
        return nodes

    def to_parquet(self, path, nodes: bool = False) -> str:
        """Write the edges (or, with ``nodes``, the nodes) to one Parquet file (complete or not at all).

        A file at ``path`` is replaced, as pandas' writers do; a folder there is
        refused (``GpipeValueError``).
        """
        path = os.fspath(path)
        with atomic_file(path, "wb") as out:
            (self.nodes() if nodes else self.compute()).to_parquet(out, index=False)
        return path
