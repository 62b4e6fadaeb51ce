"""One way to get a Dask client: ``gpipe.connect()``."""

from __future__ import annotations

import os
import sys
import time

from distributed import Client, LocalCluster
from distributed.comm.addressing import parse_address
from distributed.comm.registry import get_backend
from distributed.security import Security

from . import config, kernels
from ._validate import check_callable, check_choice, check_client, check_optional_int
from .backend import DEVICES, gpu_count, gpu_problem, resolve
from .errors import DeviceUnavailableError, GpipeError, GpipeValueError
from .runtime import attach, workers_info
from .runtime.calls import gather_pinned, submit
from .runtime.workers import worker_device

ENV_SCHEDULER_FILE = "GPIPE_SCHEDULER_FILE"
ENV_ADDRESS = "GPIPE_SCHEDULER_ADDRESS"
_LOOPBACK = "127.0.0.1"  # where a local cluster listens unless told otherwise
# The credentials of the local clusters this process started (scheduler address -> their Security): only the
# processes holding them connect, so connect(address=...) here finds them, and no other user's process does.
_LOCAL_SECURITY: dict[str, Security] = {}


class _LocalClient(Client):
    """A client that owns the local cluster it was started with and closes it too."""

    def close(self, *args, **kwargs):
        result = super().close(*args, **kwargs)
        if self.cluster is not None and self.cluster.status.name not in ("closed", "closing"):
            _LOCAL_SECURITY.pop(self.cluster.scheduler_address, None)
            self.cluster.close()
        return result


def _security(scheduler_file: str | None, address: str | None) -> Security | None:
    """The credentials to reach a cluster: those the scripts of ``cluster/`` make beside its scheduler file
    (``scheduler.json`` -> ``scheduler.tls/cert.pem``, ``key.pem``; the certificate its own authority), or those of
    a local cluster this process started; None: Dask's config (``distributed.comm.tls``)."""
    if scheduler_file is None:
        return _LOCAL_SECURITY.get(address)
    folder = (scheduler_file[:-len(".json")] if scheduler_file.endswith(".json") else scheduler_file) + ".tls"
    if not os.path.isdir(folder):
        return None
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    return Security(require_encryption=True, tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key)


