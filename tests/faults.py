"""Failures injected into gpipe's calls, and what they leave on the workers (``tests/test_failures.py``).

On the workers (through ``client.run``): a phase's runtime function replaced by one that raises, or that holds
until released (for an interrupt to land while a worker is in that phase), then put back; each worker's residue
(runs, loans, kept blocks, keys marked unwanted, open IPC handles, GPU pool bytes). In the client: a call bounded in
time (a hang is a failure, not a wedged suite), a Ctrl-C sent to the main thread while a worker holds.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib
import pickle
import signal
import sys
import threading
import time

import numpy as np
import pandas as pd

MARK = "injected fault"  # what an injected exception says, to tell it from any other failure
HOLD_SECONDS = 10  # a held worker goes on by itself after this long (the client was not interrupted)

# -- on the workers --------------------------------------------------------------------------------------------

_installed: dict[str, tuple] = {}  # target -> (owner, name, original): a worker's injections
_hits: dict[str, int] = {}  # target -> calls that reached it since installed
_reached = threading.Event()  # a held call has reached its target
_release = threading.Event()  # held calls go on


def _resolve(target: str) -> tuple[object, str]:
    """``'module:Qual.name'`` -> (the module or class holding it, its name)."""
    module, _, path = target.partition(":")
    owner = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def _faulty(target: str, original, mode: str):
    @functools.wraps(original)  # its module and name: pickled by reference where it travels (a peer's call)
    def injected(*args, **kwargs):
        if target not in _installed:  # put back, yet still called through a copy taken meanwhile
            return original(*args, **kwargs)
        _hits[target] = _hits.get(target, 0) + 1
        if mode == "raise":
            raise RuntimeError(f"{MARK} at {target}")
        if mode == "after":  # the phase's work done, then the failure
            original(*args, **kwargs)
            raise RuntimeError(f"{MARK} after {target}")
        if mode == "hold":
            _reached.set()
            _release.wait(HOLD_SECONDS)
        return original(*args, **kwargs)

    return injected


def install(targets: list[str], mode: str, dask_worker=None) -> None:
    """On a worker: each of ``targets`` replaced by one that ``mode`` says ('raise' before its work, 'after' it,
    'hold' until released, 'count' only)."""
    _reached.clear()
    _release.clear()
    for target in targets:
        owner, name = _resolve(target)
        original = vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)
        _installed[target] = (owner, name, original)
        _hits[target] = 0
        setattr(owner, name, _faulty(target, original, mode))


def restore(dask_worker=None) -> dict[str, int]:
    """On a worker: every target put back, held calls released; how often each was reached."""
    _release.set()
    for owner, name, original in _installed.values():
        setattr(owner, name, original)
    _installed.clear()
    hits = dict(_hits)
    _hits.clear()
    return hits


def reached(dask_worker=None) -> bool:
    return _reached.is_set()


def release(dask_worker=None) -> None:
    _release.set()


def residue(dask_worker=None) -> dict:
    """On a worker: what its gpipe store holds of calls that have ended (all of it is residue between calls): runs,
    loans, kept blocks, keys marked unwanted, run threads still inside a call; on a GPU worker also its memory
    pool's bytes in use and the CUDA IPC handles open (where :func:`count_handles` counts them)."""
    st = dask_worker.plugins["gpipe"]
    out = {"runs": {run_id: _described(run) for run_id, run in st.runs.items()},
           "loans": _loans(st.loans),
           "kept": sorted(str(k) for k in dask_worker.data if str(k).startswith("gpipe-")),
           "unwanted": len(st._unwanted),
           "busy run threads": _busy(st._runner)}
    if st.device == "gpu":
        import cupy

        out["pool bytes"] = cupy.get_default_memory_pool().used_bytes()
        out["ipc handles"] = _handles["open"]
    return out


def scrub(dask_worker=None) -> None:
    """On a worker: what a failed call left let go (between tests, so that one defect fails one test)."""
    from distributed.worker_state_machine import FreeKeysEvent

    st = dask_worker.plugins["gpipe"]
    for run_id in list(st.runs):
        st.drop_run(run_id)
    for registry in (st.loans,) if isinstance(st.loans, dict) else (st.loans.lent, st.loans.returned):
        registry.clear()
    st._unwanted.clear()
    kept = [k for k in dask_worker.data if str(k).startswith("gpipe-")]
    if kept:
        dask_worker.handle_stimulus(FreeKeysEvent(keys=kept, stimulus_id=f"gpipe-test-scrub-{time.time()}"))


def frozen(dask_worker=None) -> None:
    """In a process left clean (a worker between tests, or the client): its garbage collected, and what remains left
    out of later collections (``gc.freeze``). What the session made so far (the kernels loaded, the module's graphs)
    is then not scanned again by every collection a failed call makes (``_let_go``'s on the workers, ``settled``'s
    here): on workers that had run the suite's earlier modules, 0.4 s of each of 200 failing calls."""
    gc.collect()
    gc.freeze()


def _loans(loans) -> dict:
    """Token -> bytes lent, from the store's ``Loans``: its ``lent`` holds (keys, arrays) by token, its ``returned``
    the tokens given back before their calls lent."""
    lent = {token: sum(a.nbytes for a in arrays) for token, (_, arrays) in loans.lent.items()}
    return {**lent, **{f"{token} (given back before it was lent)": 0 for token in loans.returned}}


