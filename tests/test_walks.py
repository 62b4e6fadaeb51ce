"""DeepWalk on the partitioned runtime: structure, statistics, determinism, outputs, errors."""

import gc
import threading
import time

import dask
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import gpipe
from gpipe.errors import GpipeError, GpipeValueError
from gpipe.runtime.workers import kept_for_clients
from helpers import routed_first_order, started, transition_chi2, walk_steps


def _adjacency(g, tmp_path) -> set:
    stored = pd.read_parquet(g.to_parquet(tmp_path / "adj"))
    return set(zip(stored.src.tolist(), stored.dst.tolist()))


@pytest.mark.parametrize("directed", [False, True])
def test_every_step_is_an_edge_and_walks_end_only_at_dead_ends(cpu, directed, tmp_path):
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=1, directed=directed, partitions=3)
    walks = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=2, seed=5).compute()
    assert walks.shape == (2 * 512, 21)
    np.testing.assert_array_equal(walks[:, 0], np.tile(np.arange(512), 2))
    edges = _adjacency(g, tmp_path)
    u, v = walk_steps(walks)
    assert len(u) > 0 and all(e in edges for e in zip(u.tolist(), v.tolist()))
    deg = g.degrees().to_numpy()
    for row in walks:
        valid = row[row >= 0]
        assert np.all(row[len(valid):] == -1)  # padding only at the end
        if len(valid) < 21:
            assert deg[valid[-1]] == 0  # ended early only at a dead end


def test_transitions_are_uniform_over_neighbors(cpu, small_edges):
    """Chi-square of every vertex's transition counts vs 1/deg (false-alarm rate 1e-3, fixed seed)."""
    g = gpipe.from_edges(small_edges, partitions=3)
    walks = gpipe.walks.deepwalk(g, length=30, walks_per_vertex=60, seed=11).compute()
    chi2, dof = transition_chi2(walks, g.degrees())
    assert dof > 50
    assert stats.chi2.sf(chi2, dof) > 1e-3


def test_first_step_from_a_hub_is_uniform(cpu, small_edges):
    g = gpipe.from_edges(small_edges, partitions=2)
    walks = gpipe.walks.deepwalk(g, length=1, start=[0], walks_per_vertex=6000, seed=3).compute()
    counts = pd.Series(walks[:, 1]).value_counts()
    assert len(counts) == g.degrees()[0] == 12
    assert stats.chisquare(counts.to_numpy()).pvalue > 1e-3


def test_walks_do_not_depend_on_partitions(cpu):
    results = []
    for parts in (1, 3, 8):
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=parts)
        w = gpipe.walks.deepwalk(g, length=25, walks_per_vertex=2, seed=9)
        assert w.stats["partitions"] == parts
        results.append(w.compute())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    assert (results[0][:, 1:] >= 0).any()


def test_walks_do_not_depend_on_worker_count(cpu_cluster, one_worker_cluster):
    out = []
    for client in (one_worker_cluster, cpu_cluster):
        with client.as_current():
            g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=4)
            w = gpipe.walks.deepwalk(g, length=25, seed=9)
            out.append((w.stats["workers"], w.compute()))
            # CPU workers: Dask's comms; one worker: nothing crosses
            assert w.stats["exchange"] == ("comms" if w.stats["workers"] == 2 else "none")
            assert (w.stats["walker_bytes"] > 0) == (w.stats["workers"] == 2)
            assert 0 < w.stats["opening_seconds"] < w.stats["worker_seconds"] < w.stats["seconds"]
            peaks = w.stats["memory_peaks"]  # each worker's, the most of them in host_memory_peak
            assert sorted(peaks) == sorted(set(g.placement)) and all(p["device"] is None for p in peaks.values())
            assert max(p["host"] for p in peaks.values()) == w.stats["host_memory_peak"] > 0
    assert [o[0] for o in out] == [1, 2]
    np.testing.assert_array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("walk", ["deepwalk", "jump", "mh"])
def test_walks_do_not_depend_on_the_chunks_a_superstep_is_taken_in(cpu, walk):
    """Each worker holding one partition takes a superstep in chunks, each chunk's leavers sent while the next
    chunk's kernel runs: the walks are those of one exchange a superstep, with 3 chunks and with 40 (most of them
    empty in the last supersteps, where every rank still takes every round)."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=2)
    run = {"deepwalk": lambda: gpipe.walks.deepwalk(g, length=15, walks_per_vertex=2, seed=9),
           "jump": lambda: gpipe.walks.with_jump(g, jump=0.2, length=15, seed=9),
           "mh": lambda: gpipe.walks.metropolis_hastings(g, length=15, seed=9)}[walk]
    out = []
    for chunks in (1, 3, 40):
        with dask.config.set({"gpipe.exchange-chunks": chunks}):
            w = run()
        assert w.stats["workers"] == 2 and w.stats["exchange"] == "comms"
        assert 0 <= w.stats["exchange_hidden_seconds"] <= w.stats["seconds"]
        assert chunks > 1 or w.stats["exchange_hidden_seconds"] == 0
        out.append((w.compute(), w.stats["steps"], w.stats["crossings"]))
    for walks, steps, crossings in out[1:]:
        np.testing.assert_array_equal(walks, out[0][0])
        assert (steps, crossings) == out[0][1:]


def test_a_partitioned_walks_stats_count_its_crossings_and_each_supersteps_kernel_steps(cpu):
    """``crossings``: every step from a vertex of one partition to another's (here between the two workers), read
    back from the walks themselves; ``superstep_kernels``: each superstep's steps, adding up to the run's."""
    g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=2)
    w = gpipe.walks.deepwalk(g, length=25, walks_per_vertex=2, seed=9)
    walks = w.compute()
    owner = np.searchsorted(np.asarray(g.bounds)[1:-1], walks, side="right")
    stepped = (walks[:, 1:] >= 0) & (walks[:, :-1] >= 0)
    crossed = int((stepped & (owner[:, 1:] != owner[:, :-1])).sum())
    assert w.stats["workers"] == 2 and w.stats["crossings"] == crossed > 0
    assert w.stats["crossings_per_step"] == pytest.approx(crossed / stepped.sum())
    kernels = w.stats["superstep_kernels"]
    assert len(kernels["steps"]) == len(kernels["seconds"]) == w.stats["supersteps"]
    assert sum(kernels["steps"]) == w.stats["steps"] == stepped.sum()
    assert w.stats["kernel_steps_per_second"] == pytest.approx(w.stats["steps"] / sum(kernels["seconds"]))


def test_a_deepwalk_walker_crosses_in_the_8_bytes_its_runs_sizes_allow(cpu):
    """4,096 vertices, 16,384 walks of 80 steps: 12 + 14 + 7 bits, 8 bytes a walker (``stats['wire']``; on CPU
    workers a walker carries no cells of its row between partitions: no field for them); the bytes
    sent are 8 for each step into the other worker's partition, the paths say, and up to 8 of padding for each
    partition's walkers a superstep (their words start on 16 bytes)."""
    g = gpipe.generators.rmat(scale=12, edge_factor=4, seed=2, partitions=2)
    w = gpipe.walks.deepwalk(g, length=80, walks_per_vertex=4, seed=9)
    walks = w.compute()
    assert w.stats["workers"] == 2 and w.stats["exchange"] == "comms"
    assert w.stats["wire"] == {"bytes_per_walker": 8, "bits": {"walk_id": 14, "vertex": 12, "step": 7}}
    owner = np.searchsorted(np.asarray(g.bounds), walks, side="right") - 1
    crossings = int(((owner[:, 1:] != owner[:, :-1]) & (walks[:, 1:] >= 0)).sum())
    padding = w.stats["walker_bytes"] - 8 * crossings
    assert crossings > 0 and padding % 8 == 0 and 0 <= padding <= 8 * w.stats["supersteps"] * 2


