"""Results read straight from the memory of workers on the client's host (Linux cross-memory attach).

``compute()`` brings a result's blocks into the client's memory. Through
Dask's comms each block's bytes are written to a socket by the worker and
read from it by the client (about 3.5 GB/s on a local cluster). A worker on
the client's host can instead lend its host arrays: it keeps them under a
token and replies with where they are (:class:`Loan`), the client reads them
with ``process_vm_readv`` (one copy, from several threads: what UCX's ``cma``
transport does) and gives the token back, and the worker lets them go.

Which way a worker's blocks come is decided before the call, by
``gpipe.results.transfer``: ``auto`` reads the memory of every worker that
a probe shows this process can read (the same host, boot and process
namespace, the syscall there and allowed by the kernel: a local cluster's
workers are this process's children), and uses the comms for the others;
``memory`` is an error where a worker cannot be read; ``comms`` always
sends. The probe is asked once per worker; the result's ``stats`` say which
way its blocks came (``transfer``). A read that fails after the probe is an
error naming the worker, never a silent switch to the comms.

A loan lives no longer than the call that asked for it, whatever ends the
call (:class:`Loans`): the client gives the token back once it has read the
arrays, or at once when the call fails or is interrupted, and what a worker
lends after that (it was still making it) is not kept. Nor does a loan live
longer than the blocks it was made from: should the token never come back
(the client died, or was interrupted again as it gave it back), the loan
goes when the result lets its blocks go, or the scheduler does, as it does
a departed client's.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config
from ..errors import GpipeError, GpipeValueError

_READ_THREADS = min(8, os.cpu_count() or 1)
_PIECE = 64 << 20  # bytes one thread reads per call


def _host() -> str:
    """This host, boot and process namespace: a pid means the same process only where all three agree."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{socket.gethostname()} {boot} {os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # not Linux: no process of another can be read
        return f"{socket.gethostname()} {os.getpid()} (no /proc)"


HOST = _host()
_PROBE = np.frombuffer(os.urandom(32), np.uint8)  # what a probe reads of this process: its own random bytes


def _syscall():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.process_vm_readv
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_ssize_t
    call.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    return call


_READV = _syscall()


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


@dataclass(frozen=True)
class LentArray:
    """An array a worker lends: ``shape`` of ``dtype`` at ``address`` in its memory."""

    address: int
    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class Loan:
    """A worker's reply for one block: ``value`` with each of its arrays (itself, or a dict's values) a
    :class:`LentArray`, kept by process ``pid`` until the client gives them back."""

    pid: int
    value: Any


def lend(value) -> tuple[Loan, list[np.ndarray]]:
    """On a worker: ``value`` (an array, or a dict of arrays and other values) lent: the loan saying where its
    arrays are, and the arrays, which the worker keeps (:class:`Loans`) until the token is given back."""
    kept = []

    def lent(a):
        if not isinstance(a, np.ndarray) or a.dtype.hasobject:  # objects are pointers: they travel as values
            return a
        a = np.ascontiguousarray(a)
        kept.append(a)
        return LentArray(a.ctypes.data, a.shape, a.dtype)

    value = {k: lent(v) for k, v in value.items()} if isinstance(value, dict) else lent(value)
    return Loan(os.getpid(), value), kept


class Loans:
    """A worker's arrays lent to clients, by the token of the ``compute()`` call that asked for them, each loan
    with the keys of the blocks it was made from; every method runs on the worker's event loop.

    A loan goes when its token is given back (:meth:`give_back`). A token given back before its call lent (an
    interrupted or failed ``compute()`` gives it back at once, while the worker may still be making what it
    lends) is remembered until the call ends (:meth:`keep`), which then keeps nothing. A loan, or such a
    token, goes too when a block it was made from leaves the worker (:meth:`let_go`): the client let its result
    go, or left the cluster, dead or not (the scheduler lets a departed client's blocks go).
    """

    def __init__(self, worker):
        self._worker = worker
        self.lent: dict[str, tuple[frozenset, list[np.ndarray]]] = {}  # token -> (block keys, arrays)
        self.returned: dict[str, frozenset] = {}  # token given back before its call ended -> its blocks held here

    async def keep(self, token: str, keys: list, arrays: list[np.ndarray]) -> None:
        """The call lending under ``token`` has ended, having made ``arrays`` (none where it failed) of the blocks
        ``keys``: they are kept until the token is given back, unless it was already. Should a block have left
        meanwhile (nothing would let them go), the call fails rather than lend what is not kept."""
        if self.returned.pop(token, None) is not None:
            return
        tasks = self._worker.state.tasks
        gone = [key for key in keys if key not in tasks or tasks[key].state != "memory"]
        if gone and arrays:
            raise GpipeError(f"compute: block {gone[0]!r} left worker {self._worker.address} as the worker lent it "
                             "(Dask released or moved it); compute again")
        if not gone:
            self.lent[token] = (frozenset(keys), arrays)

    async def give_back(self, token: str, keys: list) -> None:
        """``gpipe_return``: the arrays lent under ``token`` let go; should its call (on blocks among ``keys``, the
        whole ``compute()``'s) still be making them, they are not kept when it ends."""
        tasks = self._worker.state.tasks
        held = frozenset(key for key in keys if key in tasks)
        if self.lent.pop(token, None) is None and held:  # (none held: no call will lend them)
            self.returned[token] = held

    def let_go(self, key) -> None:
        """Block ``key`` has left this worker: the loans made from it, and the tokens given back early of calls on
        it, go."""
        for token in [token for token, (keys, _) in self.lent.items() if key in keys]:
            del self.lent[token]
        for token in [token for token, keys in self.returned.items() if key in keys]:
            del self.returned[token]

    def summary(self) -> dict:
        """What is kept for clients: loans, their bytes, and tokens given back before their calls ended."""
        lent_bytes = sum(a.nbytes for _, arrays in self.lent.values() for a in arrays)
        return {"loans": len(self.lent), "lent_bytes": lent_bytes, "returned": len(self.returned)}