def _described(run) -> str:
    return f"looping={run.looping} failure={run._failure!r}"


def _busy(executor) -> int:
    """Threads of the store's run pool inside a call now (a stuck loop holds one)."""
    frames = sys._current_frames()
    return sum(1 for t in list(getattr(executor, "_threads", ())) if _inside(frames.get(t.ident), "_run_here"))


def _inside(frame, name: str) -> bool:
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False


_handles = {"open": 0}  # CUDA IPC handles opened and not closed, counted where ``count_handles`` was installed


def count_handles(dask_worker=None) -> None:
    """On a GPU worker: CUDA IPC opens and closes counted (see ``residue``'s 'ipc handles')."""
    import cupy

    runtime = cupy.cuda.runtime
    if getattr(runtime.ipcOpenMemHandle, "counted", False):
        return
    opened, closed = runtime.ipcOpenMemHandle, runtime.ipcCloseMemHandle

    def open_(*args):
        ptr = opened(*args)
        _handles["open"] += 1
        return ptr

    def close(ptr):
        closed(ptr)
        _handles["open"] -= 1

    open_.counted = True
    runtime.ipcOpenMemHandle, runtime.ipcCloseMemHandle = open_, close


# -- in the client ---------------------------------------------------------------------------------------------


class Hung(Exception):
    """A call that did not end in its time."""


@contextlib.contextmanager
def within(seconds: float, what: str = "the call"):
    """The block raises :class:`Hung` if it runs past ``seconds`` (SIGALRM in the main thread: it wakes a blocked
    wait, which a thread's join would not)."""
    def expired(signum, frame):
        raise Hung(f"{what} did not end within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def injected(client, targets: list[str] | str, mode: str = "raise"):
    """``targets`` replaced on every worker while the block runs (see :func:`install`); yields a dict that holds,
    once the block ends, how often each target was reached on all the workers together."""
    targets = [targets] if isinstance(targets, str) else list(targets)
    client.run(install, targets, mode)
    hits: dict[str, int] = {}
    try:
        yield hits
    finally:
        for per_worker in client.run(restore).values():
            for target, n in per_worker.items():
                hits[target] = hits.get(target, 0) + n


class Interrupt:
    """Ctrl-C for the call in :meth:`call`, sent to the main thread once a worker has reached a held target."""

    def __init__(self, client):
        self._client = client
        self._lock = threading.Lock()
        self._armed = False
        self.sent = False
        self._stop = threading.Event()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                there = any(self._client.run(reached).values())
            except Exception:  # the cluster going away ends the watch
                return
            if there:
                with self._lock:
                    if self._armed and not self.sent:
                        self.sent = True
                        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                return
            time.sleep(0.01)

    def call(self, function):
        """``function()`` in this (the main) thread, interrupted as a worker reaches the held target."""
        watcher = threading.Thread(target=self._watch, daemon=True)
        with self._lock:
            self._armed = True
        watcher.start()
        try:
            return function()
        finally:
            with self._lock:  # no Ctrl-C leaves once the call has returned (one sent lands here at the latest)
                self._armed = False
            self._stop.set()
            watcher.join(5)


@contextlib.contextmanager
def interrupting(client, targets: list[str] | str):
    """The workers hold at ``targets``; yields an :class:`Interrupt` whose ``call`` is interrupted there. Held
    calls go on once the block ends (after the client handled its Ctrl-C: what they do then is what a worker does
    after an interrupted client gave up on it)."""
    with injected(client, targets, "hold") as hits:
        interrupt = Interrupt(client)
        interrupt.hits = hits
        yield interrupt


def digest(value) -> str:
    """A digest of a call's result (arrays, frames, numbers, lists, dicts of them), equal for equal results."""
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, np.ndarray):
            h.update(str((v.dtype.str, v.shape)).encode())
            h.update(np.ascontiguousarray(v).tobytes() if v.dtype != object else pickle.dumps(v.tolist()))
        elif isinstance(v, pd.DataFrame):
            feed(list(v.columns))
            for c in v.columns:
                feed(v[c].to_numpy())
        elif isinstance(v, dict):
            for k in sorted(v, key=repr):
                feed(k)
                feed(v[k])
        elif isinstance(v, (list, tuple)):
            h.update(f"seq{len(v)}".encode())
            for x in v:
                feed(x)
        else:
            h.update(repr(v).encode())

    feed(value)
    return h.hexdigest()


def leftovers(client) -> dict:
    """Every worker's residue that is not nothing (see :func:`residue`), by worker; a GPU worker's pool bytes
    are not residue by themselves (its graphs' arrays are there): they are compared with what it held before."""
    found = {}
    for worker, left in client.run(residue).items():
        left = {k: v for k, v in left.items() if v and k not in ("pool bytes",)}
        if left:
            found[worker] = left
    return found


def settled(client, seconds: float = 3.0) -> dict:
    """The workers' leftovers once what ends in the background (a result's finalizer, a dropped run) had up to
    ``seconds`` to end: ``{}`` where nothing is left."""
    deadline = time.monotonic() + seconds
    while True:
        left = leftovers(client)
        if not left or time.monotonic() > deadline:
            return left
        gc.collect()  # a result a failure's traceback held goes, and its finalizer tells the workers
        time.sleep(0.1)
