"""A worker that dies mid-run: the run fails with an error naming the lost partitions, never hangs or half-finishes."""

import importlib
import operator
import shutil
import subprocess
import time
import uuid

import numpy as np
import pytest

import gpipe
from gpipe.errors import GpipeError, WorkerLostError
from helpers import assert_lost, looping, run_and_kill, started


def _deepwalk(g, warm):
    w = gpipe.walks.deepwalk(g, length=4 if warm else 4000, seed=1)
    return w.compute()


def test_killing_a_worker_mid_walk_fails_naming_its_partitions(killable_cluster):
    # a WorkerLostError naming the lost partitions, also when another worker failed first, failing to reach them
    assert_lost(*run_and_kill(killable_cluster, _deepwalk))


def _sample(g, warm):
    seeds = np.arange(0, 512, 7) if warm else np.tile(np.arange(0, 512, 3), 40)
    return gpipe.sampling.snowball(g, seeds=seeds, depth=2 if warm else 60).compute()


@pytest.mark.parametrize("work", [_sample])
def test_killing_a_worker_mid_sample_fails_naming_its_partitions(killable_cluster, work):
    assert_lost(*run_and_kill(killable_cluster, work))


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


def _boom(*args):
    raise ValueError("boom")


def test_failing_user_callbacks_leave_no_run_loop_waiting_on_any_worker(cpu, eventually):
    """A run that fails on one worker ends on every other one: a rank whose loop was still queued behind busy run
    threads when the client ended the run does not begin it again, to wait for good at its first barrier for the
    rank that failed (with as many such loops as run threads, every run on the cluster hung)."""
    from gpipe.runtime._store import RUN_THREADS
    from gpipe.runtime._watch import call_workers

    g = gpipe.generators.rmat(scale=10, edge_factor=8, seed=3, mode="partitioned")
    failing = gpipe.sampling.Sampler(edge_bias=_boom, neighbor_size=2, depth=2)
    seeds = np.arange(100)  # all on the first worker's partition: the other waits at the barrier
    late = g.placement[-1]
    with pytest.raises(GpipeError, match="boom"):
        failing.run(g, seeds=seeds).compute()
    busy, _ = started(lambda: call_workers(cpu, [(late, time.sleep, (2.0,), {})] * RUN_THREADS, {0: late}, "busy"))
    time.sleep(0.3)  # the late worker's run threads all sleep: the loops sent to it wait their turn
    for _ in range(2 * RUN_THREADS):
        with pytest.raises(GpipeError, match="boom"):
            failing.run(g, seeds=seeds).compute()
    busy.join()
    assert eventually(lambda: not any(cpu.run(looping).values()))
    walk, outcome = started(lambda: gpipe.walks.deepwalk(g, length=3, seed=1).compute())
    walk.join(10)
    assert outcome.get("result") is not None and outcome["result"].shape == (g.num_vertices, 4), outcome


BOUNDS = np.array([0, 10, 20, 30, 40])  # four partitions of ten vertices: 0 and 2 on the first worker, 1 and 3 on the other


def _end_superstep(run_id: str, workers: list[str], outbound: dict, sent: list[int], length: int | None,
                   routed: bool = False):
    """On a worker: the end of superstep 3 of run ``run_id`` through the comms, with ``outbound`` (partition ->
    walker sets) leaving from here; returns the next superstep's counts and what arrived (partition -> walkers)."""
    from gpipe.runtime._exchange import CommsTransport, Exchange
    from gpipe.runtime._store import store

    st = store()
    run = st.run(run_id)
    placement = tuple(workers[p % 2] for p in range(4))
    rank = workers.index(st.worker_address)
    exchange = Exchange(run, CommsTransport(run, workers, rank), workers, placement, BOUNDS, length, "cpu")
    try:
        counts = exchange.end_superstep(3, np.asarray(sent, np.int64), outbound, routed)
        return counts, {p: run.take_inbox(4, p) for p in range(4) if placement[p] == st.worker_address}
    finally:
        run.close()


