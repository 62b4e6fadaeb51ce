"""One run on one worker: its inboxes, outputs, exchange mailbox and the family's own state, ended as one.

The store keeps a :class:`Run` per run id (as ``distributed.shuffle`` keeps a
``ShuffleRun``), made on first use here: the run's loop starting, or a peer's
message arriving before it. Walkers that leave a partition for one of this
worker's wait in its local inbox; those for a peer's are held until the end of
the superstep, when the exchange (``_exchange``) sends them with the walker
counts and puts what the peers sent into the inboxes. A run leaves the store
when it is closed or failed (its loop failing too), or once its loop has ended
here and its outputs have all been taken; the store never makes it again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Self

import numpy as np

from ..backend import device_of, to_host, xp
from ..errors import GpipeError
from . import _pieces

if TYPE_CHECKING:
    from ._store import GpipeStore

ENDED = "ended"  # a store's answer to a message for a run that has ended there


class Run:
    """A run's state on this worker; the store's registry holds it by its ``id``.

    Its loop thread, the worker's event loop (the handlers) and tasks call it
    at once: its state is read and written under the store's lock, which
    spilling outputs holds across runs too.
    """

    def __init__(self, run_id: str, store: GpipeStore):
        self.id = run_id
        self.store = store
        self._lock = store.lock
        self._heard = threading.Condition(store.lock)  # a peer's message arrived, or the run ended
        self._inbox: dict[tuple[int, int], list] = defaultdict(list)  # (superstep, part) -> walkers from peers
        self._local_inbox: dict[tuple[int, int], list] = defaultdict(list)  # from this worker's partitions
        self._outbound: dict[int, list] = defaultdict(list)  # part -> walkers for a peer's partition, this superstep
        self.routed = False  # whether those go by their ``to`` field rather than their vertex
        self._mail: dict[int, dict[int, tuple]] = defaultdict(dict)  # superstep -> rank -> (header, payload, when)
        self._pieces: dict[int, list] = defaultdict(list)  # part -> what the step output there, oldest first
        self._blocks: dict[int, dict] = {}  # part -> output block (or group) -> its piece sets
        self.rows = None  # the rows of the output blocks this worker makes, where its steps write (OwnedRows)
        self.here = None  # partition -> 1 where it is on this worker, 0 where not (int8 on the worker's device, as
        # the routed walk kernels read it: set as the loop starts)
        self._held = 0  # bytes of the pieces not spilled (on the device of a GPU worker)
        self._state = None  # the family's own (one object of its state type, e.g. the sampler's visited sets)
        self._meanwhile: Callable[[], object] | None = None  # work for the next step to do while its kernel runs
        self.looping = False  # whether the run's superstep loop runs here
        self._failure: str | None = None  # why the run ended here, if it did

    # -- its loop

    @contextlib.contextmanager
    def loop(self) -> Iterator[Self]:
        """While the run's superstep loop runs here; its walkers and the family's state go when it ends. A loop
        that fails ends the run here: everything it holds goes, and a peer's rank waiting on this one finds it
        ended (``_exchange.Watch``) without the client, which may be gone."""
        with self._lock:
            self.looping = True
        try:
            yield self
        except BaseException:
            self.fail("its loop failed")
            raise
        finally:
            with self._lock:
                self.looping = False
                self._state = None
                self._leave_if_drained()

    def fail(self, reason: str) -> None:
        """End the run here: its loop stops with an error saying ``reason`` (in its exchange, or after its kernel
        call), and everything it holds goes."""
        with self._lock:
            self._failure = reason
            self._leave()

    def close(self) -> None:
        """End the run here: what it holds goes (a loop still running stops with an error)."""
        self.fail("it was closed")

    def raise_if_failed(self, waiting: str = "") -> None:
        if self._failure is not None:
            raise GpipeError(f"the run was stopped{waiting} ({self._failure})")

    def _leave(self) -> None:
        """Let everything go and leave the store's registry (under the lock)."""
        self._inbox.clear()
        self._local_inbox.clear()
        self._outbound.clear()
        self._mail.clear()
        self._blocks.clear()
        self._pieces.clear()
        self.rows = None
        self._held = 0
        self._state = None
        self._heard.notify_all()
        self.store.unregister(self)

    def _leave_if_drained(self) -> None:
        """Leave the registry once the loop has ended here and every output was taken (under the lock)."""
        if not (self.looping or self._pieces or self._blocks or self.rows is not None):
            self.store.unregister(self)

    def state(self, kind: type) -> Any:
        """The family's own state of this run here: one object of ``kind`` (a family's state type, e.g. the
        sampler's), made by ``kind()`` on first use and held until the run ends here (or its superstep loop does);
        a run holds the state of one family."""
        with self._lock:
            if self._state is None:
                self._state = kind()
            elif not isinstance(self._state, kind):
                raise GpipeError(f"run {self.id} holds {type(self._state).__name__}, not {kind.__name__}")
            return self._state

    # -- work overlapped with a step's kernel

    def overlap(self, work: Callable[[], object] | None) -> bool:
        """Give the next step ``work`` to do while its kernel runs (see :meth:`while_kernel`), or None: nothing.
        Whether the work given before was done."""
        done, self._meanwhile = self._meanwhile is None, work
        return done

    def while_kernel(self) -> None:
        """Do the work the runtime gave this step to overlap with its kernel (a chunked superstep's exchange round
        of the chunk before: ``_superstep.in_chunks``): a step that launches a kernel and then waits for it calls
        this between the two. A step that does not leaves it to the runtime, after the step."""
        work, self._meanwhile = self._meanwhile, None
        if work is not None:
            work()

    # -- walkers

    def deliver(self, superstep: int, part: int, walkers: dict, local: bool = False) -> None:
        """Walkers for partition ``part`` (held here) to advance in ``superstep`` (``local``: from a partition here)."""
        with self._lock:
            (self._local_inbox if local else self._inbox)[(superstep, part)].append(walkers)

    def take_inbox(self, superstep: int, part: int) -> list[dict]:
        with self._lock:
            return self._inbox.pop((superstep, part), []) + self._local_inbox.pop((superstep, part), [])

    def take_local(self, superstep: int, part: int) -> list[dict]:
        """Only the walkers that came from this worker's own partitions (the peers' stay, as their counts say)."""
        with self._lock:
            return self._local_inbox.pop((superstep, part), [])

    def local_waiting(self, superstep: int, part: int) -> bool:
        with self._lock:
            return bool(self._local_inbox.get((superstep, part)))

    def waiting(self, key: tuple[str, int]) -> int:
        """Walkers waiting in the inboxes for partition ``key`` (its graph, its number): the workload policy's."""
        with self._lock:
            return sum(next(iter(w.values())).shape[0] for inbox in (self._inbox, self._local_inbox)
                       for (_, p), ws in inbox.items() if p == key[1] for w in ws)

    def hold(self, part: int, walkers: dict, routed: bool) -> None:
        """Walkers for partition ``part`` of a peer, sent at the end of the superstep (``routed``: by their ``to``
        field, not by their vertex)."""
        with self._lock:
            self._outbound[part].append(walkers)
            self.routed = routed

    def take_outbound(self) -> dict[int, list[dict]]:
        """The walkers held for peers in this superstep, by partition, oldest first."""
        with self._lock:
            outbound, self._outbound = dict(self._outbound), defaultdict(list)
            return outbound

    # -- the exchange's mailbox (the comms transport)

    def hear(self, superstep: int, rank: int, words: np.ndarray, payload) -> None:
        """A peer's header and payload of ``superstep`` (the ``gpipe_exchange`` handler), and when it came."""
        with self._heard:
            if self._failure is None:
                self._mail[superstep][rank] = (words, payload, time.perf_counter())
            self._heard.notify_all()

    def wait_heard(self, superstep: int, peers: dict[str, int], watch) -> dict[int, tuple]:
        """Every peer's header, payload and time of arrival (``time.perf_counter``) of ``superstep`` (peers:
        worker -> rank), once all have come; the
        wait stops with an error when the run ends here or a silent peer cannot be reached."""
        with self._heard:
            while len(self._mail.get(superstep, ())) < len(peers):
                heard = self._mail.get(superstep, {})
                silent = [w for w, r in peers.items() if r not in heard]
                self._lock.release()
                try:
                    watch(f"the other workers' superstep {superstep}", silent)
                finally:
                    self._lock.acquire()
                self._heard.wait(timeout=0.25)
            return self._mail.pop(superstep, {})

    # -- outputs

    def add_pieces(self, part: int, pieces: dict, limit: int | str | None) -> int:
        """Keep what a step output; then, past ``limit`` bytes of outputs on the device, spill the oldest to host.

        ``limit`` (``gpipe.memory.output-limit``: bytes, 'auto' or None, never
        spill) counts the outputs of every run on this worker; the oldest
        spill first, whichever run's (see ``Outputs.spill``). Returns the bytes
        spilled. A run that has ended here keeps nothing: its loop stops with
        an error, after the kernel call it was in. Arrays that view more
        memory than their own are copied (see :func:`_owned`).
        """
        if pieces is None:  # a step that wrote its walks' rows in place (``Run.rows``) keeps nothing
            self.raise_if_failed()
            return 0
        pieces = _owned(pieces)
        with self._lock:
            self.raise_if_failed()
            self._pieces[part].append(pieces)
            self._held += nbytes(pieces)
            if limit is None:
                return 0
            return self.store.outputs.spill(limit)

    def spill(self, over: int) -> int:
        """Move piece sets to host memory, oldest first, until ``over`` bytes have gone or none is left on the
        device; returns the bytes moved (call under the lock)."""
        spilled = 0
        for sets in self._pieces.values():
            for i, s in enumerate(sets):
                if spilled >= over:
                    break
                if not isinstance(s, Spilled):
                    spilled += nbytes(s)
                    sets[i] = Spilled(on_host(s))
        self._held -= spilled
        return spilled

    @property
    def held(self) -> int:
        """Bytes of outputs on the device (call under the lock)."""
        return self._held

    def _taken(self, sets: list) -> list:
        """``sets``, no longer counted among the outputs on the device (call under the lock)."""
        self._held -= sum(nbytes(s) for s in sets if not isinstance(s, Spilled))
        return sets

    def _all_pieces(self) -> list:
        """Every piece set here, out of its partition's list, oldest first in each (call under the lock)."""
        return [s for part in sorted(self._pieces) for s in self._pieces.pop(part)]

    def take_pieces(self) -> list:
        """Every piece set the run output here, taken (no longer counted among the outputs: see ``_gather``, which
        keeps them again where they go)."""
        with self._lock:
            return self._taken(self._all_pieces())

    def keep_rows(self, rows) -> None:
        """Keep ``rows`` (``OwnedRows``) for this worker's blocks (or, while the steps run, for every block: see
        ``_gather.merge_rows``), in place of those kept before: the run's steps may write there, its assembly
        makes the blocks from them; counted among the outputs on the device if they are there."""
        with self._lock:
            self._held += _device_bytes(rows) - _device_bytes(self.rows)
            self.rows = rows

    def keep_with(self, part: int) -> dict:
        """Every piece set here kept with partition ``part`` (a run on one worker gathers its pieces so: nothing
        moves); what ``_gather.gather`` returns."""
        with self._lock:
            sets = self._all_pieces()
            if sets:
                self._pieces[part] = sets
        return {"sent": 0, "spilled": 0, "seconds": 0.0}

    def take_block(self, part: int, block: int, block_rows: int, n_blocks: int, dtype) -> list[dict]:
        """Partition ``part``'s pieces of output block ``block`` (grouping all its pieces on first call).

        Spilled pieces are grouped in host memory, apart: one piece set of the
        block for those on the device and one for those on the host.
        """
        def by_block(sets: list) -> dict:
            kinds = [(x, [s for s in sets if isinstance(s, Spilled) == spilled])
                     for x, spilled in ((xp(self.store.device), False), (np, True))]
            sets.clear()  # group_by_block frees each set once it is split
            held = [_pieces.group_by_block(x, mine, block_rows, n_blocks, dtype) for x, mine in kinds if mine]
            return {b: [h[b] for h in held] for b in range(n_blocks)}

        return self.take_group(part, block, by_block)

    def take_group(self, part: int, key, group: Callable[..., dict], rows: bool = False) -> Any:
        """Group ``key`` of partition ``part``'s outputs: on the first call every piece set there is taken and
        split by ``group`` (piece sets -> every group by key; with ``rows``, ``group(piece sets, the rows kept
        or None)``, the rows taken too), later calls take the other groups."""
        with self._lock:
            groups = self._blocks.get(part)
            if groups is None:
                sets = self._taken(self._pieces.pop(part, []))
                if rows:
                    kept, self.rows = self.rows, None
                    self._held -= _device_bytes(kept)
                    groups = self._blocks[part] = group(sets, kept)
                else:
                    groups = self._blocks[part] = group(sets)
            taken = groups.pop(key)
            if not groups:
                del self._blocks[part]
                self._leave_if_drained()
            return taken

    def pieces(self, part: int) -> list:
        """What the step output on partition ``part`` so far, left here."""
        with self._lock:
            return list(self._pieces.get(part, ()))


