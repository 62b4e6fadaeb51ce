"""Which client and device gpipe work runs on: attaching a Dask client once."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from distributed import Client, default_client
from distributed.client import AllExit
from distributed.gc import disable_gc_diagnosis

from .. import config
from .._validate import check_bool, check_choice
from ..backend import DEVICES, gpu_problem
from ..errors import DeviceUnavailableError, GpipeError
from ._store import PLUGIN_NAME, GpipeStore


@dataclass(frozen=True)
class Session:
    client: Client
    device: str

    def workers(self) -> list[str]:
        """Addresses of the workers now connected, in a stable order."""
        workers = sorted(workers_info(self.client))
        if not workers:
            raise GpipeError(f"the cluster at {self.client.scheduler.address} has no workers")
        return workers


_sessions: dict[str, Session] = {}


def workers_info(client: Client) -> dict[str, dict]:
    """The scheduler's table of its workers (address -> info), asked for now.

    Not ``client.scheduler_info()["workers"]``: the client refreshes that
    table every few seconds without the workers, and a refresh landing
    during the call returns it empty (a run would think every worker gone).
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def _store_device(dask_worker=None) -> str | None:
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return getattr(plugin, "device", None)


def attach(client: Client, device: str = "auto", timeout: float = 60, *, local: bool = False) -> Session:
    """Register gpipe's worker store on every worker of ``client`` and fix the device.

    ``device='auto'`` picks the GPU when every worker has one; ``'gpu'`` raises
    :class:`DeviceUnavailableError` naming a worker without a usable GPU.
    ``local``: the workers are a local cluster's, started by ``connect()``, that
    write to this process's terminal; the store leaves Ctrl-C and the gpipe errors
    of their tasks to the client on every worker, one its nanny restarts too. The
    cluster's scheduler, in this process, stops timing its garbage collections:
    Python ignores a KeyboardInterrupt raised in a garbage collector's callback
    (printing "Exception ignored in ... GCDiagnosis._gc_callback"), and one Ctrl-C
    in ten, in a loop of walks, was lost so.
    """
    check_choice("device", device, DEVICES)
    check_bool("local", local)
    client.wait_for_workers(1, timeout=timeout)
    problems = client.run(gpu_problem) if device != "cpu" else {}
    missing = {w: p for w, p in problems.items() if p is not None}
    if device == "gpu" and missing:
        worker, problem = next(iter(sorted(missing.items())))
        raise DeviceUnavailableError(f"device='gpu' was asked for, but on worker {worker}: {problem}")
    resolved = "cpu" if device == "cpu" or missing else "gpu"
    if set(client.run(_store_device).values()) != {resolved}:
        client.register_plugin(GpipeStore(resolved, local), name=PLUGIN_NAME)
    if client.loop.asyncio_loop.get_exception_handler() is None:  # type: ignore[attr-defined]
        client.loop.asyncio_loop.set_exception_handler(_but_interrupted_waits)  # type: ignore[attr-defined]
    if local:  # its scheduler runs in this process, and watches every garbage collection here
        disable_gc_diagnosis(force=True)
    session = _sessions[client.id] = Session(client, resolved)
    return session


def _but_interrupted_waits(loop, context: dict) -> None:
    """The client's event loop's handler of errors nothing retrieved: what asyncio does, but for Dask's ``AllExit``
    (how its gather stops waiting on the others once a future failed). A Ctrl-C in ``client.gather`` cancels the
    gather but not its waits, which raise ``AllExit`` when the client lets the futures go: a 6-line 'Task
    exception was never retrieved' under the user's KeyboardInterrupt."""
    if not isinstance(context.get("exception"), AllExit):
        loop.default_exception_handler(context)


def run_later(client: Client, function, *args) -> None:
    """``client.run(function, *args)`` from any thread (a garbage collector's too), without waiting.

    Nothing happens when the cluster is already going away.
    """
    if client.status == "running":
        client.loop.add_callback(_run_quietly, client, function, args)


async def _run_quietly(client: Client, function, args: tuple) -> None:
    with contextlib.suppress(Exception):  # the cluster is going away: nothing left to do
        await client.run(function, *args, asynchronous=True)


def current(client: Client | None = None) -> Session:
    """The session of ``client`` (default: the current Dask client), attaching it on first use."""
    if client is None:
        try:
            client = default_client()
        except ValueError:
            raise GpipeError("no Dask client is connected: call gpipe.connect() first") from None
    session = _sessions.get(client.id)
    if session is None or session.client.status != "running":
        session = attach(client, config.get("device"))
    return session
