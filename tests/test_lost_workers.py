"""A worker lost before a call (or while a corpus is written): every call that waits on the graph's workers
fails within seconds with a WorkerLostError naming the lost partitions, and leaves no temporary output."""

import os
import signal
import threading
import time

import dask
import pytest

import gpipe
from gpipe.dynamic import _graph as graph_module
from gpipe.dynamic._batches import Batch
from gpipe.runtime import workers_info
from gpipe.runtime.calls import WATCH_SECONDS
from gpipe.runtime.calls import call_workers as gpipe_call_workers
from helpers import assert_lost, holder, started

BOUND = 5.0  # seconds from the loss to the error: the watchdog checks at once, then once a second


def _graph():
    return gpipe.generators.rmat(scale=8, edge_factor=4, seed=3, partitions=2)


def _kill(client, g) -> list[int]:
    """SIGKILL the worker holding the graph's last partition; the partitions it held."""
    pid, lost = holder(client, g)
    os.kill(pid, signal.SIGKILL)
    return lost


def _failed_naming(lost: list[int], thread: threading.Thread, outcome: dict, since: float) -> None:
    """The call in ``thread`` raised a WorkerLostError naming ``lost`` within ``BOUND`` s of ``since``."""
    thread.join(max(0.0, since + BOUND - time.monotonic()))
    assert not thread.is_alive(), f"still waiting {BOUND} s after the worker was lost"
    assert_lost(outcome, lost)


def _fails_naming(lost: list[int], call) -> None:
    """``call()``, made once the worker was killed, raises a WorkerLostError naming ``lost`` within ``BOUND`` s."""
    since = time.monotonic()
    _failed_naming(lost, *started(call), since)


def test_degrees_after_a_worker_is_lost_fail_naming_its_partitions(killable_cluster):
    g = _graph()
    _fails_naming(_kill(killable_cluster, g), g.degrees)