def connect(scheduler_file: str | None = None, address: str | None = None, *, n_workers: int | None = None,
            threads_per_worker: int | None = None, device: str | None = None, **cluster_kwargs) -> Client:
    """Connect to a Dask cluster, or start one on this machine, and prepare its workers for gpipe.

    The cluster is, in order: ``scheduler_file`` or ``address`` when given; the
    ``GPIPE_SCHEDULER_FILE`` or ``GPIPE_SCHEDULER_ADDRESS`` environment variable
    (what the scripts in ``cluster/`` export); a ``LocalCUDACluster`` with one
    worker per visible GPU; else a ``LocalCluster`` of worker processes. Dask
    runs whatever a client that connects sends, and on a shared machine the
    loopback interface is open to every user: so a local cluster speaks TLS
    with a certificate made for it (Dask's ``Security.temporary()``), which
    only this process and its workers hold (``connect(address=...)`` here finds
    it), and listens on this machine's loopback interface only (scheduler,
    workers and dashboard, at ``127.0.0.1:8787`` or the next free port); pass
    ``host``, ``dashboard_address`` and ``security`` to open it up. A
    cluster's scheduler file brings the certificate that the scripts of
    ``cluster/`` make, in the folder beside it (``scheduler.json`` ->
    ``scheduler.tls``); else Dask's ``distributed.comm.tls`` settings are used. Its
    worker processes, and those their nannies start again (after running out
    of memory), ignore Ctrl-C once they join (a terminal sends it to all of
    them; the client stops them) and leave the gpipe errors of their tasks to
    the client, which raises them (their log would print them again). On an
    existing cluster, it waits up to ``gpipe.cluster.wait-timeout`` seconds for
    the scheduler file to appear and, when ``gpipe.cluster.wait-for-workers`` is
    set (``gpipe run --wait-for-workers``), for that many workers to join.

    Parameters
    ----------
    scheduler_file, address : str, optional
        An existing cluster's scheduler file or address.
    n_workers, threads_per_worker : int, optional
        Local clusters only; default one worker per GPU, or one CPU worker
        whose kernels use every core (walkers then never migrate).
    device : {'auto', 'cpu', 'gpu'}, optional
        Where kernels run (default ``gpipe.device``, 'auto': the GPU when every
        worker has one). 'gpu' without a usable GPU raises.
    **cluster_kwargs
        Passed to ``LocalCluster`` / ``LocalCUDACluster`` (default
        ``host='127.0.0.1'``, ``dashboard_address='127.0.0.1:8787'``,
        ``security=Security.temporary()``).

    Returns
    -------
    distributed.Client
        Also a context manager; closing a client that started a local cluster closes the cluster.

    Raises
    ------
    DeviceUnavailableError
        ``device='gpu'`` and no worker can use a GPU (the message says what is missing).
    GpipeValueError
        The address is not a scheduler address, or the scheduler file is not one Dask wrote.
    GpipeError
        The scheduler cannot be reached (or speaks TLS, and no certificate for it is here), or its file did
        not appear, or the workers did not join, within the wait timeout.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu") as client:
    ...     len(client.nthreads())
    1
    """
    device = check_choice("device", device or config.get("device"), DEVICES)
    n_workers = check_optional_int("n_workers", n_workers if n_workers is not None else config.get("cluster.n-workers"), minimum=1)
    threads_per_worker = check_optional_int("threads_per_worker", threads_per_worker, minimum=1)
    (scheduler_file, address), name = named_cluster(scheduler_file, address)
    wait_for_workers = config.get("cluster.wait-for-workers")
    timeout = config.get("cluster.wait-timeout")
    if scheduler_file or address:
        where = f"scheduler file {os.fspath(scheduler_file)!r}" if scheduler_file else f"address {address!r}"
        try:
            if scheduler_file:
                _wait_for_file(os.fspath(scheduler_file), timeout)
            if address:  # read as Dask reads it, before a client starts its event loop only to fail on it
                scheme, location = parse_address(address)
                get_backend(scheme).get_address_host_port(location)
            security = _security(scheduler_file and os.fspath(scheduler_file), address)
            if scheduler_file:
                client = Client(scheduler_file=os.fspath(scheduler_file), security=security)
            else:
                client = Client(address, security=security)
        except OSError as exc:  # TimeoutError included
            raise GpipeError(f"cannot reach the scheduler of {where}: {exc}") from None
        except TypeError as exc:  # Dask's "TLS expects a `ssl_context` argument": no credentials for a tls:// address
            raise GpipeError(f"the scheduler of {where} speaks TLS, and this process holds no certificate for it "
                             f"({exc}): connect in the process that started the cluster, through the scheduler file "
                             f"of a cluster of cluster/*.sh (its credentials are beside it), or set Dask's "
                             f"distributed.comm.tls settings") from None
        except ValueError as exc:  # Dask's reading of the address or of the file
            rule = "a scheduler file Dask wrote" if scheduler_file else "a scheduler address such as tcp://HOST:PORT"
            raise GpipeValueError(f"'{name}' must be {rule}, got {scheduler_file or address!r}: {exc}") from None
    else:
        client = _LocalClient(_local_cluster(device, n_workers, threads_per_worker, cluster_kwargs))
    try:
        if wait_for_workers and (scheduler_file or address):
            _wait_for_workers(client, wait_for_workers, timeout)
        attach(client, device, local=isinstance(client, _LocalClient))
    except BaseException:
        client.close()
        raise
    return client