def _walkers(vertex, step, first=0):
    return {"walk_id": np.arange(first, first + len(vertex), dtype=np.int64), "vertex": np.asarray(vertex, np.int64),
            "step": np.asarray(step, np.int32)}


def _both(cpu, run: str, calls: dict):
    """Run :func:`_end_superstep` on both workers at once (each its own ``calls[rank]``); their futures."""
    workers = sorted(cpu.nthreads())
    return [cpu.submit(_end_superstep, run, workers, *calls[r], workers=[w], pure=False) for r, w in enumerate(workers)]


def test_the_end_of_a_superstep_sums_the_counts_and_delivers_every_walker_to_its_partition(cpu):
    """The exchange's protocol over the comms: headers, the payload laid out per partition and field, sender order."""
    run = f"exchange-{uuid.uuid4().hex}"
    weights = np.array([0.5, 1.5, 2.5], np.float32)
    first = {1: [_walkers([11, 19], [2, 3]), _walkers([10], [7], first=5)],
             3: [dict(_walkers([35, 31, 30], [1, 1, 4], first=9))]}
    second = {0: [_walkers([0, 9, 5], [3, 3, 3], first=20)], 2: [_walkers([29], [0], first=30)]}
    for walkers in (*first[1], *first[3], *second[0], *second[2]):
        walkers["weight"] = weights[:walkers["walk_id"].shape[0]]  # a family's own field (float, 4 bytes)
    a, b = _both(cpu, run, {0: (first, [1, 3, 0, 3], 8), 1: (second, [3, -2, 1, 0], 8)})
    (counts_a, got_a), (counts_b, got_b) = a.result(), b.result()
    np.testing.assert_array_equal(counts_a, [4, 1, 1, 3])
    np.testing.assert_array_equal(counts_b, counts_a)  # the same next counts on every worker
    assert sorted(got_a) == [0, 2] and sorted(got_b) == [1, 3]
    for got, sent in ((got_a, second), (got_b, first)):
        for part, sets in sent.items():
            (arrived,) = got[part]  # one sender: one arrival, every set of it in the order they left
            for name in ("walk_id", "vertex", "step", "weight"):
                expected = np.concatenate([w[name] for w in sets])
                assert arrived[name].dtype == expected.dtype
                np.testing.assert_array_equal(arrived[name], expected)


def test_a_payload_and_its_header_round_trip_for_any_fields_and_counts():
    from gpipe.runtime import Span
    from gpipe.runtime._packing import ALIGN, Header, Wire, pack, unpack

    rng = np.random.default_rng(0)
    outbound = {p: [{"walk_id": rng.integers(0, 1 << 40, n), "vertex": rng.integers(0, 40, n).astype(np.int32),
                     "flag": rng.integers(0, 2, n).astype(bool), "w": rng.random(n).astype(np.float16),
                     "small": rng.integers(-3, 5, n).astype(np.int16)}
                    for n in counts] for p, counts in {1: [3, 0, 5], 3: [1], 2: [0]}.items()}
    schema = tuple((name, a.dtype.str) for name, a in outbound[1][0].items())
    packing = Wire(40, None, None, (Span("small", -3, 4),)).packing(schema)
    assert [(s.name, s.bits) for s in packing.slots] == [("walk_id", 64), ("vertex", 6), ("flag", 1), ("w", 16),
                                                         ("small", 3)]
    moved = np.array([0, 8, 0, 1])
    header = Header.read(Header(np.array([4, -1, 0, 2]), moved, True, packing.slots).words(), 4)
    assert header.schema == packing.slots and header.routed and list(header.sent) == [4, -1, 0, 2]
    bad = np.zeros(len(packing.slots), np.int32)
    payload = pack(np, outbound, {1: 8, 3: 1}, packing, bad)
    places, size = packing.places({1: 8, 3: 1})
    assert payload.shape[0] == size == 96 + ALIGN and not bad.any()  # 90 bits: 3 words, 12 bytes a walker
    assert all(4 * base % ALIGN == 0 for _, base, _ in places)
    walkers = unpack(payload, header, [1, 2, 3])
    assert sorted(walkers) == [1, 3]
    for part in (1, 3):
        for name, dtype in schema:
            expected = np.concatenate([w[name] for w in outbound[part]])
            assert walkers[part][name].dtype == expected.dtype
            np.testing.assert_array_equal(walkers[part][name], expected)
    with pytest.raises(GpipeError, match="a payload of 16 bytes arrived where its header said"):
        unpack(payload[:16], header, [1, 2, 3])


