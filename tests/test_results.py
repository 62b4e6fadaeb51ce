"""Every result a family keeps on the workers comes from one base (``gpipe.runtime.results.HeldResult``) and keeps its
contract: ``stats``; ``compute()`` on the client; ``to_dask()`` and ``to_parquet()`` made on the workers, equal to
it; ``map_blocks`` run on each block where it is held, the blocks together holding every row."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

import faults
import gpipe
from gpipe.runtime.results import HeldResult


def _graph(partitions: int):
    return gpipe.generators.rmat(scale=7, edge_factor=4, seed=3, partitions=partitions)


FAMILIES = {  # family -> (result, the rows compute() gives as a frame)
    "walks": (lambda g: gpipe.walks.deepwalk(g, length=6, seed=1), lambda rows: pd.DataFrame(rows)),
    "ppr": (lambda g: gpipe.walks.ppr(g, [0, 5], walks_per_source=20, length=6, seed=1), pd.DataFrame),
    "sampler": (lambda g: gpipe.sampling.neighbor(g, seeds=list(range(20)), fanouts=2, depth=2, seed=1),
                lambda rows: rows),
    "frontier": (lambda g: gpipe.walks.multidimensional(g, frontier_size=8, budget=30, instances=4, seed=1),
                 lambda rows: rows),
    "mining": (lambda g: gpipe.mining.list_cliques(g, 3), pd.DataFrame),
    "embeddings": (lambda g: gpipe.embeddings.word2vec(gpipe.walks.deepwalk(g, length=6, seed=1), dim=4, seed=1),
                   pd.DataFrame),
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
    assert getattr(result, "_sizes", {}) == {}  # refused before any work: a sample's blocks were not even sized
    with pytest.raises(gpipe.GpipeValueError, match="'device' must be true or false, got 'gpu'"):
        result.compute(device="gpu")


@pytest.mark.parametrize("ids", ["dense", "renumbered", "strings"])
def test_a_samples_frame_is_filled_in_ranges_on_every_core_as_its_blocks_say(cpu, monkeypatch, ids):
    """compute() widens (and maps) each block's narrow columns straight into the frame's, in ranges of rows on
    threads: the frame equals the blocks' own frames (to_dask, made on the workers) for every kind of id."""
    import dask

    from gpipe.sampling import _result

    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 300, 4000), rng.integers(0, 300, 4000)
    name = {"dense": lambda v: v, "renumbered": lambda v: v * 7 + 1000, "strings": lambda v: f"v{v}"}[ids]
    frame = pd.DataFrame({"src": [name(v) for v in src], "dst": [name(v) for v in dst]})
    g = gpipe.from_edges(frame, renumber=ids != "dense")
    monkeypatch.setattr(_result, "FILL_ROWS", 97)  # ranges that cut the blocks anywhere
    with dask.config.set({"gpipe.sampling.block-size": 500}):
        sample = gpipe.sampling.neighbor(g, seeds=g.degrees().index[:200], fanouts=3, depth=2, seed=4)
        rows = sample.compute()
    assert len(rows) > 2000 and sample._layout.blocks > 1
    pd.testing.assert_frame_equal(rows, sample.to_dask().compute().reset_index(drop=True), check_dtype=False)
    assert rows["src"].map(type).eq(str).all() == (ids == "strings")