def named_cluster(scheduler_file: str | None = None, address: str | None = None) -> tuple[tuple, str | None]:
    """``(scheduler_file, address)`` of the cluster :func:`connect` joins (both None: it starts one), in its order:
    the arguments, the environment, the config; and the name of the one it uses, as the user gave it (the
    parameter, the variable or the config key)."""
    for names, values in ((("scheduler_file", "address"), (scheduler_file, address)),
                          ((ENV_SCHEDULER_FILE, ENV_ADDRESS), (os.environ.get(ENV_SCHEDULER_FILE),
                                                               os.environ.get(ENV_ADDRESS))),
                          (("gpipe.cluster.scheduler-file", "gpipe.cluster.address"),
                           (config.get("cluster.scheduler-file"), config.get("cluster.address")))):
        for kind, (name, value) in enumerate(zip(names, values, strict=True)):
            if value:
                return ((value, None) if kind == 0 else (None, value)), name
    return (None, None), None


_GUARD = ("worker processes re-import the main module: put the code that starts the cluster under "
          "`if __name__ == \"__main__\":`")


def _local_cluster(device: str, n_workers: int | None, threads_per_worker: int | None, kwargs: dict):
    if _importing_main_in_a_worker():
        raise GpipeError(f"gpipe.connect() was called while a worker process imported the script: {_GUARD}")
    kwargs = {"host": _LOOPBACK, "dashboard_address": f"{_LOOPBACK}:8787", **kwargs}
    if "security" not in kwargs:
        kwargs["security"] = Security.temporary()
    try:
        cluster = _start_local_cluster(device, n_workers, threads_per_worker, kwargs)
    except RuntimeError as exc:
        if "failed to start" not in str(exc) or not _main_is_a_script():
            raise
        raise GpipeError(f"the local cluster's workers failed to start ({exc}); in a script, {_GUARD}") from None
    _LOCAL_SECURITY[cluster.scheduler_address] = cluster.security
    return cluster