def _family_fields():
    """Every family's walkers as they leave a partition: their fields' dtypes and the spans the family declares."""
    from gpipe.runtime import VERTEX, Span
    from gpipe.sampling._step import entry_spans
    from gpipe.walks import _dynamic, _mh, _node2vec

    i8, i4, i1, f8, f4 = "<i8", "<i4", "|i1", "<f8", "<f4"
    walk = {"walk_id": i8, "vertex": i8, "step": i4}
    node2vec = {**walk, "cur": i8, "prev": i8, "cand": i8, "trial": i4, "answer": i1, "state": i1}
    bounded, tame = (_node2vec.Node2Vec(False, p, 2.0, ("g", ())) for p in (0.01, 1.0))
    entries = entry_spans(1000, 4, 3)
    sampler = {"instance": i8, "depth": i4, "stage": i1, "to": i8}
    first_order = importlib.import_module("gpipe.walks._first_order")  # (gpipe.walks._first_order: a function too)
    sector = {name: np.dtype(dtype).str for name, dtype, _ in first_order.SECTOR_FIELDS}  # of no bits
    return {"deepwalk": (walk, ()), "ppr": ({**walk, "source": i8}, (Span("source", 0, VERTEX),)),
            "deepwalk, partitioned": ({**walk, **sector}, tuple(Span(name, 0, 0) for name in sector)),
            "node2vec": (node2vec, _node2vec.spans(bounded)), "node2vec, tame": (node2vec, _node2vec.spans(tame)),
            "node2vec, dynamic": ({**walk, "prev": i8}, _dynamic.N2V_SPANS),
            "metropolis_hastings": ({**walk, "cur": i8, "degv": i8, "state": i1}, _mh.SPANS),
            "multidimensional": ({**walk, "time": f8}, (Span("walk_id", 0, 9999), Span("step", 0, 300))),
            "sampler, pool": ({**sampler, "vertex": i8, "bias": f8}, entries),
            "sampler, candidates": ({**sampler, "frontier": i8, "candidate": i8, "weight": f4}, entries),
            "sampler, races": ({**sampler, "frontier": i8, "candidate": i8, "race": f8}, entries),
            "sampler, drawn edges": ({**sampler, "edge": i8, "reverse": "|b1"}, entries)}


def _extremes(rng, slot, n: int) -> np.ndarray:
    """``n`` values of ``slot``'s field: its lowest and highest that fit its bits, -1 where it may hold it, and
    random ones between (random bit patterns for a field travelling whole)."""
    carrier = slot.carrier
    if slot.raw:
        info = np.iinfo(carrier)
        values = np.concatenate([np.array([info.min, info.max, 0], carrier),
                                 rng.integers(info.min, info.max, n, dtype=carrier, endpoint=True)])
        return values[:n].view(slot.dtype)
    hi = slot.lo + (1 << slot.bits) - 1
    values = np.concatenate([[slot.lo, hi, max(slot.lo, min(hi, -1))], rng.integers(slot.lo, hi, n, endpoint=True)])
    return values[:n].astype(slot.dtype)


@pytest.mark.parametrize("family", sorted(_family_fields()))
@pytest.mark.parametrize("vertices, length, walks", [(2**20 - 1, 2**7 - 1, 2**28), (2**20, 2**7, 2**28 + 1),
                                                     (2**31 + 1, 2**15, 2**40), (1, 1, 1)])