def test_writing_a_graph_after_a_worker_is_lost_fails_and_leaves_no_folder(killable_cluster, tmp_path):
    g = _graph()
    _fails_naming(_kill(killable_cluster, g), lambda: g.to_parquet(tmp_path / "graph"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("run", [
    lambda g: gpipe.walks.deepwalk(g, length=5, seed=1),
    lambda g: gpipe.walks.multidimensional(g, frontier_size=8, budget=16, seed=1),
    lambda g: gpipe.sampling.snowball(g, seeds=[0, 1], depth=2),
], ids=["walk", "frontier sampling", "sampler"])
def test_a_run_on_a_graph_that_lost_a_worker_fails_naming_its_partitions(killable_cluster, run):
    g = _graph()
    _fails_naming(_kill(killable_cluster, g), lambda: run(g))


@pytest.mark.parametrize("use", [
    lambda w, path: w.compute(),
    lambda w, path: w.to_parquet(path / "walks"),
    lambda w, path: w.to_corpus(path / "walks.txt"),
    lambda w, path: w.scores(),
], ids=["compute", "to_parquet", "to_corpus", "ppr scores"])
def test_walks_whose_worker_is_lost_fail_naming_its_partitions_and_leave_no_output(killable_cluster, tmp_path, use):
    g = _graph()
    with dask.config.set({"gpipe.walks.block-size": 4}):  # blocks on both workers (each block's pieces go to its own)
        w = gpipe.walks.ppr(g, start=[0, g.num_vertices - 1], walks_per_source=5, length=5, seed=1)
    _fails_naming(_kill(killable_cluster, g), lambda: use(w, tmp_path))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("table", ["replicated", "sharded"])
def test_embeddings_of_walks_whose_worker_is_lost_fail_naming_its_partitions(killable_cluster, table):
    g = _graph()
    with dask.config.set({"gpipe.walks.block-size": 64}):  # blocks on both workers
        w = gpipe.walks.deepwalk(g, length=5, seed=1)
    _fails_naming(_kill(killable_cluster, g), lambda: gpipe.embeddings.word2vec(w, dim=8, table=table))


@pytest.mark.parametrize("use", [
    lambda s, path: s.compute(),
    lambda s, path: s.nodes(),
    lambda s, path: s.to_dask(),
    lambda s, path: s.to_parquet(path / "edges"),
], ids=["compute", "nodes", "to_dask", "to_parquet"])
def test_a_sample_whose_worker_is_lost_fails_naming_its_partitions_and_leaves_no_output(killable_cluster, tmp_path,
                                                                                         use):
    g = _graph()
    s = gpipe.sampling.neighbor(g, seeds=[0, g.num_vertices - 1], fanouts=2, depth=2, seed=1)  # both partitions
    _fails_naming(_kill(killable_cluster, g), lambda: use(s, tmp_path))
    assert os.listdir(tmp_path) == []


def test_losing_a_worker_while_a_corpus_is_written_fails_naming_its_partitions_and_removes_the_file(
        killable_cluster, tmp_path):
    g = _graph()
    with dask.config.set({"gpipe.walks.block-size": 16}):  # many blocks: the kill lands between two
        w = gpipe.walks.deepwalk(g, length=10, walks_per_vertex=8, seed=1).persist()
    pid, lost = holder(killable_cluster, g)
    thread, outcome = started(lambda: w.to_corpus(tmp_path / "walks.txt"))
    while thread.is_alive() and not any(entry.stat().st_size for entry in os.scandir(tmp_path)):
        time.sleep(0.001)  # until the first block of text is in the temporary file
    assert thread.is_alive(), "the corpus was written before the worker was killed: make it longer"
    os.kill(pid, signal.SIGKILL)
    _failed_naming(lost, thread, outcome, time.monotonic())
    assert os.listdir(tmp_path) == []


def _dynamic_graph():
    return gpipe.dynamic.DynamicGraph.from_graph(gpipe.generators.rmat(scale=8, edge_factor=4, seed=3, partitions=2,
                                                                       mode="partitioned"))


def _every_later_call(dg) -> list:
    """Each thing a dynamic graph does; partition 0 (vertices 0 and 1) is on the worker that stays."""
    return [lambda: dg.insert_edges([0], [1]), lambda: dg.delete_edges([0], [1]), dg.edges, dg.snapshot, dg.nbytes,
            lambda: gpipe.walks.deepwalk(dg, length=5, seed=1)]


def _commit_then_hold(graph_id: str, part: int, marker: str, dask_worker=None) -> None:
    """Make this worker's next commit of partition ``part`` of dynamic graph ``graph_id`` create the file ``marker``
    once committed, and its call return only once the file is gone (or after 60 s)."""
    space = dask_worker.plugins["gpipe"].partitions.get(graph_id, part)
    commit = space._commit_batch

    def commit_then_hold(token: int) -> None:
        commit(token)
        open(marker, "w").close()
        deadline = time.monotonic() + 60
        while os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.01)

    space._commit_batch = commit_then_hold


def test_a_dynamic_graph_whose_worker_is_lost_mid_batch_fails_naming_its_partitions_and_refuses_every_later_call(
        killable_cluster, tmp_path):
    """The batch is committed on the worker that stays, whose call is still open, when the other is lost."""
    dg = _dynamic_graph()
    pid, lost = holder(killable_cluster, dg._graph)
    marker = tmp_path / "committed"
    killable_cluster.run(_commit_then_hold, dg.graph_id, 0, str(marker), workers=[dg._graph.placement[0]])
    thread, outcome = started(lambda: dg.insert_edges([0, 255], [255, 0]))  # on both partitions
    deadline = time.monotonic() + BOUND
    while not marker.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), f"partition 0 did not commit the batch: {outcome}"
    os.kill(pid, signal.SIGKILL)
    try:
        _failed_naming(lost, thread, outcome, time.monotonic())
    finally:
        marker.unlink()
    assert outcome["error"].phase == "dynamic commit"
    for call in _every_later_call(dg):
        _fails_naming(lost, call)