def _blocks_held(run_id: str, block_rows: int, dask_worker=None) -> tuple[list[int], list[int]]:
    """The output blocks of the walks whose pieces a run left on this worker, and those of the rows its steps wrote
    to (``client.run``)."""
    from gpipe.runtime._store import PLUGIN_NAME

    run = dask_worker.plugins[PLUGIN_NAME].find(run_id)
    parts = [] if run is None else sorted(run._pieces)
    pieces = {int(b) for p in parts for s in run.pieces(p) for b in np.unique(s["walk_id"] // block_rows)}
    rows = [] if run is None or run.rows is None else sorted(run.rows.by_block())
    return sorted(pieces), rows


def _gather_room(room: int) -> int:
    from gpipe.runtime import _gather

    before, _gather.ROOM = _gather.ROOM, room
    return before


def _every_rows(ranks: int, exchanges: tuple) -> tuple:
    """On a worker: up to how many workers, exchanging through which transports, each holds every walk's rows
    (``_advance._keep_rows``); what it was."""
    from gpipe.runtime import _advance

    before = _advance.EVERY_ROW_RANKS, _advance.EVERY_ROW_EXCHANGES
    _advance.EVERY_ROW_RANKS, _advance.EVERY_ROW_EXCHANGES = ranks, tuple(exchanges)
    return before


def test_a_partitioned_walk_ends_with_each_blocks_pieces_on_the_worker_making_it(cpu, one_worker_cluster):
    """Gathering (``_gather``) in many rounds (a batch per piece set, a block per merge): block ``b`` is on the
    ``b % 2``-th worker before assembly, made there from the rows every step wrote (each worker holding every
    walk's, merged), or from the rows its steps wrote to there and the pieces that came; the walks equal one
    worker's either way."""
    with one_worker_cluster.as_current(), dask.config.set({"gpipe.walks.block-size": 37}):
        g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=3)
        alone = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=2, seed=5)
        assert alone.stats["gathered"] and alone.stats["gathered_bytes"] == 0  # on one worker, nothing moves
        blocks = list(range(-(-len(alone) // 37)))
        assert list(one_worker_cluster.run(_blocks_held, alone._run_id, 37).values()) == [([], blocks)]  # rows alone
        alone = alone.compute()
        whole = gpipe.walks.deepwalk(gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, mode="replicated"),
                                     length=20, walks_per_vertex=2, seed=5)  # one replica: its rows, in place
        assert whole.stats["mode"] == "replicated" and whole.stats["gathered"]
        # its blocks made from them as the run ended, kept as Dask data (nothing of the run left to assemble)
        assert list(one_worker_cluster.run(_blocks_held, whole._run_id, 37).values()) == [([], [])]
        made = whole._block_futures
        assert [f.key for f in made] == [f"gpipe-assemble-{whole._run_id}-{b}" for b in blocks]
        assert all(f.status == "finished" for f in made) and whole.stats["assemble_seconds"] > 0
        np.testing.assert_array_equal(whole.compute(), alone)
    room = cpu.run(_gather_room, 1 << 62)
    try:
        with dask.config.set({"gpipe.walks.block-size": 37}):
            g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=3)
            w = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=2, seed=5)  # through the comms: pieces
            before = cpu.run(_every_rows, 4, ("nccl", "comms"))  # as through NCCL: every walk's rows
            try:
                every = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=2, seed=5)
            finally:
                cpu.run(_every_rows, *next(iter(before.values())))
    finally:
        cpu.run(_gather_room, next(iter(room.values())))
    assert every.stats["rows"] == "every walk" and w.stats["rows"] == "its blocks"
    for run in (every, w):
        assert run.stats["gathered"] and run.stats["gathered_bytes"] > 0 and run.stats["gather_seconds"] > 0
    held, held_every = cpu.run(_blocks_held, w._run_id, 37), cpu.run(_blocks_held, every._run_id, 37)
    for r, worker in enumerate(sorted(set(g.placement))):  # the pieces that came, and the rows written to here
        pieces, rows = held[worker]
        assert pieces and set(pieces) <= set(rows) and rows == blocks[r::2]
        assert held_every[worker] == ([], blocks[r::2])  # no piece at all: every vertex written in place
    np.testing.assert_array_equal(w.compute(), alone)
    np.testing.assert_array_equal(every.compute(), alone)


def _no_room_for_every_walk(broken: bool, dask_worker=None) -> None:
    """On a worker: rows of every walk cannot be made (no room beside them), its own blocks' still can; or mend."""
    outputs = dask_worker.plugins["gpipe"].outputs
    if broken:
        fit = outputs.rows_fit
        outputs.rows_fit = lambda nbytes, limit, more=0: more == 0 and fit(nbytes, limit)
    else:
        del outputs.rows_fit  # the class's again


def test_every_walks_rows_only_where_every_worker_has_room_for_them(cpu):
    """A worker keeps every walk's rows only where every other one does: each decided alone by its free memory,
    one ended merging rows and the other sending pieces (two H200s at R-MAT 24: their collectives mismatched).
    With one worker short of room, both keep their own blocks' rows, and the walks are the same."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=2)
    reference = gpipe.walks.deepwalk(g, length=15, walks_per_vertex=2, seed=4)
    before = cpu.run(_every_rows, 4, ("nccl", "comms"))
    short = sorted(cpu.scheduler_info()["workers"])[1]
    cpu.run(_no_room_for_every_walk, True, workers=[short])
    try:
        with dask.config.set({"gpipe.walks.block-size": 37}):  # blocks on both workers
            walks = gpipe.walks.deepwalk(g, length=15, walks_per_vertex=2, seed=4)
    finally:
        cpu.run(_no_room_for_every_walk, False, workers=[short])
        cpu.run(_every_rows, *next(iter(before.values())))
    assert walks.stats["rows"] == "its blocks" and walks.stats["gathered_bytes"] > 0
    np.testing.assert_array_equal(walks.compute(), reference.compute())


def _rows_held(run_id: str, dask_worker=None) -> int:
    """The rows a run keeps on this worker for its blocks."""
    run = dask_worker.plugins["gpipe"].runs.get(run_id)
    return 0 if run is None or run.rows is None else int(run.rows.array.shape[0])


def _no_room_for_own_rows(broken: bool, dask_worker=None) -> None:
    """On a worker: rows for its own blocks alone cannot be made (out of memory), or can again."""
    from gpipe.runtime._pieces import OwnedRows

    if broken:
        made = OwnedRows.__dict__["made"].__func__

        def refused(cls, where, blocks, ranks, rank):
            if ranks > 1:
                raise MemoryError("no room")
            return made(cls, where, blocks, ranks, rank)

        OwnedRows._made, OwnedRows.made = made, classmethod(refused)
    elif hasattr(OwnedRows, "_made"):
        OwnedRows.made = classmethod(OwnedRows._made)


def test_every_walks_rows_on_each_worker_give_each_familys_walks(cpu):
    """Each worker holding every walk's rows (as through NCCL), every step of every walk family writes in place
    on any worker and the rows merge into the same walks as pieces gathered, for any block size; with no room to
    copy its blocks out of them, a worker makes its blocks in every walk's rows."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=2, weighted=True)
    walks = {"deepwalk": lambda: gpipe.walks.deepwalk(g, length=15, walks_per_vertex=2, seed=4, weighted=True),
             "node2vec": lambda: gpipe.walks.node2vec(g, length=15, p=0.5, q=2.0, seed=4),
             "metropolis_hastings": lambda: gpipe.walks.metropolis_hastings(g, length=15, seed=4),
             "jump": lambda: gpipe.walks.with_jump(g, length=15, jump=0.2, seed=4)}
    pieces = {name: walk() for name, walk in walks.items()}
    before = cpu.run(_every_rows, 4, ("nccl", "comms"))
    try:
        for block in (29, 1 << 20):
            with dask.config.set({"gpipe.walks.block-size": block}):
                for name, walk in walks.items():
                    every = walk()
                    assert every.stats["rows"] == "every walk" and pieces[name].stats["rows"] != "every walk"
                    np.testing.assert_array_equal(every.compute(), pieces[name].compute())
        cpu.run(_no_room_for_own_rows, True)
        try:
            with dask.config.set({"gpipe.walks.block-size": 29}):  # blocks made on both workers
                every = walks["deepwalk"]()
            held = cpu.run(_rows_held, every._run_id)
            assert sorted(held.values()) == [len(every)] * 2  # every walk's rows kept on both workers
            np.testing.assert_array_equal(every.compute(), pieces["deepwalk"].compute())
        finally:
            cpu.run(_no_room_for_own_rows, False)
    finally:
        cpu.run(_every_rows, *next(iter(before.values())))


def test_three_workers_walk_the_same_through_every_walks_rows_and_through_pieces(one_worker_cluster):
    """Past two workers: each peer's blocks merged from every walk's rows, and each piece sent to the worker making
    its block out of three, give the walks one worker makes, whatever the blocks."""
    with one_worker_cluster.as_current():
        g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=1)
        alone = {name: walk(g).compute() for name, walk in _THREE.items()}
    with gpipe.connect(n_workers=3, threads_per_worker=1, device="cpu", dashboard_address=":0") as three, \
            dask.config.set({"gpipe.walks.block-size": 23}):
        g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=5)
        for name, walk in _THREE.items():
            w = walk(g)
            assert w.stats["workers"] == 3 and w.stats["rows"] != "every walk" and w.stats["gathered_bytes"] > 0
            np.testing.assert_array_equal(w.compute(), alone[name])
        before = three.run(_every_rows, 4, ("nccl", "comms"))
        try:
            for name, walk in _THREE.items():
                w = walk(g)
                assert w.stats["rows"] == "every walk"
                np.testing.assert_array_equal(w.compute(), alone[name])
        finally:
            three.run(_every_rows, *next(iter(before.values())))