def test_every_familys_walkers_round_trip_packed_at_the_edges_of_their_fields_widths(family, vertices, length,
                                                                                     walks):
    """Each field in the bits its span takes at the run's sizes (a vertex in those of ``vertices`` - 1, -1 beside
    it where a family says so; a field with no span at its dtype's full width, a 64-bit one as two words): its
    lowest and highest values, and random ones, arrive as they left, of its dtype; one past them does not fit."""
    from gpipe.runtime._packing import Header, Wire, pack, unpack

    dtypes, spans = _family_fields()[family]
    wire = Wire(vertices, length, walks, spans)
    packing = wire.packing(tuple(dtypes.items()))
    rng = np.random.default_rng(len(family))
    for slot in packing.slots:
        lo, hi = wire.spans.get(slot.name, (None, None))
        if slot.dtype.kind == "b":
            assert slot.bits == 1
        elif lo is None or slot.dtype.kind == "f":
            assert slot.raw  # unknown values: whole, never cut
        else:
            assert slot.raw or (slot.lo, slot.bits) == (lo, (hi - lo).bit_length())
            assert slot.raw == ((hi - lo).bit_length() >= slot.dtype.itemsize * 8)
    counts = {0: 37, 2: 5}
    outbound = {p: [{slot.name: _extremes(rng, slot, n) for slot in packing.slots} for n in (n - 4, 4)]
                for p, n in counts.items()}
    bad = np.zeros(len(packing.slots), np.int32)
    payload = pack(np, outbound, counts, packing, bad)
    assert not bad.any()
    header = Header.read(Header(np.zeros(3, np.int64), np.array([37, 0, 5]), False, packing.slots).words(), 3)
    arrived = unpack(payload, header, [0, 1, 2])
    assert sorted(arrived) == [0, 2]
    for part, sets in outbound.items():
        for slot in packing.slots:
            sent = np.concatenate([w[slot.name] for w in sets])
            assert arrived[part][slot.name].dtype == slot.dtype
            np.testing.assert_array_equal(arrived[part][slot.name].view(slot.carrier), sent.view(slot.carrier))
    for k, slot in enumerate(packing.slots):
        if slot.dtype.kind != "b" and not slot.raw and slot.lo + (1 << slot.bits) <= np.iinfo(slot.carrier).max:
            beyond = {0: [{s.name: w[s.name].copy() for s in packing.slots} for w in outbound[0]]}
            beyond[0][1][slot.name][2] = slot.lo + (1 << slot.bits)
            bad[...] = 0
            payload = pack(np, beyond, {0: 37}, packing, bad)
            if slot.bits:
                assert list(np.flatnonzero(bad)) == [k], slot
            else:  # a field of no bits is not read: it arrives holding its one value
                alone = Header.read(Header(np.zeros(3, np.int64), np.array([37, 0, 0]), False,
                                           packing.slots).words(), 3)
                assert not bad.any() and (unpack(payload, alone, [0, 1, 2])[0][slot.name] == slot.lo).all()


class _Kernels:
    """Stands for CuPy where the packing kernels are written: each ElementwiseKernel's arguments."""

    @staticmethod
    def ElementwiseKernel(*args):  # noqa: N802 (CuPy's name)
        return args