@pytest.mark.parametrize("ids", ["dense", "renumbered"])
def test_walks_read_into_their_rows_are_widened_there_as_through_the_comms(cpu, ids):
    """compute() reads a lent block's narrow dense ids into the first bytes of its rows of the int64 result and
    widens (and maps) them there: several blocks, each as the comms' copy gives it, every id an original one."""
    import dask

    rng = np.random.default_rng(8)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    offset = 0 if ids == "dense" else 10**12
    g = gpipe.from_edges(pd.DataFrame({"src": src + offset, "dst": dst + offset}), renumber=ids != "dense",
                         partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 37}):
        walks = gpipe.walks.deepwalk(g, length=5, walks_per_vertex=3, seed=2)
        read = walks.compute()
        assert walks.stats["transfer"] == "memory" and walks._layout.count > 1
        with dask.config.set({"gpipe.results.transfer": "comms"}):
            sent = walks.compute()
    np.testing.assert_array_equal(read, sent)
    np.testing.assert_array_equal(read, np.asarray(walks.to_dask().compute()))
    assert set(np.unique(read)) <= set(np.unique(np.r_[src, dst] + offset)) | {-1}


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("mapped", [False, True])
def test_ids_widened_in_place_equal_a_fresh_arrays(dtype, mapped):
    """The in-place widening of a block's ids read into the first bytes of its int64 rows, at lengths whose
    halving rounds are odd, against a new array made from a copy."""
    from gpipe.walks._result import _integer_originals

    rng = np.random.default_rng(3)
    ids = rng.integers(0, 1 << 40, 100) if mapped else None
    for n in (0, 1, 2, 3, 5, 7, 63, 1001, 70001):
        dense = rng.integers(-1, 100, n).astype(dtype)
        expected = np.where(dense < 0, -1, ids[np.maximum(dense, 0)] if mapped else dense.astype(np.int64))
        out = np.empty(n, np.int64)
        narrow = out.view(np.uint8)[:n * np.dtype(dtype).itemsize].view(dtype)
        narrow[:] = dense
        np.testing.assert_array_equal(_integer_originals(narrow.reshape(-1, 1), ids, out.reshape(-1, 1)).ravel(),
                                      expected)


def _loans(client) -> list[int]:
    """How many loans each worker keeps, fewest first."""
    return sorted(state["loans"] for state in _kept_for_clients(client))


def _kept_for_clients(client) -> list[dict]:
    """Each worker's loans and marks (``gpipe.runtime.workers.kept_for_clients``), in address order."""
    from gpipe.runtime.workers import kept_for_clients

    return [state for _, state in sorted(client.run(kept_for_clients).items())]


@pytest.mark.parametrize("family", ["walks", "sampler"])
def test_compute_reads_the_blocks_from_the_workers_memory_or_through_the_comms_alike(cpu, family):
    """A local cluster's workers lend their blocks and the client reads them from their memory
    (``gpipe.results.transfer`` auto); through the comms the rows are the same; every loan is given back."""
    import dask

    make, as_frame = FAMILIES[family]
    result = make(_graph(3))
    got = {}
    for transfer in ("comms", "auto", "memory"):
        with dask.config.set({"gpipe.results.transfer": transfer}):
            got[transfer] = as_frame(result.compute()).reset_index(drop=True)
        assert result.stats["transfer"] == ("comms" if transfer == "comms" else "memory")
        assert _loans(cpu) == [0, 0]
    pd.testing.assert_frame_equal(got["auto"], got["comms"])
    pd.testing.assert_frame_equal(got["memory"], got["comms"])


def test_a_worker_whose_memory_cannot_be_read_sends_its_blocks_or_is_refused_naming_why(cpu, monkeypatch):
    """A worker on another host (here: this process told it is elsewhere) cannot be read: ``auto`` brings its
    blocks through the comms, ``memory`` refuses, naming the worker and the reason."""
    import dask

    from gpipe.runtime import _cma

    result = FAMILIES["walks"][0](_graph(3))
    expected = result.compute()
    monkeypatch.setattr(_cma, "HOST", "elsewhere")
    monkeypatch.setattr(_cma, "_WHY", {})
    with dask.config.set({"gpipe.results.transfer": "memory"}):
        with pytest.raises(gpipe.GpipeValueError, match=r"'memory' needs every worker's memory readable .* "
                                                         r"worker tls://.*: it is on another host"):
            result.compute()
    np.testing.assert_array_equal(result.compute(), expected)
    assert result.stats["transfer"] == "comms"
    with dask.config.set({"gpipe.results.transfer": "pigeon"}):
        with pytest.raises(gpipe.GpipeValueError, match="gpipe.results.transfer.*'pigeon'"):
            result.compute()