class Spilled(dict):
    """A piece set moved from the device to host memory (``gpipe.memory.output-limit``)."""


def on_host(pieces: dict) -> dict:
    return {k: on_host(v) if isinstance(v, dict) else to_host(v) for k, v in pieces.items()}


def _device_bytes(rows) -> int:
    """What ``rows`` (``OwnedRows`` or None) take on the device."""
    return int(rows.array.nbytes) if rows is not None and device_of(rows.array) == "gpu" else 0


def nbytes(pieces: dict) -> int:
    return sum(nbytes(v) if isinstance(v, dict) else v.nbytes for v in pieces.values())


def _owned(pieces: dict) -> dict:
    """A step's outputs with every array holding its own memory: a view into more (a piece's walk ids and first
    steps are the walkers' own, and walkers that arrived are views into their sender's payload, with every other
    field) would keep all of it until the run's outputs are assembled, uncounted by the output limit. (R-MAT 24,
    DeepWalk x10, 4 partitions on 2 H200s: assembly ran out of device memory at 148 GB.)"""
    return {k: _owned(v) if isinstance(v, dict) else _own(v) for k, v in pieces.items()}


def _own(array):
    base = array.base
    if base is None:
        return array
    size = getattr(base, "nbytes", None)
    return array.copy() if size is None or size > array.nbytes else array