def _as_cupy_writes(in_params: str, out_params: str, body: str, name: str) -> str:
    """An ElementwiseKernel as CuPy writes it: a loop over ``i``, each array that is not raw read (or written) at
    ``i`` by its name, raw ones indexed by the body, scalars by value."""
    from gpipe.runtime._packing import _C_TYPES

    args, reads = [], []
    for out, params in ((False, in_params), (True, out_params)):
        for param in params.split(","):
            *raw, dtype, pname = param.split()
            ctype = _C_TYPES[dtype]
            if raw:
                args.append(f"{'' if out else 'const '}{ctype}* {pname}")
            elif pname in ("base", "stride"):
                args.append(f"{ctype} {pname}")
            else:
                args.append(f"{'' if out else 'const '}{ctype}* _raw_{pname}")
                reads.append(f"{ctype}& {pname} = _raw_{pname}[i];" if out else
                             f"const {ctype} {pname} = _raw_{pname}[i];")
    return (f'extern "C" __global__ void {name}({", ".join(args)}, long long size) {{\n'
            f"for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < size; i += blockDim.x * gridDim.x) {{\n"
            + "\n".join(reads) + "\n" + body + "\n}\n}\n")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_cuda_packing_kernels_written_for_every_familys_walkers_compile(tmp_path):
    from gpipe.runtime._packing import Wire, _kernels

    units = []
    for n, (family, (dtypes, spans)) in enumerate(sorted(_family_fields().items())):
        for m, sizes in enumerate([(2**20, 2**7, 2**28), (2**31 + 1, 2**15, 2**40), (1, 1, 1)]):
            packing = Wire(*sizes, spans).packing(tuple(dtypes.items()))
            for kernel in _kernels.__wrapped__(_Kernels, packing):
                units.append(_as_cupy_writes(*kernel[:3], f"{kernel[3]}_{n}_{m}"))
    source = tmp_path / "wire.cu"
    source.write_text("\n".join(units))
    result = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(source), "-o", str(tmp_path / "wire.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_deepwalk_walker_crosses_in_8_bytes_at_rmat_24_and_at_most_12_below_2_to_the_31_vertices():
    """28 + 24 + 7 bits at R-MAT 24 x10, length 80 (issue 66's 8 bytes); 32 + 31 + 15 within 12 bytes."""
    from gpipe.runtime._packing import Wire, stated

    walk = (("walk_id", "<i8"), ("vertex", "<i8"), ("step", "<i4"))
    packing = Wire(2**24, 80, 10 * 2**24).packing(walk)
    assert stated([packing]) == {"bytes_per_walker": 8, "bits": {"walk_id": 28, "vertex": 24, "step": 7}}
    assert stated([Wire(2**31 - 1, 2**15 - 1, 2**32 - 1).packing(walk)])["bytes_per_walker"] == 12
    assert stated([]) is None


def test_pieces_travel_as_narrow_as_the_run_allows_and_arrive_as_they_left():
    """A piece crosses (``_gather``) with its walk id as int32 and its start and length as int16 where the run's
    walks and row width allow, as they are where not; every field arrives with its values, widened, in arrays of
    its own (the payload goes)."""
    from gpipe.runtime import _gather
    from gpipe.runtime._spec import OutputBlocks

    narrow, wide = OutputBlocks(1000, 3, np.dtype(np.int32), 2**31, 81), OutputBlocks(1000, 3, np.dtype(np.int64),
                                                                                      2**31 + 1, 2**15)
    assert [k.itemsize for k in _gather.wire(narrow).values()] == [4, 2, 2, 4]
    assert [k.itemsize for k in _gather.wire(wide).values()] == [8, 4, 4, 8]
    n = 500
    for blocks in (narrow, wide):
        length = np.arange(n, dtype=np.int32) % 7 + 1
        pieces = {"walk_id": np.arange(blocks.walks - n, blocks.walks, dtype=np.int64),
                  "start": (blocks.width - 8 - np.arange(n) % 3).astype(np.int32), "length": length,
                  "flat": np.arange(int(length.sum()), dtype=blocks.dtype) * 3}
        payload = _gather._pack(np, pieces, blocks)
        assert payload.shape[0] == _gather.places(n, int(length.sum()), blocks)[1]
        arrived = _gather._unpack(payload, n, int(length.sum()), blocks, "a peer")
        for name, values in pieces.items():
            assert arrived[name].dtype == _gather.WIDE.get(name, values.dtype) and arrived[name].base is None
            np.testing.assert_array_equal(arrived[name], values)
        np.testing.assert_array_equal(arrived["offset"], np.cumsum(length) - length)


def _runs_of(run: str, action: str):
    """On a worker: make run ``run`` there, end it, or say whether it is there (its store's registry)."""
    def act(dask_worker=None):
        store = dask_worker.plugins["gpipe"]
        return {"make": lambda: store.run(run) and None, "end": lambda: store.drop_run(run),
                "held": lambda: run in store.runs}[action]()
    return act


def _tell(run_id: str, peer: str) -> str:
    """Send ``peer`` a superstep's end of run ``run_id`` (one walker for partition 1), as a rank does; its answer."""
    from distributed.protocol import to_serialize
    from distributed.utils import sync

    from gpipe.runtime._packing import Header, Slot
    from gpipe.runtime._store import store

    st = store()
    words = Header(np.zeros(4, np.int64), np.array([0, 1, 0, 0]), False,
                   (Slot("walk_id", np.dtype(np.int64), 0, 64),)).words()
    return sync(st.worker.loop, st.worker.rpc(peer).gpipe_exchange, run_id=run_id, superstep=3, rank=0,
                words=to_serialize(words), payload=to_serialize(np.zeros(16, np.uint8)))


def test_walkers_arriving_after_their_run_ended_are_dropped_not_kept(cpu):
    """A message late for its run (after a failure) makes no new run on the receiver, which nothing would end."""
    sender, receiver = sorted(cpu.nthreads())
    run = "ended-before-its-walkers"
    cpu.run(_runs_of(run, "make"), workers=[receiver])
    cpu.run(_runs_of(run, "end"), workers=[receiver])
    assert cpu.submit(_tell, run, receiver, workers=[sender], pure=False).result() == "ended"
    assert cpu.run(_runs_of(run, "held"), workers=[receiver]) == {receiver: False}


def _alone(run_id: str, workers: list[str], outbound: dict | None = None):
    """On a worker: :func:`_end_superstep` of run ``run_id`` with ``outbound`` (none: no walkers) and no counts,
    checking on its silent peer every 0.2 s."""
    from gpipe.runtime import _exchange

    _exchange.PING_SECONDS = 0.2
    try:
        return _end_superstep(run_id, workers, outbound or {}, [0, 0, 0, 0], 8)
    finally:
        _exchange.PING_SECONDS = 5.0


def test_a_rank_stops_waiting_on_a_peer_where_its_run_has_ended(cpu):
    """A rank whose peer's loop failed, or whose client ended the run there but could not here (interrupted again,
    or gone), finds the run ended there when it checks on the silent peer, instead of waiting for it for good."""
    from gpipe.runtime.workers import drop_run

    workers = sorted(cpu.nthreads())
    run = f"ended-on-a-peer-{uuid.uuid4().hex}"
    cpu.run(drop_run, run, workers=workers[:1])
    waiting = cpu.submit(_alone, run, workers, workers=workers[1:], pure=False)
    with pytest.raises(GpipeError, match=f"the run has ended on worker {workers[0]} .* while waiting for the other "
                                         "workers' superstep 3"):
        waiting.result(timeout=30)
    assert cpu.run(_runs_of(run, "held")) == dict.fromkeys(workers, False)


@pytest.mark.parametrize("walkers, length, damage", [
    (_walkers([12, 25], [1, 1]), 8, r"vertex spans \[12, 25\], outside \[10, 19\]"),
    (_walkers([12, 13], [1, 9]), 8, r"step spans \[1, 9\], outside \[0, 8\]"),
])
def test_walkers_damaged_on_the_way_stop_the_run_naming_sender_superstep_and_partition(cpu, walkers, length, damage):
    sender, receiver = sorted(cpu.nthreads())
    run = f"damaged-{uuid.uuid4().hex}"  # a run that has ended drops what arrives for it: a new one each time
    sending, receiving = _both(cpu, run, {0: ({1: [walkers]}, [0, 2, 0, 0], length), 1: ({}, [0, 0, 0, 0], length)})
    with pytest.raises(GpipeError, match=rf"walkers from worker {sender} for partition 1 \(superstep 4\) arrived "
                                         rf"damaged: 2 walkers sent, {damage}"):
        receiving.result()
    np.testing.assert_array_equal(sending.result()[0], [0, 2, 0, 0])  # the sender went on: the receiver stops
    fine = f"fine-{uuid.uuid4().hex}"
    sending, receiving = _both(cpu, fine, {0: ({1: [_walkers([10, 19], [0, 8])]}, [0, 2, 0, 0], 8),
                                           1: ({}, [0, 0, 0, 0], 8)})
    assert [int(w["vertex"].sum()) for w in receiving.result()[1][1]] == [29]


def test_walkers_holding_values_beyond_their_bits_stop_the_run_where_they_leave(cpu):
    """A step of 16 in walks of 8 steps (4 bits, 0 to 15) is not cut to 0 on the way: its sender stops, naming the
    field and the values its bits hold, and its peer finds the run ended there."""
    sender, receiver = sorted(cpu.nthreads())
    run = f"beyond-{uuid.uuid4().hex}"
    sending, receiving = (cpu.submit(_alone, run, [sender, receiver], outbound, workers=[w], pure=False)
                          for w, outbound in ((sender, {1: [_walkers([12, 13], [3, 16])]}), (receiver, None)))
    with pytest.raises(GpipeError, match=r"walkers leaving at the end of superstep 3 hold values that their family's "
                                         r"spans and the run's sizes leave out: step outside \[0, 15\] \(its 4 bits\)"):
        sending.result(timeout=30)
    with pytest.raises(GpipeError, match=f"the run has ended on worker {sender}"):
        receiving.result(timeout=30)


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
    return dask_worker.plugins["gpipe"].run(run_id) is not None


def test_a_run_dropped_before_it_began_on_a_worker_is_not_begun_there_by_what_comes_late(cpu):
    """A GNN rank that starts after a sibling failed (the client's drop_run arriving first) stops instead of
    training to the end on a run of its own."""
    from gpipe.runtime.workers import drop_run

    cpu.run(drop_run, "dropped-before-it-began")
    assert not any(cpu.run(_begun_late, "dropped-before-it-began").values())
    assert all(cpu.run(_begun_late, "never-dropped").values())
    cpu.run(drop_run, "never-dropped")  # and ended, as its client would


def test_a_run_whose_loop_fails_ends_there_letting_go_of_what_it_holds():
    """Without the client, which may be gone: a peer's rank asking finds the run ended (``Watch``)."""
    import threading
    from types import SimpleNamespace

    from gpipe.runtime import Run

    left = []
    run = Run("failing", SimpleNamespace(lock=threading.RLock(), unregister=left.append))
    with pytest.raises(ValueError, match="a step"), run.loop():
        run.deliver(1, 0, _walkers([3], [0]))
        raise ValueError("a step")
    assert left[-1] is run and not run.take_inbox(1, 0)
    with pytest.raises(GpipeError, match="the run was stopped .its loop failed."):
        run.raise_if_failed()


def test_a_run_holds_one_state_of_its_familys_type_until_its_loop_ends():
    import dataclasses
    import threading
    from types import SimpleNamespace

    from gpipe.runtime import Run

    @dataclasses.dataclass
    class Visits:
        seen: dict = dataclasses.field(default_factory=dict)

    class Other:
        pass

    run = Run("typed", SimpleNamespace(lock=threading.RLock(), unregister=lambda run: None))
    with run.loop():
        run.state(Visits).seen[3] = "kept"
        assert run.state(Visits).seen == {3: "kept"}  # made once, the same object after
        with pytest.raises(GpipeError, match="run typed holds Visits, not Other"):
            run.state(Other)
    assert run.state(Visits).seen == {}  # the loop's end let it go