_THREE = {"deepwalk": lambda g: gpipe.walks.deepwalk(g, length=12, walks_per_vertex=2, seed=6),
          "node2vec": lambda g: gpipe.walks.node2vec(g, length=12, p=0.5, q=2.0, seed=6)}


def test_progress_is_reported_per_superstep_while_the_workers_run_them(cpu):
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=4)
    calls = []
    w = gpipe.walks.deepwalk(g, length=40, seed=9, progress=lambda **kw: calls.append(kw))
    assert calls[-1] == {"superstep": w.stats["supersteps"], "active": 0, "steps": w.stats["steps"],
                         "total": g.num_vertices}
    assert len(calls) > 1 and all(c["total"] == g.num_vertices for c in calls)
    for before, after in zip(calls, calls[1:]):
        assert before["superstep"] < after["superstep"] and before["steps"] <= after["steps"]
    assert all(c["active"] > 0 for c in calls[:-1])


def test_concurrent_runs_share_the_workers(cpu):
    """Each run holds a long task on every worker, waiting on its peers: two at once both end, each as if alone."""
    from concurrent.futures import ThreadPoolExecutor

    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=2, partitions=4)
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda seed: gpipe.walks.deepwalk(g, length=30, seed=seed).compute(), (1, 2)))
    np.testing.assert_array_equal(both[0], gpipe.walks.deepwalk(g, length=30, seed=1).compute())
    np.testing.assert_array_equal(both[1], gpipe.walks.deepwalk(g, length=30, seed=2).compute())


def test_walkers_crossing_between_a_workers_partitions_go_on_in_the_same_superstep(one_worker_cluster, cpu):
    """Walks need no barrier between walkers: on one worker, any number of partitions walk in one superstep."""
    with one_worker_cluster.as_current():
        walks = {parts: gpipe.walks.deepwalk(gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=parts),
                                             length=30, seed=3) for parts in (1, 4)}
        np.testing.assert_array_equal(walks[1].compute(), walks[4].compute())
    assert walks[4].stats["partitions"] == 4 and walks[4].stats["supersteps"] == 1
    with cpu.as_current():  # two workers: walkers crossing to the other worker wait for the next superstep
        w = gpipe.walks.deepwalk(gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=4), length=30,
                                 seed=3)
        paths = w.compute()
    np.testing.assert_array_equal(paths, walks[1].compute())
    assert w.stats["workers"] == 2 and 1 < w.stats["supersteps"] <= 31


def _span_rows(graph_id: str, dask_worker=None) -> list:
    """Each of this worker's partitions of ``graph_id``: whether it is a view of the span joining them, and its rows
    equal the span's."""
    from gpipe.runtime._store import PLUGIN_NAME

    held = dask_worker.plugins[PLUGIN_NAME].partitions
    mine = sorted(p for (g, p) in held._held if g == graph_id)
    span = held.span(graph_id, mine)
    out = []
    for q in mine:
        part = held.get(graph_id, q)
        a, b = int(span.indptr[part.lo - span.lo]), int(span.indptr[part.hi - span.lo])
        out.append((np.shares_memory(part.indices, span.indices), np.shares_memory(part.weights, span.weights),
                    np.array_equal(part.indices, span.indices[a:b]), np.array_equal(part.weights, span.weights[a:b]),
                    np.array_equal(part.indptr, span.indptr[part.lo - span.lo:part.hi - span.lo + 1] - a)))
    return out


def test_a_workers_partitions_on_its_device_are_walked_as_one_span(cpu):
    """Walkers crossing between partitions of one worker do not stop: its partitions are joined once, as views of
    one span's arrays, and walked in one advance a superstep (not one per partition and crossing)."""
    graphs = {parts: gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=parts, weighted=True)
              for parts in (2, 6)}
    for walk, kwargs in ((gpipe.walks.deepwalk, {"weighted": True}), (gpipe.walks.node2vec, {"p": 0.5, "q": 2}),
                         (gpipe.walks.metropolis_hastings, {})):
        two, six = (walk(graphs[parts], length=30, seed=3, **kwargs) for parts in (2, 6))
        np.testing.assert_array_equal(two.compute(), six.compute())
        assert six.stats["supersteps"] <= 2 * two.stats["supersteps"]
        assert six.stats["batches"] <= 2 * two.stats["batches"]  # one per partition and crossing: 10x
    held = cpu.run(_span_rows, graphs[6].graph_id)
    assert sorted(len(rows) for rows in held.values()) == [3, 3]
    assert all(all(row) for rows in held.values() for row in rows)


def test_routed_advances_are_batched_by_their_pieces_not_by_whole_paths(cpu):
    """On a partition of a graph cut in several a walker writes at most ROUTED_ROOM ids' worth outside its walk's row
    in an advance: its batches are bounded by that room, not a whole path's (R-MAT 23 in 2 partitions on one GPU ran
    3 batches an advance, 122 advances in all). The same limit does split the whole graph's walks."""
    from gpipe.walks._first_order import ROUTED_ROOM

    walks = 1024 * 4
    limit = 4 * ROUTED_ROOM * 4 * walks  # a quarter holds every walker's pieces; a quarter of their paths
    runs = {}
    for parts in (2, 1):
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=parts)
        for lim in (limit, None):
            with dask.config.set({"gpipe.memory.output-limit": lim}):
                runs[parts, lim] = gpipe.walks.deepwalk(g, length=80, walks_per_vertex=4, seed=3)
    assert runs[2, limit].stats["batches"] == runs[2, None].stats["batches"]
    assert runs[1, limit].stats["batches"] > runs[1, None].stats["batches"]
    np.testing.assert_array_equal(runs[2, limit].compute(), runs[1, None].compute())


def _no_room_to_join(broken: bool, dask_worker=None) -> None:
    """On a worker: partitions cannot be joined (out of memory), or can again."""
    from gpipe.graph._partition import Partition

    if broken:
        def refused(parts):
            raise MemoryError("no room")

        Partition._join, Partition.join = Partition.join, staticmethod(refused)
    elif hasattr(Partition, "_join"):
        Partition.join = staticmethod(Partition._join)


def test_partitions_with_no_room_to_join_walk_on_their_own(cpu):
    g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=6)
    cpu.run(_no_room_to_join, True)
    try:
        apart = gpipe.walks.deepwalk(g, length=20, seed=3)
        paths = apart.compute()
    finally:
        cpu.run(_no_room_to_join, False)
    joined = gpipe.walks.deepwalk(g, length=20, seed=3)
    np.testing.assert_array_equal(paths, joined.compute())
    assert apart.stats["batches"] > 2 * joined.stats["batches"]  # each partition and crossing its own launch


def test_seed_controls_the_walks(cpu):
    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=2, partitions=2)
    a = gpipe.walks.deepwalk(g, length=10, seed=1).compute()
    np.testing.assert_array_equal(a, gpipe.walks.deepwalk(g, length=10, seed=1).compute())
    assert not np.array_equal(a, gpipe.walks.deepwalk(g, length=10, seed=2).compute())


def test_explicit_starts_with_string_ids(cpu):
    edges = pd.DataFrame({"src": ["a", "b", "c", "c", "e"], "dst": ["b", "c", "a", "d", "a"]})
    g = gpipe.from_edges(edges, partitions=2)
    w = gpipe.walks.deepwalk(g, length=8, start=["d", "a", "d"], walks_per_vertex=2, seed=4)
    walks = w.compute()
    assert walks.shape == (6, 9) and walks.dtype == object
    assert walks[:, 0].tolist() == ["d", "a", "d"] * 2
    names = set(edges.src) | set(edges.dst)
    assert all(x in names for x in walks.ravel())


@pytest.mark.parametrize("layout", [{"partitions": 3}, {"mode": "replicated"}])
def test_consecutive_starts_go_as_a_range_and_walk_as_listed_ones(cpu, layout):
    from gpipe.runtime import StartSet

    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=2, **layout)
    starts = np.arange(10, 200)
    assert StartSet.of(starts, 2, np.int32).vertices == range(10, 200)
    assert isinstance(StartSet.of(np.r_[starts, 5], 2, np.int32).vertices, np.ndarray)
    for bounds in ([0, 5, 10, 150, 199, 200, 256], [0, 256], [0, 11, 256]):  # each partition's walkers
        np.testing.assert_array_equal(StartSet.of(starts, 2, np.int32).per_partition(np.asarray(bounds)),
                                      StartSet(starts.astype(np.int32), 2).per_partition(np.asarray(bounds)))
    ranged = gpipe.walks.deepwalk(g, length=6, start=starts, seed=2).compute()
    listed = gpipe.walks.deepwalk(g, length=6, start=np.r_[starts, 5], seed=2).compute()  # walk i from start i
    np.testing.assert_array_equal(ranged, listed[:-1])
    assert (ranged[:, 0] == starts).all() and (ranged[:, 1:] >= 0).any()


