"""Connecting the way users do: local clusters, scheduler files (HPC jobs), addresses; device errors."""

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

import gpipe
from gpipe.runtime._session import workers_info
from gpipe.backend import gpu_problem, unique
from gpipe.errors import DeviceUnavailableError, GpipeValueError, TaskError


def _walks():
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=6, partitions=3)
    return gpipe.walks.deepwalk(g, length=12, seed=2).compute()


@pytest.fixture
def scheduler_file_cluster(tmp_path):
    """A scheduler and two worker processes started as an HPC batch job starts them."""
    sched_file = tmp_path / "scheduler.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    # the dask command next to this Python (a virtual environment's), else the one on PATH
    dask = [shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")]
    procs = [subprocess.Popen(dask + ["scheduler", "--scheduler-file", str(sched_file), "--port", "0",
                                      "--dashboard-address", ":0"], env=env, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen(dask + ["worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                                                  "--nworkers", "1", "--no-dashboard"], env=env,
                                          stderr=subprocess.DEVNULL))
        yield sched_file
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def test_scheduler_file_cluster_via_environment(scheduler_file_cluster, cpu_cluster, monkeypatch):
    for _ in range(300):
        if scheduler_file_cluster.exists():
            break
        time.sleep(0.1)
    monkeypatch.setenv("GPIPE_SCHEDULER_FILE", str(scheduler_file_cluster))
    with gpipe.connect(device="cpu") as client:
        client.wait_for_workers(2, timeout=60)
        assert len(workers_info(client)) == 2
        hpc = _walks()
    with cpu_cluster.as_current():
        local = _walks()
    np.testing.assert_array_equal(hpc, local)


def test_connect_by_address_shares_the_cluster(cpu_cluster):
    with gpipe.connect(address=cpu_cluster.scheduler.address) as client:
        assert set(workers_info(client)) == set(workers_info(cpu_cluster))
        g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=2)
        assert g.num_vertices == 64
    assert cpu_cluster.status == "running"  # closing a client of an existing cluster leaves it up


@pytest.fixture(scope="module")
def default_local():
    """A local cluster as ``gpipe.connect()`` starts one by default (one CPU worker)."""
    with gpipe.connect(n_workers=1, device="cpu") as client:
        yield client


def _listening(process: psutil.Process, ports: set) -> set:
    """The addresses ``process`` listens on at ``ports``."""
    return {c.laddr.ip for c in process.net_connections(kind="inet") if c.status == "LISTEN" and c.laddr.port in ports}


def test_a_local_cluster_listens_on_loopback_only(default_local):
    scheduler = default_local.cluster.scheduler
    ports = {scheduler.port, scheduler.http_server.port}
    assert _listening(psutil.Process(), ports) == {"127.0.0.1"}  # scheduler and dashboard
    assert default_local.dashboard_link.startswith("http://127.0.0.1:")
    ports, pid = zip(*default_local.run(lambda dask_worker: (dask_worker.port, os.getpid())).values())
    assert _listening(psutil.Process(pid[0]), set(ports)) == {"127.0.0.1"}


def _refused(address: str, **connection_args) -> bool:
    """Whether a connection to ``address`` fails (a TLS handshake refused, or a plain one cut)."""
    from distributed.comm import connect as dask_connect

    async def attempt():
        comm = await dask_connect(address, timeout=3, **connection_args)
        try:
            await comm.write({"op": "identity"})
            await comm.read()
        finally:
            await comm.close()

    try:
        asyncio.run(attempt())
    except (OSError, TypeError):  # TimeoutError and CommClosedError are OSErrors
        return True
    return False


def test_a_local_cluster_lets_in_only_the_processes_holding_its_certificate(default_local):
    """Loopback is not access control on a shared host: a local cluster speaks TLS with a certificate of its own."""
    from distributed.security import Security

    scheduler = default_local.scheduler.address
    worker = next(iter(workers_info(default_local)))
    assert scheduler.startswith("tls://127.0.0.1:") and worker.startswith("tls://127.0.0.1:")
    strangers = Security.temporary().get_connection_args("client")  # a certificate of another cluster
    for address in (scheduler, worker):
        assert _refused(address, **strangers)
        assert _refused(address.replace("tls://", "tcp://"))  # no TLS at all
    assert not _refused(scheduler, **default_local.security.get_connection_args("client"))
    with pytest.raises(gpipe.GpipeError, match="speaks TLS, and this process holds no certificate for it"):
        held = gpipe.cluster._LOCAL_SECURITY.pop(scheduler)  # as another process sees it
        try:
            gpipe.connect(address=scheduler)
        finally:
            gpipe.cluster._LOCAL_SECURITY[scheduler] = held
    with gpipe.connect(address=scheduler) as client:  # this process holds it
        assert set(workers_info(client)) == set(workers_info(default_local))


def test_the_workers_of_a_local_cluster_leave_ctrl_c_to_their_client(default_local):
    """A terminal's Ctrl-C reaches every process of its group: workers that took it printed a traceback each."""
    assert set(default_local.run(signal.getsignal, signal.SIGINT).values()) == {signal.SIG_IGN}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the client's own Ctrl-C is untouched


def _new_worker(client, gone: set, timeout: float = 60) -> str:
    """The worker that joins ``client``'s cluster in place of those in ``gone``, once gpipe's store is set up on it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in set(workers_info(client)) - gone:
            if client.run(lambda dask_worker: "gpipe" in dask_worker.plugins, workers=[worker])[worker]:
                return worker
        time.sleep(0.1)
    raise AssertionError(f"no worker joined within {timeout} s")


def _ignores_ctrl_c() -> bool:
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def _fails_on(client, worker: str) -> None:
    """A task that raises a gpipe error (a bad parameter) fails on ``worker``."""
    with pytest.raises(GpipeValueError, match="'k' must be an integer >= 3"):
        client.submit(gpipe._validate.check_int, "k", 2, minimum=3, workers=[worker], pure=False).result()


def test_a_worker_its_nanny_restarts_leaves_ctrl_c_and_gpipe_errors_to_the_client(killable_cluster, capfd):
    """A worker that ran out of memory is started again by its nanny: it too ignores the terminal's Ctrl-C and
    leaves the gpipe errors of its tasks to the client (they reached only the workers there at connect)."""
    there = set(workers_info(killable_cluster))
    killed = min(there)
    os.kill(killable_cluster.run(os.getpid, workers=[killed])[killed], signal.SIGKILL)
    restarted = _new_worker(killable_cluster, there)
    assert killable_cluster.run(_ignores_ctrl_c, workers=[restarted]) == {restarted: True}
    _fails_on(killable_cluster, restarted)
    assert "Compute Failed" not in capfd.readouterr().err  # the restarted worker writes to this test's stderr


def test_the_workers_of_a_cluster_gpipe_did_not_start_keep_their_ctrl_c_and_their_logs(capfd):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster, \
            gpipe.connect(address=cluster.scheduler_address, device="cpu") as client:
        worker = _new_worker(client, set())
        assert client.run(_ignores_ctrl_c) == {worker: False}
        _fails_on(client, worker)
        assert "Compute Failed" in capfd.readouterr().err


def _logged(name: str, start: bool, dask_worker=None) -> list[str] | None:
    """On a worker: keep the records its logger ``name`` passes on (``start``), or stop and return them."""
    import logging

    logger = logging.getLogger(name)
    if start:
        dask_worker.gpipe_test_records = []
        dask_worker.gpipe_test_handler = logging.Handler()
        dask_worker.gpipe_test_handler.emit = lambda record: dask_worker.gpipe_test_records.append(record.getMessage())
        logger.addHandler(dask_worker.gpipe_test_handler)
        return None
    logger.removeHandler(dask_worker.gpipe_test_handler)
    return dask_worker.gpipe_test_records


def _a_bug() -> None:
    raise ZeroDivisionError("not a gpipe error")


def test_a_gpipe_error_of_a_direct_call_is_left_to_the_client_and_a_bug_keeps_its_worker_traceback(cpu):
    """A failed call to a worker of a local cluster (the workers share the user's terminal) printed Dask's 30 to 60
    lines of 'Exception while handling op gpipe_call' above the one-line error the client raises."""
    from gpipe.runtime.calls import call_workers

    worker = min(cpu.nthreads())
    cpu.run(_logged, "distributed.core", True, workers=[worker])
    with pytest.raises(GpipeValueError, match="'k' must be an integer >= 3"):
        call_workers(cpu, [(worker, gpipe._validate.check_int, ("k", 2), {"minimum": 3})], {0: worker}, "a test")
    with pytest.raises(ZeroDivisionError):
        call_workers(cpu, [(worker, _a_bug, (), {})], {0: worker}, "a test")
    assert cpu.run(_logged, "distributed.core", False, workers=[worker])[worker] == [
        "Exception while handling op gpipe_call"]


def _fails_later() -> None:
    time.sleep(1.0)
    raise GpipeValueError("a failure nobody waits for")


def test_a_direct_call_whose_caller_has_gone_fails_quietly(cpu):
    """Ctrl-C in a run: the client drops the run and closes its calls' connections, and the workers' loops fail;
    asyncio printed each rank's error (40 lines) as a task exception never retrieved."""
    import asyncio
    import gc

    from gpipe.runtime._wire import pack

    worker = min(cpu.nthreads())
    cpu.run(_logged, "asyncio", True, workers=[worker])
    call = asyncio.run_coroutine_threadsafe(cpu.rpc(worker).gpipe_call(call=pack((_fails_later, (), {}))),
                                            cpu.loop.asyncio_loop)
    time.sleep(0.3)
    call.cancel()  # as an interrupted call_workers does
    time.sleep(1.5)
    cpu.run(gc.collect, workers=[worker])
    assert cpu.run(_logged, "asyncio", False, workers=[worker])[worker] == []


def test_ctrl_c_in_a_gather_is_a_clean_keyboard_interrupt(cpu, caplog):
    """Dask's gather, interrupted, left its waits behind, which raised when the futures went: a 6-line 'Task
    exception was never retrieved' traceback under the user's KeyboardInterrupt."""
    import gc
    import threading

    slow = cpu.submit(time.sleep, 3, pure=False)
    ctrl_c = threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    ctrl_c.start()
    with pytest.raises(KeyboardInterrupt):
        cpu.gather(slow)
    ctrl_c.join()
    cpu.cancel(slow)
    del slow
    time.sleep(0.5)  # the waits end as the future goes
    gc.collect()
    assert "never retrieved" not in caplog.text, caplog.text


def test_the_client_of_a_local_cluster_has_no_garbage_collector_callback_to_lose_a_ctrl_c_in(cpu):
    """Python ignores a KeyboardInterrupt raised in a garbage collector's callback: the one of the local cluster's
    scheduler (in the client's process, called at every collection) lost one Ctrl-C in ten in a loop of walks."""
    import gc

    from distributed.gc import enable_gc_diagnosis

    enable_gc_diagnosis()  # as a local cluster's scheduler does as it starts
    gpipe.runtime.attach(cpu, "cpu", local=True)
    assert not [callback for callback in gc.callbacks if "distributed" in getattr(callback, "__module__", "")]


@pytest.mark.skipif(gpu_problem() is None, reason="this machine has a usable GPU")
def test_asking_for_a_missing_gpu_says_what_is_missing():
    with pytest.raises(DeviceUnavailableError, match="device='gpu' was asked for, but .*cupy"):
        gpipe.connect(device="gpu", n_workers=1)


def test_bad_connect_parameters():
    with pytest.raises(GpipeValueError, match="'device' must be one of 'auto', 'cpu', 'gpu'; got 'tpu'"):
        gpipe.connect(device="tpu")
    with pytest.raises(GpipeValueError, match="'n_workers' must be a positive integer, got 0"):
        gpipe.connect(n_workers=0, device="cpu")


def test_failed_task_names_phase_and_partition(cpu):
    from gpipe.runtime.workers import drop_graph

    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=2)
    cpu.run(drop_graph, g.graph_id)  # as if the workers had lost the graph
    with pytest.raises(TaskError, match=r"advance failed in superstep 0, partition \d: partition \d of graph \w+ is not on"):
        gpipe.walks.deepwalk(g, length=3)


def test_calls_without_a_client_say_to_connect():
    from distributed.client import _current_client, _global_clients

    saved = dict(_global_clients)
    _global_clients.clear()
    token = _current_client.set(None)
    try:
        with pytest.raises(gpipe.GpipeError, match=r"call gpipe.connect\(\) first"):
            gpipe.generators.rmat(scale=4)
    finally:
        _current_client.reset(token)
        _global_clients.update(saved)


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_the_main_guard_is_told_what_to_add(tmp_path, guarded):
    body = ('with gpipe.connect(n_workers=1, device="cpu", dashboard_address=":0") as client:\n'
            '    print("workers:", len(client.nthreads()))\n')
    if guarded:
        body = 'if __name__ == "__main__":\n' + "".join(f"    {line}\n" for line in body.splitlines())
    script = tmp_path / "tour.py"
    script.write_text("import gpipe\n\n" + body)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    if guarded:
        assert done.returncode == 0 and "workers: 1" in done.stdout, done.stderr
    else:
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 1
        assert last.startswith("gpipe.errors.GpipeError") and 'if __name__ == "__main__":' in last, last
        assert len(done.stderr.splitlines()) < 60  # not Dask's pages of tracebacks


@pytest.mark.parametrize("shape, high", [((0,), 5), ((1,), 5), ((1000,), 7), ((40, 25), 1 << 40)])
def test_unique_on_the_host_is_numpys_by_a_sort(shape, high):
    values = np.random.default_rng(high).integers(-high, high, shape)
    found = unique(np, values)
    np.testing.assert_array_equal(found, np.unique(values))
    assert found.dtype == values.dtype


def test_attach_refuses_a_local_flag_that_is_not_a_bool_naming_it(cpu):
    with pytest.raises(gpipe.GpipeValueError, match="^'local' must be true or false, got 'yes'$"):
        gpipe.attach(cpu, "cpu", local="yes")


@pytest.mark.parametrize("address, message", [
    ("bogus", "'address' must be a scheduler address such as tcp://HOST:PORT, got 'bogus': missing port number"),
    ("foo://127.0.0.1:1", "'address' must be a scheduler address such as tcp://HOST:PORT, got 'foo://127.0.0.1:1': "
                          "unknown address scheme 'foo'"),
])
def test_connect_to_a_malformed_address_says_what_an_address_is(address, message):
    with pytest.raises(GpipeValueError, match=f"^{re.escape(message)}"):
        gpipe.connect(address=address)


def test_a_malformed_address_in_the_environment_is_named_by_its_variable(monkeypatch):
    monkeypatch.setenv("GPIPE_SCHEDULER_ADDRESS", "bogus")
    with pytest.raises(GpipeValueError, match="^'GPIPE_SCHEDULER_ADDRESS' must be a scheduler address"):
        gpipe.connect()


def test_warmup_of_something_other_than_a_connected_client_says_what_it_takes():
    with pytest.raises(GpipeValueError, match=r"^'client' must be a distributed.Client \(gpipe.connect\(\) returns "
                                              r"one\), got 'x'$"):
        gpipe.warmup("x")
    with gpipe.connect(n_workers=1, device="cpu", dashboard_address=":0") as client:
        pass
    with pytest.raises(GpipeValueError, match="^'client' must be a connected client, got one that is closed: "
                                              r"connect again with gpipe.connect\(\)$"):
        gpipe.warmup(client)