def test_a_read_that_fails_names_the_worker_and_every_loan_is_given_back(cpu, monkeypatch):
    from gpipe.runtime import _cma

    result = FAMILIES["sampler"][0](_graph(3))
    result.compute()  # probed: the workers can be read

    def refused(pid, address, out):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(_cma, "_read", refused)
    with pytest.raises(gpipe.GpipeError, match=r"compute: reading worker tls://\S+'s memory \(process \d+\) "
                                               r"failed: .*Operation not permitted"):
        result.compute()
    assert _loans(cpu) == [0, 0]


def test_a_loan_lends_numeric_arrays_and_sends_objects_as_values():
    """What a worker lends is read back byte for byte (here from this very process); arrays of objects hold
    pointers, which mean nothing in another process: they travel as values."""
    from gpipe.runtime import _cma

    value = {"ids": np.arange(10, dtype=np.int32)[::2], "names": np.array(["a", "b"], object), "count": 3}
    loan, kept = _cma.lend(value)
    assert isinstance(loan.value["ids"], _cma.LentArray) and loan.value["names"] is value["names"]
    assert len(kept) == 1 and kept[0].flags.c_contiguous  # a strided array is lent as a copy, kept
    back = _cma.borrowed([loan], ["here"])[0]
    np.testing.assert_array_equal(back["ids"], [0, 2, 4, 6, 8])
    assert back["names"].tolist() == ["a", "b"] and back["count"] == 3


def _lending_late(seconds: float, dask_worker=None) -> None:
    """On a worker: its results for a compute() made ``seconds`` late (0: on time again)."""
    from gpipe.runtime.results import _held_result

    applied = getattr(_held_result._applied_here, "on_time", _held_result._applied_here)

    def late(items, func):
        time.sleep(seconds)
        return applied(items, func)

    late.on_time = applied
    _held_result._applied_here = late if seconds else applied


def test_a_compute_interrupted_while_the_workers_still_lend_leaves_no_loan_on_any_worker(cpu):
    """Ctrl-C while the workers make what they lend: the client gives the loans back at once, before the workers
    lend; what they lend later goes too, though the result lives on."""
    result = FAMILIES["walks"][0](_graph(3))
    expected = result.compute()
    assert result.stats["transfer"] == "memory"
    cpu.run(_lending_late, 1.5)
    try:
        # a real SIGINT to the main thread, as ^C sends, while it waits for the workers' loans
        threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            result.compute()
        time.sleep(1.5)  # the workers lent by now
    finally:
        cpu.run(_lending_late, 0)
    assert _loans(cpu) == [0, 0]
    np.testing.assert_array_equal(result.compute(), expected)
    assert all(state["loans"] == state["returned"] == 0 for state in _kept_for_clients(cpu))