def test_directed_dead_ends_pad_with_minus_one(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3]}), directed=True, partitions=2)
    walks = gpipe.walks.deepwalk(g, length=5, seed=0).compute()
    np.testing.assert_array_equal(walks, [[0, 1, 2, 3, -1, -1], [1, 2, 3, -1, -1, -1],
                                          [2, 3, -1, -1, -1, -1], [3, -1, -1, -1, -1, -1]])


def test_outputs_corpus_parquet_dask_and_stats(cpu, tmp_path):
    import dask

    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=3, partitions=3)
    with dask.config.set({"gpipe.walks.block-size": 100}):
        w = gpipe.walks.deepwalk(g, length=7, seed=1)
    walks = w.compute()
    assert w.stats["steps"] == int((walks[:, 1:] >= 0).sum()) > 0
    assert w.stats["steps_per_second"] > 0 and w.stats["supersteps"] >= 1
    lines = open(w.to_corpus(tmp_path / "walks.txt")).read().splitlines()
    assert lines == [" ".join(map(str, row[row >= 0])) for row in walks]
    frame = pd.read_parquet(w.to_parquet(tmp_path / "walks.parquet")).sort_values("walk")
    np.testing.assert_array_equal(frame["walk"], np.arange(len(walks)))
    np.testing.assert_array_equal(frame[[f"step_{j}" for j in range(8)]].to_numpy(), walks)
    np.testing.assert_array_equal(w.to_dask().compute(), walks)
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary leftovers


def test_map_blocks_runs_where_each_block_is_on_its_dense_ids(cpu):
    import dask
    import distributed

    edges = pd.DataFrame({"src": ["a", "b", "c", "d", "d"], "dst": ["b", "c", "d", "a", "e"]})
    g = gpipe.from_edges(edges, directed=True, partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 2}):
        w = gpipe.walks.deepwalk(g, length=6, walks_per_vertex=3, seed=5)
    futures = w.map_blocks(lambda block, add, times=1: (block + add) * times, 1, times=2)
    assert len(futures) == -(-w.num_walks // w.block_rows) == 8
    distributed.wait(futures)
    held = cpu.who_has(futures)
    assert all(held[f.key] for f in futures)  # each result is on a worker until gathered
    dense = np.concatenate(cpu.gather(futures)) // 2 - 1
    walks = w.compute()
    np.testing.assert_array_equal(dense == -1, walks == None)  # noqa: E711 (an object array of ids)
    np.testing.assert_array_equal(g.to_original(dense[dense >= 0]), walks[walks != None])  # noqa: E711
    with pytest.raises(GpipeValueError, match="'fn' must be callable, got 3"):
        w.map_blocks(3)
    with pytest.raises(GpipeValueError, match="'fn' must be picklable"):
        w.map_blocks(lambda block, lock=threading.Lock(): block)
    s = gpipe.sampling.neighbor(g, seeds=["a"], fanouts=1, depth=1, seed=0)
    with pytest.raises(GpipeValueError, match="'fn' must be callable, got 'sum'"):
        s.map_blocks("sum")


def test_corpus_with_string_ids(cpu, tmp_path):
    g = gpipe.from_edges(pd.DataFrame({"src": ["a-b", "x"], "dst": ["x", "y"]}), directed=True, partitions=1)
    w = gpipe.walks.deepwalk(g, length=3, seed=0)
    assert open(w.to_corpus(tmp_path / "c.txt")).read() == "a-b x y\nx y\ny\n"


@pytest.mark.parametrize("ids", [None, np.arange(60) * -7 + 3, np.array([f"v\u00e9{i}" for i in range(60)])],
                         ids=["dense", "integer ids", "string ids"])
def test_corpus_and_parquet_written_by_1_or_2_workers_are_the_same_files(cpu_cluster, one_worker_cluster, tmp_path,
                                                                          ids):
    import dask

    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
    edges = pd.DataFrame({"src": src, "dst": dst} if ids is None else {"src": ids[src], "dst": ids[dst]})
    written = []
    for client in (one_worker_cluster, cpu_cluster):
        with client.as_current(), dask.config.set({"gpipe.walks.block-size": 7}):
            w = gpipe.walks.deepwalk(gpipe.from_edges(edges, directed=True, partitions=2), length=6,
                                     walks_per_vertex=2, seed=4)
            folder = tmp_path / f"{len(client.nthreads())}"
            corpus = open(w.to_corpus(folder / "c.txt"), "rb").read()
            w.to_parquet(folder / "walks")
            parts = {p.name: pd.read_parquet(p) for p in sorted((folder / "walks").glob("*.parquet"))}
            lines = [" ".join(str(v) for v in row if v is not None and v != -1) for row in w.compute()]
            assert corpus == ("\n".join(lines) + "\n").encode()
            written.append((corpus, parts))
    assert written[0][0] == written[1][0]
    assert written[0][1].keys() == written[1][1].keys() and len(written[0][1]) == 18
    for name, frame in written[0][1].items():
        pd.testing.assert_frame_equal(frame, written[1][1][name])
    assert not list(tmp_path.glob("**/.*tmp*"))


def test_corpus_refuses_ids_that_would_not_read_back_as_one_token(cpu, tmp_path):
    """Spaces separate ids and newlines walks: 'New York' would read back as two ids; '' as none."""
    edges = pd.DataFrame({"src": ["New York", "two\nlines", "", "tab\there"], "dst": ["ok", "ok", "ok", "ok"]})
    w = gpipe.walks.deepwalk(gpipe.from_edges(edges, partitions=2), length=3, seed=0)
    with pytest.raises(GpipeValueError, match=r"4 are not, e.g. '', 'New York', 'tab\\there'"):
        w.to_corpus(tmp_path / "c.txt")
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_corpus_kernels_write_every_integer_as_python_does():
    """The corpus's integer formatting (two digits a step, lengths by comparisons) against ``str``, for ids of every
    length and sign, int64's extremes included, in rows padded with -1 at any point."""
    from gpipe.walks._result import _corpus_fill, _corpus_row_sizes

    rng = np.random.default_rng(5)
    ids = np.concatenate([[0, -1, 9, 10, 99, 100, -10, -2**63, 2**63 - 1, -(2**63 - 1)], 10 ** rng.integers(
        0, 19, 500) + rng.integers(-9, 9, 500), -(10 ** rng.integers(0, 19, 500)) + rng.integers(-9, 9, 500)])
    dense = rng.integers(0, ids.size, (300, 9))
    lengths = rng.integers(0, 10, 300)  # a walk ends anywhere (9: not at all; 0: an empty line)
    dense[np.arange(9) >= lengths[:, None]] = -1
    sizes = _corpus_row_sizes(dense, 1, ids.astype(np.int64), np.zeros(1, np.int64))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    text = np.empty(int(sizes.sum()), np.uint8)
    _corpus_fill(dense, 1, ids.astype(np.int64), np.zeros(0, np.uint8), np.zeros(1, np.int64), starts, text)
    lines = [" ".join(str(ids[d]) for d in row[:n]) for row, n in zip(dense, lengths)]
    assert text.tobytes() == "".join(line + "\n" for line in lines).encode()


@pytest.mark.parametrize("ids", [[-1, 0, -5, 3], [-2**63, 0, 2**63 - 1, 3], ["a", "b", "c", "d"]])
def test_walks_pad_with_none_where_minus_one_could_be_an_id(cpu, tmp_path, ids):
    """-1 is a vertex here (or ids are not integers), so it cannot mark a walk's end: every output pads with None
    (null), and the Parquet blocks read back as one table although the first block has only null columns."""
    import dask

    g = gpipe.from_edges(pd.DataFrame({"src": ids[:-1], "dst": ids[1:]}), directed=True, partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 1}):
        w = gpipe.walks.deepwalk(g, length=4, start=[ids[3], ids[0]], seed=0)
    expected = np.array([[ids[3], None, None, None, None], [*ids, None]], dtype=object)
    walks = w.compute()
    assert walks.dtype == object
    np.testing.assert_array_equal(walks, expected)
    dask_walks = w.to_dask()
    assert dask_walks.dtype == object
    np.testing.assert_array_equal(dask_walks.compute(), expected)
    frame = pd.read_parquet(w.to_parquet(tmp_path / "walks")).sort_values("walk")
    steps = frame[[f"step_{j}" for j in range(5)]].astype(object)
    assert steps.where(steps.notna(), None).to_numpy().tolist() == expected.tolist()
    assert open(w.to_corpus(tmp_path / "c.txt")).read() == f"{ids[3]}\n{' '.join(map(str, ids))}\n"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"length": 0}, "'length' must be a positive integer, got 0"),
        ({"length": -3}, "'length' must be a positive integer, got -3"),
        ({"length": 2.5}, "'length' must be an integer, got 2.5"),
        ({"walks_per_vertex": 0}, "'walks_per_vertex' must be a positive integer, got 0"),
        ({"seed": -1}, "'seed' must be an integer >= 0, got -1"),
        ({"start": [0, 99999]}, "'start' must hold vertices of the graph; 1 do not, e.g. \\[99999\\]"),
        ({"start": []}, "'start' must hold at least one vertex"),
        ({"weighted": True}, "'weighted' needs a graph with edge weights"),
    ],
)
def test_bad_parameters_are_rejected_by_name(cpu, kwargs, message):
    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=1)
    with pytest.raises(GpipeValueError, match=message):
        gpipe.walks.deepwalk(g, **kwargs)