def identity() -> tuple[str, int, int, bytes]:
    """On a worker: what a probe needs (host, pid, where the probe bytes are, what they are)."""
    return HOST, os.getpid(), _PROBE.ctypes.data, _PROBE.tobytes()


_WHY: dict[tuple, str | None] = {}  # (client id, worker) -> why the probe could not read it (None: it could)
_LOCK = threading.Lock()


def readable(client, workers: list[str]) -> dict[str, bool]:
    """For each of ``workers``: are its blocks read from its memory (``gpipe.results.transfer``, the probe asked
    once per worker)? ``memory`` where a worker cannot be read is a :class:`GpipeValueError` naming why."""
    asked = config.get("results.transfer")
    if asked == "comms":
        return dict.fromkeys(workers, False)
    with _LOCK:
        missing = [w for w in workers if (client.id, w) not in _WHY]
    if missing:
        found = {w: _probe(*answer) for w, answer in client.run(identity, workers=missing).items()}
        with _LOCK:
            _WHY.update(((client.id, w), why) for w, why in found.items())
    why = {w: _WHY[(client.id, w)] for w in workers}
    if asked == "memory" and any(why.values()):
        worker = min(w for w, reason in why.items() if reason)
        raise GpipeValueError(f"gpipe.results.transfer: 'memory' needs every worker's memory readable from this "
                              f"process; worker {worker}'s is not: {why[worker]}")
    return {w: reason is None for w, reason in why.items()}


def _probe(host: str, pid: int, address: int, expected: bytes) -> str | None:
    """Why a worker's memory cannot be read from here (None: it can)."""
    if _READV is None:
        return "this process has no process_vm_readv (not Linux)"
    if host != HOST:
        return f"it is on another host, boot or process namespace ({host!r}; this process: {HOST!r})"
    got = np.zeros(len(expected), np.uint8)
    try:
        _read(pid, address, got)
    except OSError as exc:
        return f"the kernel refused the read ({exc}; e.g. Yama's ptrace_scope, a container's seccomp)"
    return None if got.tobytes() == expected else "the probe read other bytes than the worker's"


_POOL: ThreadPoolExecutor | None = None


def borrowed(loans: list[Loan], worker_of: list[str], into: Callable[[int, LentArray], np.ndarray] | None = None
             ) -> list:
    """The values of ``loans`` with each :class:`LentArray` read into a new array here, the reads spread over
    threads; a read that fails is a :class:`GpipeError` naming the worker (``worker_of[i]`` lent ``loans[i]``).

    ``into(i, lent)`` (for loans of one array each): the contiguous bytes, ``lent``'s size, that loan ``i``'s array is
    read into instead (e.g. the first bytes of its rows of a wider result, widened there: no array in between);
    the value is then those bytes viewed as ``lent``'s array."""
    global _POOL
    values, reads = [], []
    for i, (loan, worker) in enumerate(zip(loans, worker_of, strict=True)):
        def made(lent, loan=loan, worker=worker, i=i):
            if not isinstance(lent, LentArray):
                return lent
            out = np.empty(lent.shape, lent.dtype) if into is None else into(i, lent).view(lent.dtype).reshape(
                lent.shape)
            flat = out.reshape(-1).view(np.uint8)
            reads.extend((loan.pid, lent.address + lo, flat[lo:lo + _PIECE], worker)
                         for lo in range(0, flat.size, _PIECE))
            return out

        v = loan.value
        values.append({k: made(x) for k, x in v.items()} if isinstance(v, dict) else made(v))
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="gpipe-read")
    for done in _POOL.map(_read_piece, reads):
        if done is not None:
            raise done
    return values


def _read_piece(piece) -> GpipeError | None:
    pid, address, out, worker = piece
    try:
        _read(pid, address, out)
    except OSError as exc:
        return GpipeError(f"compute: reading worker {worker}'s memory (process {pid}) failed: {exc}")
    return None


def _read(pid: int, address: int, out: np.ndarray) -> None:
    """``out`` (contiguous bytes) read from ``address`` in process ``pid``'s memory."""
    done, total, base = 0, out.nbytes, out.ctypes.data
    while done < total:
        local = _Iovec(base + done, total - done)
        remote = _Iovec(address + done, total - done)
        got = _READV(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err) if got < 0 else "nothing read")
        done += got