def test_a_dynamic_graph_whose_worker_is_lost_while_the_client_cuts_a_batch_fails_before_sending_any_part(
        killable_cluster, eventually, monkeypatch):
    """The client's checks and cut of a large batch take seconds (10^7 updates): a worker lost meanwhile is seen
    right after the cut, not once the parts were sent and the survivors staged theirs."""
    dg = _dynamic_graph()
    pid, lost = holder(killable_cluster, dg._graph)
    gone = dg._graph.placement[-1]
    cut, phases = Batch.part, []

    def slow_cut(self, *args):  # the worker is lost a watch interval into the cut
        if not phases:
            phases.append("cut")
            os.kill(pid, signal.SIGKILL)
            assert eventually(lambda: gone not in workers_info(killable_cluster))  # the loss is known
            time.sleep(WATCH_SECONDS)
        return cut(self, *args)

    def call_workers(client, calls, held, phase, *args):
        phases.append(phase)
        return gpipe_call_workers(client, calls, held, phase, *args)

    monkeypatch.setattr(Batch, "part", slow_cut)
    monkeypatch.setattr(graph_module, "call_workers", call_workers)
    since = time.monotonic()
    _failed_naming(lost, *started(lambda: dg.insert_edges([0, 255], [255, 0])), since)
    assert phases == ["cut"], phases  # no part was sent
    for call in _every_later_call(dg):
        _fails_naming(lost, call)


def test_a_dynamic_graph_that_lost_a_worker_between_calls_refuses_every_later_call(killable_cluster, eventually):
    dg = _dynamic_graph()
    lost = _kill(killable_cluster, dg._graph)
    assert eventually(lambda: dg._graph.placement[-1] not in workers_info(killable_cluster))  # the loss is known
    for call in _every_later_call(dg):
        _fails_naming(lost, call)


def _train(g) -> list:
    """run_on_workers on ``g``, each rank returning its number."""
    return gpipe.gnn.run_on_workers(lambda loader, rank, world_size: rank, g, seeds=range(100), fanouts=[2],
                                    batch_size=10)


def test_degrees_gathered_before_and_gnn_training_fail_once_a_worker_of_the_graph_is_lost(killable_cluster,
                                                                                           eventually):
    """The degrees, gathered once, outlived the graph; the ranks waited forever on a lost partition's CSR piece."""
    g = _graph()
    g.degrees()
    gone = g.placement[-1]
    lost = _kill(killable_cluster, g)
    assert eventually(lambda: gone not in workers_info(killable_cluster))  # the loss is known
    _fails_naming(lost, g.degrees)
    _fails_naming(lost, lambda: _train(g))


def test_gnn_training_on_a_graph_whose_workers_all_left_fails_naming_its_partitions(killable_cluster, eventually):
    g = _graph()
    killable_cluster.cluster.scale(0)  # no worker left, none restarted
    assert eventually(lambda: not workers_info(killable_cluster))
    _fails_naming([0, 1], lambda: _train(g))


@pytest.mark.parametrize("table", ["replicated", "sharded"])
def test_embeddings_whose_worker_is_lost_while_training_fail_within_seconds(killable_cluster, table):
    """A worker training (its replica, or its shard and the pairs sent to it) killed mid-epoch: the call raises a
    WorkerLostError naming the training within seconds, never waits on the pinned tasks that cannot run."""
    from gpipe.errors import WorkerLostError

    g = gpipe.generators.rmat(scale=10, edge_factor=8, seed=3, partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 8192}):  # blocks on both workers
        w = gpipe.walks.deepwalk(g, length=40, walks_per_vertex=16, seed=1).persist()
    thread, outcome = started(lambda: gpipe.embeddings.word2vec(w, dim=64, epochs=20, table=table))
    time.sleep(1.0)
    assert thread.is_alive(), "the training ended before a worker could be lost"
    since = time.monotonic()
    pid, _ = holder(killable_cluster, g)
    os.kill(pid, signal.SIGKILL)
    thread.join(max(0.0, since + BOUND - time.monotonic()))
    assert not thread.is_alive(), f"still training {BOUND} s after a worker was lost"
    assert isinstance(outcome.get("error"), WorkerLostError) and "training" in str(outcome["error"]), repr(outcome)