def _pieces_of(run_id, dask_worker=None):
    """How many partitions' outputs of the run this worker holds (their pieces; the rows its steps wrote count as
    one partition's); None once the run has left its store."""
    run = dask_worker.plugins["gpipe"].runs.get(run_id)
    return None if run is None else max(len(run._pieces), int(run.rows is not None))


def test_pieces_stay_on_workers_until_assembled_or_dropped(cpu, eventually):
    import gc

    def held(run_id):
        return [n for n in cpu.run(_pieces_of, run_id).values() if n is not None]

    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, partitions=3)
    w = gpipe.walks.deepwalk(g, length=5, seed=0)
    assert held(w._run_id) == [1]  # its one block's outputs, gathered where it is made; the other worker holds none
    t0 = time.perf_counter()
    assembled = w.persist().stats["assemble_seconds"]
    assert 0 < assembled <= time.perf_counter() - t0  # the assembly's own time, within the call's
    assert w.persist().stats["assemble_seconds"] == assembled  # assembled once
    assert held(w._run_id) == []  # assembling took them, and the run left every worker's store
    w = gpipe.walks.deepwalk(g, length=5, seed=0)  # never assembled: freed when collected
    run_id = w._run_id
    del w
    gc.collect()
    assert eventually(lambda: held(run_id) == [])


def _break_assembly(broken: bool):
    """On a worker: make every block's assembly fail (out of memory, say), or mend it."""
    from gpipe.runtime import _pieces

    if broken:
        _pieces._mended = _pieces.owned_blocks

        def owned_blocks(*args):
            raise MemoryError("no room for the block")

        _pieces.owned_blocks = owned_blocks
    elif hasattr(_pieces, "_mended"):
        _pieces.owned_blocks = _pieces._mended


def test_a_failed_assembly_lets_the_run_go_at_once(cpu, eventually):
    """What the run left on the workers goes when its blocks cannot be made (nothing else would free it: the
    next runs would meet a full device), and the result then says so instead of assembling nothing."""
    def held(run_id):
        return [n for n in cpu.run(_pieces_of, run_id).values() if n is not None]

    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, partitions=3)
    w = gpipe.walks.deepwalk(g, length=5, seed=0)
    assert held(w._run_id) == [1]  # its pieces, gathered on the worker making its one block
    cpu.run(_break_assembly, True)
    try:
        with pytest.raises(Exception, match="no room for the block"):
            w.compute()
    finally:
        cpu.run(_break_assembly, False)
    assert eventually(lambda: held(w._run_id) == [])
    with pytest.raises(GpipeError, match="assembly failed and its runs were let go; run it again"):
        w.compute()
    again = gpipe.walks.deepwalk(g, length=5, seed=0).compute()
    assert again.shape == (g.num_vertices, 6)


def _blocks_kept(dask_worker=None) -> list:
    """On a worker: the keys of the result blocks in its data."""
    return [key for key in dask_worker.data if str(key).startswith("gpipe-assemble-")]


def _made_by_tasks(keys: list, dask_scheduler=None) -> list:
    """On the scheduler: whether each of ``keys`` is a task's result (it has a task to run), not data put there."""
    return [dask_scheduler.tasks[key].run_spec is not None for key in keys]


def test_blocks_are_kept_without_a_task_and_none_is_left_when_one_worker_fails(cpu, eventually):
    """The blocks are made by direct calls and kept as Dask data (no task's round trips through the scheduler),
    held by the result's futures; when one worker cannot make its blocks, the blocks the other made go too."""
    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 64}):  # blocks on both workers
        w = gpipe.walks.deepwalk(g, length=5, seed=0).persist()
    kept = cpu.run(_blocks_kept)
    assert all(kept.values()) and sum(len(k) for k in kept.values()) == -(-g.num_vertices // 64)
    blocks = w._blocks()
    assert {key: set(workers) for key, workers in cpu.who_has(blocks).items()} == {
        key: {worker} for worker, keys in kept.items() for key in keys}  # the scheduler knows where each is
    assert all(f.status == "finished" for f in blocks)
    assert cpu.run_on_scheduler(_made_by_tasks, [f.key for f in blocks]) == [False] * len(blocks)
    del blocks
    del w
    gc.collect()
    assert eventually(lambda: not any(cpu.run(_blocks_kept).values()))  # released with the result

    with dask.config.set({"gpipe.walks.block-size": 64}):
        w = gpipe.walks.deepwalk(g, length=5, seed=0)
    first, second = sorted(cpu.scheduler_info()["workers"])
    cpu.run(_break_assembly, True, workers=[second])
    try:
        with pytest.raises(Exception, match="no room for the block"):
            w.compute()
    finally:
        cpu.run(_break_assembly, False)
    assert eventually(lambda: not any(cpu.run(_blocks_kept).values()))
    # nor a mark: the failed worker's drop follows its failure, the other's call ends after its drop
    assert eventually(lambda: [state["marked"] for state in cpu.run(kept_for_clients).values()] == [0, 0])


def _assembled_at_scheduler(dask_scheduler=None) -> dict:
    """On the scheduler: the result blocks it knows of, and their bytes."""
    return {key: ts.nbytes for key, ts in dask_scheduler.tasks.items() if str(key).startswith("gpipe-assemble-")}


def test_a_replicated_walk_tells_the_scheduler_of_its_blocks_as_it_runs_and_none_outlives_a_failure(
        one_worker_cluster, eventually):
    """On one replica the blocks are made as the run ends and the scheduler is told of them while it runs: they are
    its exact bytes, finished, held by the result, and released with it; a run that fails keeps none, and the
    scheduler none of them."""
    client = one_worker_cluster
    with client.as_current():
        g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, mode="replicated")
        with dask.config.set({"gpipe.walks.block-size": 64}):
            w = gpipe.walks.deepwalk(g, length=5, seed=0).persist()
        blocks = w._blocks()
        assert len(blocks) == -(-g.num_vertices // 64) and all(f.status == "finished" for f in blocks)
        values = client.gather(blocks)
        assert client.run_on_scheduler(_assembled_at_scheduler) == {f.key: v.nbytes for f, v in zip(blocks, values)}
        assert [set(kept) for kept in client.run(_blocks_kept).values()] == [{f.key for f in blocks}]
        np.testing.assert_array_equal(np.concatenate(values), w.compute())
        del blocks, values, w
        gc.collect()
        assert eventually(lambda: not client.run_on_scheduler(_assembled_at_scheduler))
        assert eventually(lambda: not any(client.run(_blocks_kept).values()))

        client.run(_break_assembly, True)
        try:
            with pytest.raises(Exception, match="no room for the block"):
                gpipe.walks.deepwalk(g, length=5, seed=0)
        finally:
            client.run(_break_assembly, False)
        assert eventually(lambda: not client.run_on_scheduler(_assembled_at_scheduler))
        assert not any(client.run(_blocks_kept).values())
        assert gpipe.walks.deepwalk(g, length=5, seed=0).compute().shape == (g.num_vertices, 6)


def _slow_assembly(slow: bool):
    """On a worker: make every block's assembly take a second longer, or mend it."""
    from gpipe.runtime import _pieces

    if slow:
        _pieces._quick = _pieces.owned_blocks

        def owned_blocks(*args):
            time.sleep(1.0)
            return _pieces._quick(*args)

        _pieces.owned_blocks = owned_blocks
    elif hasattr(_pieces, "_quick"):
        _pieces.owned_blocks = _pieces._quick


def test_blocks_a_worker_finishes_after_the_call_failed_elsewhere_are_not_kept(cpu, eventually):
    """One worker fails at once while the other is still making its blocks: once the slow one ends, neither
    holds a block (its call finds the run let go, or keeps none of the blocks dropped before they were made)."""
    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 64}):
        w = gpipe.walks.deepwalk(g, length=5, seed=0)
    first, second = sorted(cpu.scheduler_info()["workers"])
    cpu.run(_break_assembly, True, workers=[first])
    cpu.run(_slow_assembly, True, workers=[second])
    try:
        started_at = time.monotonic()
        with pytest.raises(Exception, match="no room for the block"):
            w.compute()
        assert time.monotonic() - started_at < 1.0  # the failure came first: the other worker was still busy
        time.sleep(1.5)  # its blocks are made by now
    finally:
        cpu.run(_break_assembly, False)
        cpu.run(_slow_assembly, False)
    assert not any(cpu.run(_blocks_kept).values())


