"""A worker that dies mid-run: the run fails with an error naming the lost partitions, never hangs or half-finishes."""

import operator
import os
import signal
import time
import uuid

import numpy as np
import pytest

import gpipe
from gpipe.errors import GpipeError, WorkerLostError
from helpers import assert_lost, holder, started


def _looping(dask_worker) -> bool:
    """Whether a run's superstep loop runs on this worker."""
    return any(run.looping for run in dask_worker.plugins["gpipe"].runs.values())


def _run_and_kill(client, work, timeout: float = 120):
    """Run ``work(g)`` on ``client``'s two workers, kill one worker's process once the run's superstep loop runs
    there; (outcome, lost parts)."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=3, partitions=4)
    work(g, warm=True)  # compile first, so that the kill lands in the run
    pid, lost = holder(client, g)
    victim = g.placement[-1]
    thread, outcome = started(lambda: work(g, warm=False))
    while not client.run(_looping, workers=[victim])[victim]:
        assert thread.is_alive(), "the run ended before the worker was killed: make it longer"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout)
    assert not thread.is_alive(), f"the run did not end within {timeout} s of the worker's death"
    return outcome, lost


def _deepwalk(g, warm):
    w = gpipe.walks.deepwalk(g, length=4 if warm else 4000, seed=1)
    return w.compute()


def test_killing_a_worker_mid_walk_fails_naming_its_partitions(killable_cluster):
    # a WorkerLostError naming the lost partitions, also when another worker failed first, failing to reach them
    assert_lost(*_run_and_kill(killable_cluster, _deepwalk))


def _sample(g, warm):
    seeds = np.arange(0, 512, 7) if warm else np.tile(np.arange(0, 512, 3), 40)
    return gpipe.sampling.snowball(g, seeds=seeds, depth=2 if warm else 60).compute()


@pytest.mark.parametrize("work", [_sample])
def test_killing_a_worker_mid_sample_fails_naming_its_partitions(killable_cluster, work):
    assert_lost(*_run_and_kill(killable_cluster, work))


def test_a_worker_this_client_cannot_reach_is_named_not_reported_lost(cpu, monkeypatch):
    """Runs go to the workers directly: a worker still in the cluster but out of the client's reach is said so."""
    g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=2, partitions=2)
    unreachable = g.placement[-1]
    connect = cpu.rpc

    class Refused:
        def __getattr__(self, name):
            async def call(**kwargs):
                raise OSError("connection refused (a stand-in for a firewall)")
            return call

    monkeypatch.setattr(cpu, "rpc", lambda address: Refused() if address == unreachable else connect(address))
    with pytest.raises(GpipeError, match=f"cannot connect to worker {unreachable}, which is still in the cluster") as err:
        gpipe.walks.deepwalk(g, length=5, seed=1)
    assert not isinstance(err.value, WorkerLostError)
    monkeypatch.undo()
    assert gpipe.walks.deepwalk(g, length=5, seed=1).compute().shape == (g.num_vertices, 6)  # the other worker let go


def _push(run_id: str, walkers: dict, placement: list[str], length: int | None):
    """Send ``walkers`` to partition 1 (vertices 10..19 of 20) as a superstep's leavers would go, from this worker."""
    from gpipe.runtime._store import store

    store().run(run_id).send(3, {1: walkers}, placement, bounds=np.array([0, 10, 20]), length=length)
    return store().worker_address


def _walkers(vertex, step):
    return {"walk_id": np.arange(len(vertex), dtype=np.int64), "vertex": np.asarray(vertex, np.int64),
            "step": np.asarray(step, np.int32)}


def _runs_of(run: str, action: str):
    """On a worker: make run ``run`` there, end it, or say whether it is there (its store's registry)."""
    def act(dask_worker=None):
        store = dask_worker.plugins["gpipe"]
        return {"make": lambda: store.run(run) and None, "end": lambda: store.drop_run(run),
                "held": lambda: run in store.runs}[action]()
    return act