def test_a_compute_interrupted_as_it_reads_the_loans_gives_them_all_back(cpu, monkeypatch):
    from gpipe.runtime import _cma

    result = FAMILIES["sampler"][0](_graph(3))
    result.compute()

    def interrupted(pid, address, out):
        raise KeyboardInterrupt

    monkeypatch.setattr(_cma, "_read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        result.compute()
    assert _loans(cpu) == [0, 0]


_HOLDING_A_LOAN = """
import sys, time
import distributed, gpipe
from gpipe.runtime import _cma

def hold(*args, **kwargs):  # the loans made: this client holds them, and reads them never
    print("lent", flush=True)
    time.sleep(600)

_cma.readable = lambda client, workers: dict.fromkeys(workers, True)
_cma.borrowed = hold
client = distributed.Client(sys.argv[1])
gpipe.attach(client, "cpu")
g = gpipe.generators.rmat(scale=7, edge_factor=4, seed=3, partitions=2)
gpipe.walks.deepwalk(g, length=6, seed=1).compute()
"""


def test_the_loans_of_a_client_killed_mid_compute_go_within_seconds(cpu, tmp_path, eventually):
    script = tmp_path / "holder.py"
    script.write_text(_HOLDING_A_LOAN)
    security = cpu.security  # the local cluster speaks TLS: the other client holds its certificate too
    (tmp_path / "cert.pem").write_text(security.tls_client_cert)
    (tmp_path / "key.pem").write_text(security.tls_client_key)
    tls = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(tmp_path / "cert.pem"),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(tmp_path / "cert.pem"),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(tmp_path / "key.pem")}
    holder = subprocess.Popen([sys.executable, str(script), cpu.scheduler.address], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, **tls})
    killer = threading.Timer(60, holder.kill)  # should it never lend, the test fails rather than wait
    killer.start()
    try:
        assert holder.stdout.readline() == "lent\n"
        assert sum(_loans(cpu)) > 0
    finally:
        killer.cancel()
        holder.kill()  # SIGKILL: the client ends without a word to the workers
        holder.wait()
    assert eventually(lambda: _loans(cpu) == [0, 0])