async def _dropped_then_kept(dask_worker=None) -> tuple:
    """On a worker's loop: a value dropped before it is kept is not kept, and its mark goes with the call making
    it; one kept, then dropped, goes; a key another worker makes is not marked here; the keys of a call that
    failed are marked until the drop that follows the failure."""
    here = dask_worker.plugins["gpipe"]
    keys = ["gpipe-assemble-test-0", "gpipe-assemble-test-1"]

    def marks() -> dict:
        return {key: why for key, why in here._unwanted.items() if str(key).startswith("gpipe-assemble-test-")}

    await here.drop({dask_worker.address: keys[:1], "tcp://elsewhere:1": ["gpipe-assemble-test-2"]})
    marked = marks()
    await here.keep({key: np.ones(3) for key in keys}, keys)
    kept = sorted(str(key) for key in dask_worker.data if str(key).startswith("gpipe-assemble-test-"))
    await here.drop({dask_worker.address: keys[1:]})
    left = [str(key) for key in dask_worker.data if str(key).startswith("gpipe-assemble-test-")]
    await here.keep(None, ["gpipe-assemble-test-3"])
    failed = marks()
    await here.drop({dask_worker.address: ["gpipe-assemble-test-3"]})
    return marked, kept, left, failed, marks()


def test_a_worker_keeps_no_value_dropped_before_it_was_made(cpu):
    assert list(cpu.run(_dropped_then_kept).values()) == [
        ({"gpipe-assemble-test-0": "dropped"}, ["gpipe-assemble-test-1"], [], {"gpipe-assemble-test-3": "failed"},
         {})] * 2


def test_a_failed_step_lets_go_of_its_arrays_at_once():
    """A step that fails keeps nothing alive through its error: the arrays its frames held are freed as the
    failure is raised, not when the garbage collector next breaks the traceback's cycles (on a GPU, the next
    runs met a device still full)."""
    import gc
    import weakref

    from gpipe.errors import TaskError
    from gpipe.runtime.workers import failing

    held = []

    def step():
        paths = np.ones(1000)
        held.append(weakref.ref(paths))
        raise MemoryError("out of memory allocating the next buffer")

    gc.disable()
    try:
        with pytest.raises(TaskError, match="advance failed in superstep 0, partition 3: MemoryError") as failure:
            with failing("advance", 3, 0):
                step()
        assert failure.value.__cause__ is not None  # the cause is kept, its frames' arrays are not
        assert held[0]() is None
    finally:
        gc.enable()


def test_bad_exchange_is_rejected_by_name(cpu):
    import dask

    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=2, partitions=2)
    with dask.config.set({"gpipe.exchange": "nvlink"}), pytest.raises(
            GpipeValueError, match="'gpipe.exchange' must be one of 'auto', 'nccl', 'comms'; got 'nvlink'"):
        gpipe.walks.deepwalk(g, length=3)
    with dask.config.set({"gpipe.exchange": "nccl"}), pytest.raises(
            GpipeValueError, match="'nccl' needs GPU workers; the graph is on cpu workers"):
        gpipe.walks.deepwalk(g, length=3)