def test_walkers_arriving_after_their_run_ended_are_dropped_not_kept(cpu):
    """A message late for its run (after a failure) makes no new run on the receiver, which nothing would end."""
    sender, receiver = sorted(cpu.nthreads())
    run = "ended-before-its-walkers"
    cpu.run(_runs_of(run, "make"), workers=[receiver])
    cpu.run(_runs_of(run, "end"), workers=[receiver])
    assert cpu.submit(_push, run, _walkers([10, 19], [0, 8]), [sender, receiver], 8, workers=[sender],
                      pure=False).result() == sender
    assert cpu.run(_runs_of(run, "held"), workers=[receiver]) == {receiver: False}
    cpu.run(_runs_of(run, "end"), workers=[sender])


@pytest.mark.parametrize("walkers, length, damage", [
    (_walkers([12, 25], [1, 1]), 8, r"vertex spans \[12, 25\], outside \[10, 19\]"),
    (_walkers([12, 13], [1, 9]), 8, r"step spans \[1, 9\], outside \[0, 8\]"),
    (dict(_walkers([12, 13], [1, 2]), vertex=np.arange(10, 13)), None, "vertex has 3 entries"),
])
def test_walkers_damaged_on_the_way_stop_the_run_naming_sender_superstep_and_partition(cpu, walkers, length, damage):
    sender, receiver = sorted(cpu.nthreads())
    run = f"damaged-{uuid.uuid4().hex}"  # a run that has ended drops what arrives for it: a new one each time
    with pytest.raises(GpipeError, match=rf"walkers from worker {sender} for partition 1 \(superstep 3\) arrived "
                                         rf"damaged: 2 walkers sent, {damage}"):
        cpu.submit(_push, run, walkers, [sender, receiver], length, workers=[sender], pure=False).result()
    fine = _walkers([10, 19], [0, 8])
    assert cpu.submit(_push, run, fine, [sender, receiver], 8, workers=[sender], pure=False).result() == sender
    cpu.run(lambda dask_worker: dask_worker.plugins["gpipe"].drop_run(run))


@pytest.mark.parametrize("size", [10, 1 << 19])  # inside the one pickle; over INLINE_BYTES, a frame of its own
def test_a_call_and_its_result_travel_whole_in_either_form(cpu, size):
    from distributed.protocol.serialize import Pickled

    from gpipe.runtime._watch import call_workers
    from gpipe.runtime._wire import INLINE_BYTES, pack, unpack

    values = np.arange(size, dtype=np.float64) * 0.5
    packed = pack((np.negative, (values,), {}))
    assert isinstance(packed, Pickled) == (values.nbytes > INLINE_BYTES)
    if isinstance(packed, Pickled):  # the array is not copied into the pickle
        assert [frame.nbytes for frame in packed.frames] == [values.nbytes]
    else:
        function, args, kwargs = unpack(packed)
        assert function is np.negative and np.array_equal(args[0], values) and kwargs == {}
    worker = min(cpu.nthreads())
    [result] = call_workers(cpu, [(worker, np.negative, (values,), {})], {0: worker}, "test call")
    assert np.array_equal(result, -values)


def test_a_failed_task_is_raised_while_the_others_still_run(cpu):
    from gpipe.runtime._watch import gather_pinned

    slow = cpu.submit(time.sleep, 6, pure=False)
    failing = cpu.submit(operator.truediv, 1, 0, pure=False)
    started = time.monotonic()
    with pytest.raises(ZeroDivisionError):
        gather_pinned(cpu, [slow, failing], {}, "test wait")
    assert time.monotonic() - started < 4  # a wait of a second at a time sees the failure, not the slow task's end
    cpu.cancel(slow)


def _begun_late(run_id: str, dask_worker=None) -> bool:
    """On a worker: whether a late message for ``run_id`` (a peer's, a GNN rank starting) would begin the run."""
    return dask_worker.plugins["gpipe"].run(run_id, late=True) is not None


def test_a_run_dropped_before_it_began_on_a_worker_is_not_begun_there_by_what_comes_late(cpu):
    """A GNN rank that starts after a sibling failed (the client's drop_run arriving first) stops instead of
    training to the end on a run of its own."""
    from gpipe.runtime import drop_run

    cpu.run(drop_run, "dropped-before-it-began")
    assert not any(cpu.run(_begun_late, "dropped-before-it-began").values())
    assert all(cpu.run(_begun_late, "never-dropped").values())
    cpu.run(drop_run, "never-dropped")  # and ended, as its client would