def _importing_main_in_a_worker() -> bool:
    """Whether this is a spawned process running the parent's main script (as ``__mp_main__``) at module level."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            return True
        frame = frame.f_back
    return False


def _main_is_a_script() -> bool:
    return getattr(sys.modules.get("__main__"), "__file__", None) is not None


def _start_local_cluster(device: str, n_workers: int | None, threads_per_worker: int | None, kwargs: dict):
    if device != "cpu" and gpu_count() > 0:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as exc:
            if device == "gpu":
                raise DeviceUnavailableError(
                    f"device='gpu' needs dask-cuda to start GPU workers ({exc}); install it with `pip install 'gpipe[gpu]'`"
                ) from None
        else:
            if n_workers is not None:
                kwargs.setdefault("CUDA_VISIBLE_DEVICES", list(range(min(n_workers, gpu_count()))))
            return LocalCUDACluster(threads_per_worker=threads_per_worker or 1, **kwargs)
    if device == "gpu":
        raise DeviceUnavailableError(f"device='gpu' was asked for, but {gpu_problem() or 'no GPU is visible'}")
    cores = os.cpu_count() or 1
    n_workers = n_workers or 1
    threads_per_worker = threads_per_worker or max(1, cores // n_workers)
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True, **kwargs)


def warmup(client: Client | None = None, *, device: str | None = None, progress=None) -> dict:
    """Compile gpipe's kernels ahead of the first call that needs them.

    A kernel is compiled at its first use and cached on disk, for every later
    process of that install or host: the CPU twins by numba (beside gpipe's
    sources), the CUDA kernels by CuPy (for the host's GPU). So the first call
    on a fresh install, or on a fresh GPU host, pays the compiles: 52 s for
    every CPU twin on a 2-core machine (0.46 s to load them once cached). This
    pays them ahead, e.g. in a batch job's set-up, or once per node. With a
    client it then runs every walk and the neighbor sampler once on a tiny
    graph through the cluster and brings their results here, which compiles
    the array code around the kernels too (CuPy's own elementwise kernels,
    cached per host): on a fresh H200 host the first R-MAT 24 DeepWalk (10
    walks per vertex) was ready in 2.17 s after the kernels alone were
    compiled, 0.65 s after this (the second: 0.93 s).

    Parameters
    ----------
    client : distributed.Client, optional
        Compile on each of its workers, each for its own device (each host's
        caches); without one, in this process.
    device : {'auto', 'cpu', 'gpu'}, optional
        Without a client: the device to compile for (default ``gpipe.device``;
        'auto' the GPU where one is usable, else the CPU).
    progress : callable, optional
        ``progress(done, total, kernel)`` after each kernel (in this process
        only).

    Returns
    -------
    dict
        ``device``, ``kernels`` (instantiations compiled) and ``seconds``;
        with a client, one such dict per worker address, each with
        ``calls_seconds``, the time the tiny graph's calls took in all.

    Examples
    --------
    >>> import gpipe
    >>> gpipe.warmup(device="cpu")["kernels"] > 0
    True
    """
    if client is None:
        device = resolve(check_choice("device", config.get("device") if device is None else device, DEVICES))
        return kernels.warm(device, None if progress is None else check_callable("progress", progress))
    check_client("client", client)
    if device is not None or progress is not None:
        raise GpipeValueError("warmup on a cluster's workers compiles for each worker's own device, with no "
                              "progress here: pass neither 'device' nor 'progress' with a client (got "
                              f"{device!r}, {progress!r})")
    workers = sorted(workers_info(client))
    done = gather_pinned(client, [submit(client, _warm_here, workers=[w]) for w in workers], dict(enumerate(workers)),
                         "warmup", "worker")
    calls = _warm_calls(client, len(workers))
    return {w: {**d, "calls_seconds": calls} for w, d in zip(workers, done, strict=True)}


def _warm_calls(client: Client, workers: int) -> float:
    """Each walk and the neighbor sampler once on a tiny graph held on every worker, their results brought here:
    the array code around the kernels (CuPy's elementwise kernels, compiled at first use and cached per host: 14
    of them took 6.3 s in the first DeepWalk on a fresh H200 host; the client's own compiled passes) runs once.
    Its seconds."""
    from .graph.generators import rmat  # when called: the package imports this module before its families
    from .sampling import neighbor
    from .walks import deepwalk, metropolis_hastings, node2vec, ppr, with_jump

    t0 = time.perf_counter()
    with client.as_current():  # a graph held whole on each worker; on several, one cut among them too
        for mode in ("replicated",) + (("partitioned",) if workers > 1 else ()):
            g = rmat(scale=8, edge_factor=8, seed=1, weighted=True, mode=mode)
            try:
                for weighted in (False, True):
                    deepwalk(g, length=8, weighted=weighted, seed=1).compute()
                    node2vec(g, p=2.0, q=0.5, length=8, weighted=weighted, seed=1).compute()
                    neighbor(g, seeds=[0, 1, 2], fanouts=2, depth=2, weighted=weighted, seed=1).compute()
                metropolis_hastings(g, length=8, seed=1).compute()
                with_jump(g, length=8, seed=1).compute()
                ppr(g, [0, 1], walks_per_source=4, length=8, seed=1).compute()
            finally:
                g.release()
    return time.perf_counter() - t0


def _warm_here() -> dict:
    """On a worker: :func:`gpipe.kernels.warm` for its device."""
    return kernels.warm(worker_device())


def _wait_for_file(path: str, timeout: float) -> None:
    """Wait for a scheduler file (a batch job's scheduler may still be starting); Client would wait forever."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not os.path.exists(path):
        if deadline is not None and time.monotonic() > deadline:
            raise GpipeError(f"the scheduler file {path!r} did not appear within {timeout:g} s "
                             f"(gpipe.cluster.wait-timeout): is the scheduler running?")
        time.sleep(0.1)


def _wait_for_workers(client: Client, n_workers: int, timeout: float) -> None:
    try:
        client.wait_for_workers(n_workers, timeout=timeout)
    except TimeoutError:
        joined = len(workers_info(client))
        raise GpipeError(f"'gpipe.cluster.wait-for-workers': {n_workers} workers expected at "
                         f"{client.scheduler.address}, {joined} joined within {timeout:g} s "
                         f"(gpipe.cluster.wait-timeout); see the workers' logs") from None