def test_interrupted_assemblies_leave_no_marks_on_any_worker(cpu, monkeypatch, eventually):
    """A Ctrl-C as the workers keep a result's blocks drops them everywhere, and each worker is told only of its
    own: a worker marks no key it will never be asked to keep (the marks grew with every interrupted walk)."""
    import dask

    from gpipe.runtime import _kept

    g = _graph(3)
    calls = _kept.call_workers

    def interrupted(*args, **kwargs):
        calls(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(_kept, "call_workers", interrupted)
    with dask.config.set({"gpipe.walks.block-size": 40}):
        for _ in range(4):
            with pytest.raises(KeyboardInterrupt):
                gpipe.walks.deepwalk(g, length=4, seed=1).compute()
        monkeypatch.undo()
        assert eventually(lambda: [state["marked"] for state in _kept_for_clients(cpu)] == [0, 0])
        assert gpipe.walks.deepwalk(g, length=4, seed=1).compute().shape == (g.num_vertices, 5)
    assert all(state == {"loans": 0, "lent_bytes": 0, "returned": 0, "marked": 0} for state in _kept_for_clients(cpu))


class _SlowToSend:
    """A value that takes ``seconds`` to pickle: a scatter of it is under way that long."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __reduce__(self):
        time.sleep(self.seconds)
        return _SlowToSend, (0.0,)


@pytest.mark.parametrize("broadcast", [False, True])
def test_an_interrupted_scatter_leaves_nothing_this_client_wants(cpu, broadcast):
    """A table sent to the workers (a PPR's sources and ranks, an id map) and interrupted on its way: the scatter
    ends in the client's loop and what it placed is let go; it stayed wanted until the client closed."""
    from gpipe.runtime.calls import scatter

    def wanted(dask_scheduler=None, client=cpu.id) -> set:
        return {task.key for task in dask_scheduler.clients[client].wants_what}

    before = cpu.run_on_scheduler(wanted)
    threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        scatter(cpu, [_SlowToSend(1.0)], broadcast=broadcast)
    time.sleep(1.5)  # the scatter ended by now
    assert cpu.run_on_scheduler(wanted) <= before


def test_compute_after_the_clients_close_says_so_in_one_line(cpu_cluster):
    import distributed

    client = distributed.Client(cpu_cluster.scheduler.address, security=cpu_cluster.security)
    gpipe.attach(client, "cpu")
    with client.as_current():
        result = gpipe.walks.deepwalk(_graph(2), length=4, seed=1)
        result.compute()
    client.close()
    with pytest.raises(gpipe.GpipeError, match=r"^this result's Dask client is closed \(its status: 'closed'\), and "
                                               r"its blocks went with it; run it again with a connected client$"):
        result.compute()


@pytest.mark.parametrize("kind", ["str", "PathLike"])
def test_to_corpus_takes_a_path_as_a_str_or_a_path_like(cpu, tmp_path, kind):
    walks = FAMILIES["walks"][0](_graph(2))
    path = tmp_path / "corpus.txt"
    assert walks.to_corpus(str(path) if kind == "str" else path) == str(path)
    assert len(path.read_text().splitlines()) == walks.num_walks


@pytest.mark.parametrize("path", [b"corpus.txt", 3, None])
def test_a_result_written_to_a_path_of_another_type_is_refused_naming_the_parameter(cpu, path):
    walks = FAMILIES["walks"][0](_graph(2))
    rule = r"'path' must be a str or an os.PathLike path, got "
    with pytest.raises(gpipe.GpipeValueError, match=rule + re.escape(repr(path))):
        walks.to_corpus(path)
    with pytest.raises(gpipe.GpipeValueError, match=rule + re.escape(repr(path))):
        walks.to_parquet(path)


def test_a_workers_loans_live_as_long_as_their_call_and_their_blocks():
    """The bookkeeping of one worker's loans, event by event: a token given back before its call ended keeps
    nothing lent; a loan goes with its token, or with a block it was made from; a block gone before the loan is
    kept fails the call rather than lend what nothing keeps."""
    import asyncio
    from types import SimpleNamespace

    from gpipe.runtime import _cma

    held = SimpleNamespace(state="memory")
    worker = SimpleNamespace(address="tcp://here:1", state=SimpleNamespace(tasks={"a": held, "b": held}))
    loans = _cma.Loans(worker)
    arrays = [np.zeros(4)]

    asyncio.run(loans.give_back("early", ["a", "elsewhere"]))  # interrupted: back before the worker lent
    asyncio.run(loans.keep("early", ["a"], arrays))
    assert loans.summary() == {"loans": 0, "lent_bytes": 0, "returned": 0}
    asyncio.run(loans.keep("read", ["a"], arrays))
    asyncio.run(loans.keep("abandoned", ["a", "b"], arrays))
    asyncio.run(loans.give_back("never-came", ["b"]))  # a call that never reached the worker
    assert loans.summary() == {"loans": 2, "lent_bytes": 64, "returned": 1}
    asyncio.run(loans.give_back("read", ["a"]))
    assert loans.summary() == {"loans": 1, "lent_bytes": 32, "returned": 1}
    loans.let_go("b")  # its client let the result go, or left
    assert loans.summary() == {"loans": 0, "lent_bytes": 0, "returned": 0}
    del worker.state.tasks["b"]
    with pytest.raises(gpipe.GpipeError, match=r"^compute: block 'b' left worker tcp://here:1 as the worker lent it"):
        asyncio.run(loans.keep("late", ["a", "b"], arrays))
    asyncio.run(loans.keep("failed", ["a", "b"], []))  # the call failed: nothing lent, nothing kept
    assert loans.summary() == {"loans": 0, "lent_bytes": 0, "returned": 0}


def test_interrupted_walks_on_one_replica_leave_no_marks(one_worker_cluster, eventually):
    """A walk on one replica makes its blocks as its run ends; Ctrl-C before that drops them, and the run's end
    (it fails) takes the marks of the blocks it will never make."""
    with one_worker_cluster.as_current():
        g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, mode="replicated")
        gpipe.walks.deepwalk(g, length=5, seed=1).compute()  # compiled before
        for _ in range(2):  # Ctrl-C as the worker walks (held there: a timer's could land after the call)
            with faults.interrupting(one_worker_cluster, "gpipe.runtime._advance:advance_local") as interrupt:
                with pytest.raises(KeyboardInterrupt):
                    interrupt.call(lambda: gpipe.walks.deepwalk(g, length=5, seed=1).compute())
            assert interrupt.sent
        assert eventually(lambda: [state["marked"] for state in _kept_for_clients(one_worker_cluster)] == [0])
