"""Every result a family keeps on the workers comes from one base (``gpipe.runtime.HeldResult``) and keeps its
contract: ``stats``; ``compute()`` on the client; ``to_dask()`` and ``to_parquet()`` made on the workers, equal to
it; ``map_blocks`` run on each block where it is held, the blocks together holding every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.runtime import HeldResult


def _graph(partitions: int):
    return gpipe.generators.rmat(scale=7, edge_factor=4, seed=3, partitions=partitions)


FAMILIES = {  # family -> (result, the rows compute() gives as a frame)
    "walks": (lambda g: gpipe.walks.deepwalk(g, length=6, seed=1), lambda rows: pd.DataFrame(rows)),
    "ppr": (lambda g: gpipe.walks.ppr(g, [0, 5], walks_per_source=20, length=6, seed=1), pd.DataFrame),
    "sampler": (lambda g: gpipe.sampling.neighbor(g, seeds=list(range(20)), fanout=2, depth=2, seed=1),
                lambda rows: rows),
    "frontier": (lambda g: gpipe.walks.multidimensional(g, frontier_size=8, budget=30, instances=4, seed=1),
                 lambda rows: rows),
    "mining": (lambda g: gpipe.mining.list_cliques(g, 3), pd.DataFrame),
}


def _rows(block) -> int:
    return len(block["src"]) if isinstance(block, dict) else len(block)


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_worker_held_result_keeps_the_base_contract(cpu, tmp_path, family, partitions):
    make, as_frame = FAMILIES[family]
    result = make(_graph(partitions))
    assert isinstance(result, HeldResult)
    assert result.stats["seconds"] > 0
    rows = result.compute()
    frame = as_frame(rows).reset_index(drop=True)
    assert len(frame) > 0
    lazy = result.to_dask().compute()
    np.testing.assert_array_equal(np.asarray(lazy), frame.to_numpy())  # (the frames name their columns apart)
    written = pd.read_parquet(result.to_parquet(tmp_path / family))
    assert written.shape[0] == frame.shape[0]
    assert sum(cpu.gather(result.map_blocks(_rows))) == frame.shape[0]
    assert result.stats["assemble_seconds"] >= 0  # the blocks were made once, on first use


@pytest.mark.parametrize("family", ["walks", "sampler"])
def test_a_device_result_of_a_cpu_cluster_is_refused_naming_the_rule(cpu, family):
    """``compute(device=True)`` writes from the workers' GPUs into the client's (tested on a GPU in
    tests/gpu/test_results_gpu.py); a CPU cluster has none, and the refusal says so."""
    result = FAMILIES[family][0](_graph(1))
    with pytest.raises(gpipe.GpipeValueError, match="device=True: .* this cluster computes on the CPU"):
        result.compute(device=True)
    with pytest.raises(gpipe.GpipeValueError, match="'device' must be true or false, got 'gpu'"):
        result.compute(device="gpu")
