"""A worker lost before a call (or while a corpus is written): every call that waits on the graph's workers
fails within seconds with a WorkerLostError naming the lost partitions, and leaves no temporary output."""

import os
import signal
import threading
import time

import dask
import pytest

import gpipe
from gpipe.errors import WorkerLostError

BOUND = 5.0  # seconds from the loss to the error: the watchdog checks at once, then once a second


@pytest.fixture
def client():
    """A cluster of two workers of its own (the test kills one), current for the test."""
    with gpipe.connect(n_workers=2, threads_per_worker=1, device="cpu", dashboard_address=":0") as client:
        yield client


def _graph():
    return gpipe.generators.rmat(scale=8, edge_factor=4, seed=3, partitions=2)


def _victim(client, g) -> tuple[int, list[int]]:
    """The process id of the worker holding the graph's last partition, and the partitions it holds."""
    victim = g.placement[-1]
    return client.run(os.getpid, workers=[victim])[victim], [p for p, w in enumerate(g.placement) if w == victim]


def _kill(client, g) -> list[int]:
    """SIGKILL the worker holding the graph's last partition; the partitions it held."""
    pid, lost = _victim(client, g)
    os.kill(pid, signal.SIGKILL)
    return lost


def _started(call) -> tuple[threading.Thread, dict]:
    """``call()`` running in a thread; the thread and what it gives (``result`` or ``error``) once it ends."""
    outcome = {}

    def target():
        try:
            outcome["result"] = call()
        except Exception as exc:  # what the test checks
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def _failed_naming(lost: list[int], thread: threading.Thread, outcome: dict, since: float) -> None:
    """The call in ``thread`` raised a WorkerLostError naming ``lost`` within ``BOUND`` s of ``since``."""
    thread.join(max(0.0, since + BOUND - time.monotonic()))
    assert not thread.is_alive(), f"still waiting {BOUND} s after the worker was lost"
    error = outcome.get("error")
    assert isinstance(error, WorkerLostError), repr(outcome)
    assert error.partitions == lost and f"partition {lost[0]} it held" in str(error)


def _fails_naming(lost: list[int], call) -> None:
    """``call()``, made once the worker was killed, raises a WorkerLostError naming ``lost`` within ``BOUND`` s."""
    since = time.monotonic()
    _failed_naming(lost, *_started(call), since)


def test_degrees_after_a_worker_is_lost_fail_naming_its_partitions(client):
    g = _graph()
    _fails_naming(_kill(client, g), g.degrees)


def test_writing_a_graph_after_a_worker_is_lost_fails_and_leaves_no_folder(client, tmp_path):
    g = _graph()
    _fails_naming(_kill(client, g), lambda: g.to_parquet(tmp_path / "graph"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("run", [
    lambda g: gpipe.walks.deepwalk(g, length=5, seed=1),
    lambda g: gpipe.walks.multidimensional(g, frontier_size=8, budget=16, seed=1),
    lambda g: gpipe.sampling.snowball(g, seeds=[0, 1], depth=2),
], ids=["walk", "frontier sampling", "sampler"])
def test_a_run_on_a_graph_that_lost_a_worker_fails_naming_its_partitions(client, run):
    g = _graph()
    _fails_naming(_kill(client, g), lambda: run(g))


@pytest.mark.parametrize("use", [
    lambda w, path: w.compute(),
    lambda w, path: w.to_parquet(path / "walks"),
    lambda w, path: w.to_corpus(path / "walks.txt"),
    lambda w, path: w.scores(),
], ids=["compute", "to_parquet", "to_corpus", "ppr scores"])
def test_walks_whose_worker_is_lost_fail_naming_its_partitions_and_leave_no_output(client, tmp_path, use):
    g = _graph()
    w = gpipe.walks.ppr(g, sources=[0, g.num_vertices - 1], walks_per_source=5, length=5, seed=1)  # both partitions
    _fails_naming(_kill(client, g), lambda: use(w, tmp_path))
    assert os.listdir(tmp_path) == []


def test_losing_a_worker_while_a_corpus_is_written_fails_naming_its_partitions_and_removes_the_file(
        client, tmp_path):
    g = _graph()
    with dask.config.set({"gpipe.walks.block-size": 16}):  # many blocks: the kill lands between two
        w = gpipe.walks.deepwalk(g, length=10, walks_per_vertex=8, seed=1).persist()
    pid, lost = _victim(client, g)
    thread, outcome = _started(lambda: w.to_corpus(tmp_path / "walks.txt"))
    while thread.is_alive() and not any(entry.stat().st_size for entry in os.scandir(tmp_path)):
        time.sleep(0.001)  # until the first block of text is in the temporary file
    assert thread.is_alive(), "the corpus was written before the worker was killed: make it longer"
    os.kill(pid, signal.SIGKILL)
    _failed_naming(lost, thread, outcome, time.monotonic())
    assert os.listdir(tmp_path) == []