@pytest.mark.parametrize("sets", [1, 3, 9])
@pytest.mark.parametrize("layout", ["random sets", "walk order", "shuffled"])
def test_pieces_grouped_by_block_in_batches_are_the_blocks_of_all_pieces_at_once(sets, layout):
    """Grouping takes the piece sets a batch at a time (each freed once split): every block holds the same pieces,
    and the list handed in is emptied. Sets whose pieces are in walk order (a replicated run's batches; here also
    the random sets, each filled walk by walk) are cut into their blocks' ranges; shuffled pieces take the batches."""
    from gpipe.runtime import _pieces

    rng = np.random.default_rng(sets)
    width, walks, block_rows = 9, 40, 16
    chosen = [[] for _ in range(sets)]  # each walk's steps cut into pieces, each piece into a random set
    for w in range(walks):
        cuts = np.unique(np.concatenate([[0, width], rng.integers(1, width, 3)]))
        for start, end in zip(cuts[:-1], cuts[1:]):
            chosen[w * sets // walks if layout == "walk order" else rng.integers(sets)].append((w, start, end - start))
    piece_sets = []
    for mine in chosen:
        walk_id, start, length = (np.array(c, dtype) for c, dtype in zip(zip(*mine), (np.int64, np.int32, np.int32)))
        offset = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64) * 2  # gaps between pieces
        flat = rng.integers(0, 1000, int(offset[-1] + length[-1])).astype(np.int64)
        shuffle = rng.permutation(len(mine)) if layout == "shuffled" else np.arange(len(mine))
        piece_sets.append({"walk_id": walk_id[shuffle], "start": start[shuffle], "length": length[shuffle],
                           "offset": offset[shuffle], "flat": flat})
    assert all(_pieces._in_order(p, p["walk_id"] // block_rows) for p in piece_sets) == (layout != "shuffled")
    n_blocks = -(-walks // block_rows)

    def blocks(groups):
        return [_pieces.scatter(np, groups[b], b * block_rows, min(block_rows, walks - b * block_rows), width,
                                np.int64) for b in range(n_blocks)]

    whole = _pieces.concat(np, piece_sets, np.int64)
    expected = [_pieces.scatter(np, whole, 0, walks, width, np.int64)[b * block_rows:(b + 1) * block_rows]
                for b in range(n_blocks)]
    given = list(piece_sets)
    groups = _pieces.group_by_block(np, given, block_rows, n_blocks, np.int64)
    got = blocks(groups)
    assert given == []
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    layout_of = gpipe.runtime.results.output_blocks(walks, width, block_rows, np.int64)
    for ranks in (1, 2, 3):  # each rank's blocks made at once from their pieces (a gathered run's)
        for rank in range(ranks):
            mine = [{k: v[p["walk_id"] // block_rows % ranks == rank] if k != "flat" else v for k, v in p.items()}
                    for p in piece_sets]
            owned = _pieces.owned_blocks(_pieces.OwnedRows.made(lambda nbytes: np, layout_of, ranks, rank), mine)
            assert mine == [] and sorted(owned) == list(range(rank, n_blocks, ranks))
            for b, block in owned.items():
                np.testing.assert_array_equal(block, expected[b])
    if layout == "shuffled":  # the groups hold no batch: each array is its own, or views at most one word more
        held = {id(a if a.base is None else a.base): (a if a.base is None else a.base).nbytes
                for group in groups.values() for a in group.values()}
        assert sum(held.values()) <= sum(a.nbytes + 8 for group in groups.values() for a in group.values())


def test_pieces_grouped_by_block_in_small_batches_hold_less_than_twice_the_pieces(monkeypatch):
    """Each block's share of a batch is copied out of it, so a batch goes once it is split: with views into the
    batches, every batch stayed until the last block was joined (twice the pieces here; at R-MAT 24 on a GPU,
    whose batches are a 16th of its free memory, the assembly ran out of device memory)."""
    import tracemalloc

    from gpipe.runtime import _pieces

    monkeypatch.setattr(_pieces, "GROUPING_BATCHES", 16)
    rng = np.random.default_rng(0)
    walks, n = 200_000, 60_000
    piece_sets = [{"walk_id": rng.integers(0, walks, n), "start": rng.integers(0, 9, n).astype(np.int32),
                   "length": np.ones(n, np.int32), "offset": np.arange(n, dtype=np.int64),
                   "flat": rng.integers(0, 1000, n)} for _ in range(16)]
    total = sum(a.nbytes for p in piece_sets for a in p.values())
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        groups = _pieces.group_by_block(np, piece_sets, 4096, -(-walks // 4096), np.int64)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert sum(a.nbytes for g in groups.values() for a in g.values()) <= total
    assert peak < 1.8 * total, f"grouping held {peak / total:.2f} times the pieces"  # 1.58 (2.01 with views)


def _count_borrowing(on: bool, dask_worker=None) -> int:
    """On a worker: count the lists its steps fetch from peers mid-superstep (``Peers.neighbor_lists``) from now
    on, or stop and say how many."""
    from gpipe.runtime._peers import Peers

    if on:
        fetch = Peers.neighbor_lists
        dask_worker._borrowed = 0

        def counted(self, *args):
            dask_worker._borrowed += 1
            return fetch(self, *args)

        Peers._fetch, Peers.neighbor_lists = fetch, counted
        return 0
    Peers.neighbor_lists = Peers._fetch
    return dask_worker._borrowed


@pytest.mark.parametrize("p, q", [(0.5, 2.0), (4.0, 0.25)])
def test_node2vec_walkers_take_their_previous_vertexs_list_along_and_borrow_none(cpu, p, q):
    """A walker leaving a worker takes the list of the vertex it came from along (once a run to each peer): the
    steps on the other side find it there and fetch nothing mid-superstep, and the walks are one partition's."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=3, partitions=4, weighted=True)
    one = gpipe.walks.node2vec(gpipe.generators.rmat(scale=9, edge_factor=4, seed=3, partitions=1, weighted=True),
                               length=20, p=p, q=q, walks_per_vertex=2, seed=8).compute()
    cpu.run(_count_borrowing, True)
    try:
        w = gpipe.walks.node2vec(g, length=20, p=p, q=q, walks_per_vertex=2, seed=8)
        paths = w.compute()
    finally:
        fetched = cpu.run(_count_borrowing, False)
    assert w.stats["workers"] == 2 and w.stats["lent_bytes"] > 0 and w.stats["walker_bytes"] > 0
    assert sum(fetched.values()) == 0
    np.testing.assert_array_equal(paths, one)


def test_borrowed_lists_are_fetched_once_a_run_and_kept_by_id(monkeypatch):
    import importlib
    from types import SimpleNamespace

    from gpipe.runtime.exchange import LentLists

    borrowing = importlib.import_module("gpipe.walks._borrowed")

    lists = {0: [1, 3], 1: [], 2: [0, 1, 2], 3: [3], 5: [0, 4]}  # the other partitions' rows
    asked = []

    def fetch(graph, bounds, vertices):
        asked.append(vertices.tolist())
        lengths = [len(lists[v]) for v in vertices.tolist()]
        return np.concatenate([[0], np.cumsum(lengths)]), np.array([u for v in vertices.tolist() for u in lists[v]])

    monkeypatch.setattr(borrowing, "neighbor_lists", fetch)
    monkeypatch.setattr(borrowing, "worker_xp", lambda: np)
    borrowed = LentLists()
    run, graph = SimpleNamespace(state=lambda kind: borrowed), ("g", [])

    def rows(csr):
        ids, indptr, indices = csr
        return {int(v): indices[indptr[i]:indptr[i + 1]].tolist() for i, v in enumerate(ids)}

    assert borrowing.borrowed_lists(run, graph, None) is None  # nothing borrowed yet
    assert rows(borrowing.borrowed_lists(run, graph, None, np.array([2, 5]), most=100)) == {2: [0, 1, 2], 5: [0, 4]}
    got = borrowing.borrowed_lists(run, graph, None, np.array([0, 1, 5]), most=100)
    assert asked == [[2, 5], [0, 1]] and list(got[0]) == [0, 1, 2, 5]  # 5 was kept: not fetched again
    assert rows(got) == {v: lists[v] for v in (0, 1, 2, 5)}
    assert rows(borrowing.borrowed_lists(run, graph, None)) == rows(got)  # kept for the next launch
    assert borrowing.borrowed_lists(run, graph, None, np.array([2]), most=100) is borrowed.kept["g"]
    assert len(asked) == 2
    full = borrowing.borrowed_lists(run, graph, None, np.array([3, 5]), most=7)  # 7 edges kept: full
    assert rows(full) == {3: [3], 5: [0, 4]} and asked[-1] == [3, 5]
    assert rows(borrowing.borrowed_lists(run, graph, None)) == rows(got)
    # lists walkers brought along (here 3's and 5's, 5 kept already) are kept first, and fetched no more
    borrowed.arrived.append((np.array([3, 5]), np.array([0, 1, 3]), np.array([3, 0, 4])))
    assert rows(borrowing.borrowed_lists(run, graph, None, np.array([3]), most=100)) == {
        v: lists[v] for v in (0, 1, 2, 3, 5)}
    assert len(asked) == 3 and not borrowed.arrived
    borrowed.arrived.append((np.array([7]), np.array([0, 2]), np.array([1, 2])))
    assert rows(borrowing.borrowed_lists(run, graph, None, most=9))[7] == [1, 2]  # 8 edges kept: room for them
    borrowed.arrived.append((np.array([8]), np.array([0, 1]), np.array([0])))
    assert 8 not in rows(borrowing.borrowed_lists(run, graph, None, most=9))  # 10: full, not kept


@pytest.mark.parametrize("teleport, alpha, weighted", [(0, 0.0, False), (0, 0.0, True), (1, 0.2, False),
                                                       (2, 0.3, False)])
@pytest.mark.parametrize("lo, hi", [(100, 200), (5, 300)])  # a third of the graph; most of it (pieces stop at STAGE)
@pytest.mark.parametrize("ranks", [0, 3])  # every walker writes pieces; those of 4 blocks in 10 write to rows
@pytest.mark.parametrize("local", [(1, 1, 1), (0, 1, 0), (0, 0, 0)])  # all here; its own; none (no carrying)
def test_the_routed_first_order_advance_is_the_plain_one_cut_where_it_leaves(teleport, alpha, weighted, lo, hi,
                                                                              ranks, local):
    """The fused advance of a partition of several writes each walker's vertices (to its walk's row on the worker
    making its block, for as long as it stays; else as pieces, at most STAGE vertices) after the cells it arrived
    with, and the walkers that move on: the plain advance's vertices, cut where the walker left, or at STAGE for
    pieces, and the walkers that left or stopped there, where they are. A sector is stored whole once full; the
    cells of the one not yet full go on with a walker moving to a partition of this worker, and are stored where
    it ends or leaves the worker."""
    import importlib

    from gpipe.walks._graphs import PICK_ALIAS, PICK_UNIFORM

    first_order = importlib.import_module("gpipe.walks._first_order")
    stage = first_order.STAGE
    routed = routed_first_order(np, teleport, alpha, lo, hi, weighted, ranks, local)
    inputs = routed["inputs"]
    n, width = len(inputs["walk_id"]), 41
    plain = dict(flat=np.full(n * width, -1, np.int32), piece_len=np.empty(n, np.int32),
                 out_vertex=np.empty(n, np.int64), out_step=np.empty(n, np.int32), moved=np.empty(n, np.int8))
    plain_inputs = {k: v for k, v in inputs.items() if k in ("indptr", "indices", "table", "walk_id", "source",
                                                               "vertex", "step")}
    first_order.ADVANCE.launch(**plain_inputs, **plain, offset=np.arange(n, dtype=np.int64) * width,
                               weighted=PICK_ALIAS if weighted else PICK_UNIFORM,
                               lo=lo, hi=hi, num_vertices=300, key=np.uint64(gpipe._rng.key(7)), length=40,
                               alpha=alpha, teleport=teleport, n=n)
    away = ~routed["home"]
    stopped = (plain["piece_len"] > stage) & away
    walked = np.where(away, np.minimum(plain["piece_len"], stage), plain["piece_len"])
    arrived = inputs["step"] - routed["start"]  # cells it arrived with
    for i, vertices in enumerate(routed["vertices"]):
        expected = np.concatenate([routed["cells"][i][:arrived[i]], plain["flat"][i * width:i * width + walked[i]]])
        np.testing.assert_array_equal(vertices, expected, err_msg=f"walker {i}")
    moving = (plain["moved"] == 1) | stopped
    at = np.arange(n) * width + stage
    vertex = np.where(stopped, plain["flat"][np.minimum(at, n * width - 1)], plain["out_vertex"])
    step = np.where(stopped, inputs["step"] + stage, plain["out_step"])
    order = np.argsort(inputs["walk_id"][moving])
    expected = {"walk_id": inputs["walk_id"], "source": inputs["source"], "vertex": vertex, "step": step}
    for name, values in expected.items():
        np.testing.assert_array_equal(routed["movers"][name], values[moving][order], err_msg=name)
    owner = np.searchsorted([lo, hi], routed["movers"]["vertex"], side="right")
    carrying = routed["movers"]["carried"] == 1
    assert not (carrying & (np.asarray(local)[owner] == 0)).any(), "none carries its cells off the worker"
    assert carrying.any() == (np.asarray(local)[owner] == 1).any()  # (2,000 walkers: some carry where they may)
    assert sum(len(c) for c in routed["carries"]) > 0 or not carrying.any()
    taken = np.where(stopped, stage, plain["out_step"] - inputs["step"])
    pieces = sum(len(v) for v, h in zip(routed["vertices"], routed["home"]) if not h)
    assert routed["counts"][1:3].tolist() == [moving.sum(), taken.sum()]
    assert routed["counts"][0] <= pieces  # the pieces' cells: their vertices but those carried on
    assert moving.any() and (lo > 50 or stopped.any()) and (ranks == 0 or 0 < away.sum() < n)
    if ranks and lo < 50:  # walkers writing their rows go on past STAGE where they stay
        assert (plain["piece_len"][routed["home"]] > stage).any()
    left = plain["out_vertex"][moving & ~stopped]
    assert ((left < lo) | (left >= hi)).all()  # every mover but a stopped piece's has left the partition


def _hold_communicator(key: str, dask_worker=None) -> None:
    """Give this worker's store a communicator ``key`` that records its abort (NCCL itself needs GPUs)."""
    from gpipe.runtime._store import PLUGIN_NAME

    class Held:
        aborted = False

        def abort(self):
            self.aborted = True

    dask_worker.plugins[PLUGIN_NAME].communicators._held[key] = Held()


def _held_communicators(dask_worker=None) -> list[str]:
    from gpipe.runtime._store import PLUGIN_NAME

    return sorted(dask_worker.plugins[PLUGIN_NAME].communicators._held)


def test_a_failed_runs_communicator_is_forgotten_on_every_worker(cpu):
    """What a failed NCCL run's lease asks of the workers (``client.run``, outside any task) reaches their stores:
    the communicator goes, where a worker has it, and a worker without it is no error."""
    from gpipe.runtime import _nccl

    cpu.run(_hold_communicator, "kept")
    cpu.run(_hold_communicator, "failed", workers=[sorted(cpu.scheduler_info()["workers"])[0]])
    cpu.run(_nccl.forget, "failed")
    assert list(cpu.run(_held_communicators).values()) == [["kept"], ["kept"]]
    cpu.run(_nccl.forget, "kept")
    assert list(cpu.run(_held_communicators).values()) == [[], []]


def test_nccl_runs_sharing_a_worker_take_turns_and_others_run_at_once(cpu, monkeypatch):
    """Two communicators at work on one GPU at once hung (or mixed walkers) at R-MAT 24: a run's lease waits until
    no other run uses NCCL on any of its workers, whichever client started it; runs on other workers go at once."""
    from gpipe.runtime import _nccl

    first, second = sorted(cpu.scheduler_info()["workers"])
    for workers in ((first, second), (first,)):  # communicators already made: no NCCL is needed to lease them
        monkeypatch.setitem(_nccl._FREE, (cpu.id, workers), ["made"])
    order, holding = [], threading.Event()

    def hold(workers):
        with _nccl.lease(cpu, list(workers)):
            order.append("a in")
            holding.set()
            time.sleep(1.0)
            order.append("a out")

    def after(workers):
        holding.wait()
        with _nccl.turn(cpu, list(workers)):
            order.append("b in")

    for held, wanted, expected in (((first, second), (second,), ["a in", "a out", "b in"]),
                                   ((first,), (second,), ["a in", "b in", "a out"])):
        order.clear()
        holding.clear()
        threads = [started(lambda: hold(held))[0], started(lambda: after(wanted))[0]]
        for thread in threads:
            thread.join(30)
        assert order == expected


async def _check_on(peer: str, ping: float, unresponsive: float, rounds: int, dask_worker=None) -> str:
    """What an exchange waiting on ``peer`` concludes from checking on it ``rounds`` times, with these limits."""
    from gpipe.runtime import _exchange

    _exchange.PING_SECONDS, _exchange.UNRESPONSIVE_SECONDS = ping, unresponsive
    unanswered: dict = {}
    try:
        for _ in range(rounds):
            await _exchange._ping(dask_worker, "a-test-run", [peer], "a test", unanswered)
    except Exception as exc:
        return str(exc)
    finally:
        _exchange.PING_SECONDS, _exchange.UNRESPONSIVE_SECONDS = 5.0, 60.0
    return "waits"


async def _message(peer: str, ping: float, unresponsive: float, dask_worker=None) -> str:
    """What a message to ``peer`` sent as an exchange sends its walkers comes to, with these limits."""
    from gpipe.runtime import _exchange

    class Going:
        def raise_if_failed(self, waiting=""):
            pass

    _exchange.PING_SECONDS, _exchange.UNRESPONSIVE_SECONDS = ping, unresponsive
    try:
        await _exchange._answered(dask_worker, Going(), peer, dask_worker.rpc(peer).identity(), "a test")
    except Exception as exc:
        return str(exc)
    finally:
        _exchange.PING_SECONDS, _exchange.UNRESPONSIVE_SECONDS = 5.0, 60.0
    return "answered"


@pytest.mark.parametrize("unresponsive, expected", [(60.0, "answered"), (0.5, "has not answered for")])
def test_a_message_to_a_busy_peer_waits_for_it_while_the_scheduler_lists_it(killable_cluster, unresponsive, expected):
    """The walkers a rank sends through Dask's comms wait for a busy peer (held past the ping), for at most
    ``UNRESPONSIVE_SECONDS``: a peer stopped with its connections open would otherwise hold the sender for good."""
    client = killable_cluster
    sender, busy = sorted(client.scheduler_info()["workers"])
    holding, _ = started(lambda: client.run(time.sleep, 4.0, workers=[busy]))  # on its event loop
    time.sleep(0.3)
    said = client.run(_message, busy, 0.2, unresponsive, workers=[sender])[sender]
    holding.join(10)
    assert said.startswith(expected) if expected == "answered" else expected in said, said


@pytest.mark.parametrize("unresponsive, expected", [(60.0, "waits"), (0.5, "has not answered for")])
def test_a_peer_busy_past_the_ping_is_waited_for_while_the_scheduler_lists_it(killable_cluster, unresponsive,
                                                                               expected):
    """A peer whose event loop is held past the ping (a long copy or serialization: at R-MAT 24 two runs at once
    failed so) is alive: the exchange waits on, for at most ``UNRESPONSIVE_SECONDS``; a worker the scheduler does
    not list fails at once."""
    client = killable_cluster
    waiting, busy = sorted(client.scheduler_info()["workers"])
    holding, _ = started(lambda: client.run(time.sleep, 4.0, workers=[busy]))  # on its event loop
    time.sleep(0.3)
    said = client.run(_check_on, busy, 0.2, unresponsive, 4, workers=[waiting])[waiting]
    assert holding.is_alive() and said.startswith(expected) if expected == "waits" else expected in said, said
    holding.join(10)
    nowhere = waiting.split("://")[0] + "://127.0.0.1:9"  # the cluster's own protocol (TLS: tcp is refused)
    gone = client.run(_check_on, nowhere, 0.2, 60.0, 1, workers=[waiting])[waiting]
    assert gone.endswith("while waiting for a test; the scheduler no longer lists it"), gone


def test_a_rank_stops_waiting_for_a_communicator_its_peers_never_finish():
    """A rank whose peers stopped making the communicator would stay in ncclCommInitRank for good: the run waits
    on it, watching the run, for a bounded time, then fails saying so; a join that ends is waited for."""
    import threading

    from gpipe.runtime import _nccl

    class Watch:
        calls = 0

        def start(self):
            pass

        def __call__(self, what):
            self.calls += 1

    never = threading.Event()
    stuck = threading.Thread(target=never.wait, daemon=True)
    stuck.start()
    watch, t0 = Watch(), time.monotonic()
    with pytest.raises(GpipeError, match="the NCCL communicator was not made in 0 s: a rank is stuck making it"):
        _nccl.joined(stuck, watch, 0.3)
    assert 0.3 <= time.monotonic() - t0 < 5 and watch.calls >= 3
    never.set()
    quick = threading.Thread(target=time.sleep, args=(0.2,))
    quick.start()
    _nccl.joined(quick, watch, 60)
    assert not quick.is_alive()


def test_a_worker_with_a_stuck_join_says_nccl_cannot_be_used_there(monkeypatch):
    """While a join its run gave up on is stuck (later ones in that process hung behind it at R-MAT 24), the worker
    says NCCL cannot be used there (what 'auto' and 'nccl' decide by), and says it no more once the join ends."""
    import threading

    from gpipe.runtime import _nccl

    stop = threading.Event()
    stuck = threading.Thread(target=stop.wait, daemon=True)
    stuck.start()
    monkeypatch.setattr(_nccl, "_ABANDONED", [stuck])
    reason, _ = _nccl.available()
    assert reason.startswith("a communicator this worker began making is stuck in ncclCommInitRank")
    stop.set()
    stuck.join()
    assert "stuck" not in str(_nccl.available()[0])
