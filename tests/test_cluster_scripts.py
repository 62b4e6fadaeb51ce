"""The launch scripts of ``cluster/`` and ``gpipe run``, run as users run them: real processes, no mocks.

``cluster/local.sh`` starts a scheduler and two workers; the SLURM and PBS batch scripts run
as two-"node" jobs with ``srun`` / ``mpiexec`` replaced by a stand-in that starts each node's
task on this machine. Every process a test starts lives in a process group of its own, which
is stopped however the test ends.
"""

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest

import gpipe
from gpipe.cli import main
from helpers import read_summary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(REPO, "cluster")

# srun's and mpiexec's stand-in: the command once per task (srun --ntasks=N, mpiexec -n N) on this machine, with
# the task's rank in SLURM_PROCID / PMI_RANK; a TERM or INT is passed on to the tasks, as srun does.
FAKE_LAUNCHER = """#!/usr/bin/env bash
n=1
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks=*) n="${1#*=}"; shift ;;
    -n) n="$2"; shift 2 ;;
    -ppn) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
pids=""
for rank in $(seq 0 $((n - 1))); do
  SLURM_PROCID=$rank SLURM_NODEID=$rank PMI_RANK=$rank "$@" &
  pids="$pids $!"
done
trap 'kill $pids 2>/dev/null; wait' TERM INT
wait
"""


def _env(tmp_path, **settings) -> dict:
    """The environment of a script: this Python's gpipe, dask and gpipe commands, free ports, the stand-ins first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("srun", "mpiexec"):
        (bin_dir / name).write_text(FAKE_LAUNCHER)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPIPE_", "SLURM_", "PBS_")) and k not in ("WORKER", "NODES", "WORKFLOW")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
               PATH=os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable), os.environ["PATH"]]),
               GPIPE=f"{sys.executable} -m gpipe", PORT="0", DASHBOARD=":0", THREADS="1", GPUS="0", **settings)
    return env


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    pids.append(int(entry))
    return pids


def _wait_until_gone(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@contextlib.contextmanager
def _started(args, env, cwd, log):
    """``args`` started in a session of its own (stdout and stderr to ``log``); its whole group is stopped on exit."""
    with open(log, "w") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        if not _wait_until_gone(_group(proc.pid), 20):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _listening(pid: int) -> set:
    """The addresses that process ``pid`` and its children listen on."""
    process = psutil.Process(pid)
    return {c.laddr.ip for p in [process, *process.children(recursive=True)]
            for c in p.net_connections(kind="inet") if c.status == "LISTEN"}


@pytest.mark.slow  # a real cluster started by the script: run by CI all the same
def test_local_sh_cluster_listens_on_loopback_only_speaks_tls_and_runs_a_workflow_with_gpipe_run(tmp_path):
    run_dir, out = tmp_path / "cluster", tmp_path / "out"
    config = _write(tmp_path / "walks.yaml", "workflow: embeddings\ngraph: {path: 'rmat:7:4'}\n"
                    "walks: {algorithm: deepwalk, length: 5, walks_per_vertex: 1, params: {}, corpus: true}\n"
                    f"output: {out}\ncluster: {{device: cpu}}\n")
    env = _env(tmp_path, N_WORKERS="2", RUN_DIR=str(run_dir))
    del env["DASHBOARD"]  # local.sh's own default (the next free port where 8787 is taken)
    with _started(["bash", os.path.join(CLUSTER, "local.sh")], env, tmp_path, tmp_path / "local.log") as start:
        assert start.wait(timeout=60) == 0, (tmp_path / "local.log").read_text()
        pids = [int(p) for p in (run_dir / "pids").read_text().split()]
        assert len(pids) == 3 and all(_alive(p) for p in pids)  # the scheduler and two workers, left running
        with open(run_dir / "scheduler.json") as f:
            scheduler = json.load(f)["address"]
        assert scheduler.startswith("tls://127.0.0.1:")
        # its certificate, readable by this user only, beside the scheduler file; without it, no way in
        assert stat.S_IMODE(os.stat(run_dir / "scheduler.tls").st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in (run_dir / "scheduler.tls").iterdir()} == {0o600}
        with pytest.raises(gpipe.GpipeError, match="speaks TLS, and this process holds no certificate for it"):
            gpipe.connect(address=scheduler)

        run = subprocess.run([sys.executable, "-m", "gpipe", "run", config, "--scheduler-file",
                              str(run_dir / "scheduler.json"), "--wait-for-workers", "2", "--wait-timeout", "60"],
                             check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        assert "deepwalk on 128 vertices" in run.stdout and "2 worker(s) on cpu" in run.stdout
        # scheduler, dashboard, nannies, workers and their dashboards: none reachable from another machine
        assert set().union(*map(_listening, pids)) == {"127.0.0.1"}

        summary = read_summary(out)
        assert summary["status"] == "ok" and summary["cluster"]["scheduler"] == scheduler
        assert summary["config"]["cluster"]["scheduler_file"] == str(run_dir / "scheduler.json")
        assert summary["walk"]["workers"] == 2  # both workers walked
        with open(out / "corpus.txt") as f:
            assert sum(1 for _ in f) == 128

        for pid in pids:  # as cluster/local.sh says: kill $(cat "$RUN_DIR"/pids)
            os.kill(pid, signal.SIGTERM)
        assert _wait_until_gone(pids, 30), [p for p in pids if _alive(p)]


@pytest.mark.slow  # a real cluster started by the script: run by CI all the same
@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_batch_script_starts_a_worker_per_node_runs_the_workflow_and_stops_them(tmp_path, kind):
    out = tmp_path / "out"
    run_py = os.path.join(REPO, "workflows", "graph_sampling", "run.py")
    # SLURM names the workflow; PBS gives the path of its run.py, as a copied and adapted workflow would
    workflow = "graph_sampling" if kind == "slurm" else run_py
    config = _write(tmp_path / "sample.yaml", f"workflow: {workflow}\ngraph: {{path: 'rmat:7:4'}}\n"
                    "sampler: {seed: 3, params: {fanouts: 2, depth: 2}}\nseeds: {random: 4}\ncluster: {device: cpu}\n")
    if kind == "slurm":
        script = os.path.join(CLUSTER, "slurm", "gpipe.sbatch")
        env = _env(tmp_path, SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2",
                   SLURM_JOB_NODELIST="node[1-2]", SLURM_SUBMIT_DIR=str(tmp_path), TIMEOUT="90")
        run_dir, args = tmp_path / "gpipe-4242", ["bash", script, config, "--set", f"output={out}"]
    else:
        script = os.path.join(CLUSTER, "pbs", "gpipe.pbs")
        env = _env(tmp_path, PBS_JOBID="77.pbs", PBS_O_WORKDIR=str(tmp_path),
                   PBS_NODEFILE=_write(tmp_path / "nodes", "node1\nnode1\nnode2\nnode2\n"), WORKFLOW=config,
                   TIMEOUT="90")
        run_dir, args = tmp_path / "gpipe-77.pbs", ["bash", script, config, "--set", f"output={out}"]

    with _started(args, env, tmp_path, tmp_path / "job.log") as job:
        code = job.wait(timeout=240)
        log = (tmp_path / "job.log").read_text()
        assert code == 0, log + "".join(p.read_text() for p in run_dir.glob("*.log"))
        assert _wait_until_gone(_group(job.pid), 30), "the job left processes running"

    assert "graph_sampling: neighbor on 128 vertices" in log
    summary = read_summary(out)
    assert summary["status"] == "ok" and len(summary["seeds"]) == 4
    assert summary["cluster"]["scheduler"].startswith("tls://")  # the job's certificate, found by gpipe run
    assert summary["config"]["cluster"]["scheduler_file"] == str(run_dir / "scheduler.json")
    assert summary["sample"]["workers"] == 2  # one worker per node
    edges = pd.read_parquet(out / "edges.parquet")
    assert len(edges) == summary["sample"]["edges"] > 0
    worker_log = (run_dir / "workers.log").read_text()
    assert worker_log.count("Registered to:") == 2  # each node's task started one worker


@pytest.mark.parametrize("text, expected", [
    (None, ["gpipe: error: the workflow file", "does not exist"]),
    ("graph: {path: 'rmat:6'}\n",
     ["gpipe: error: ", "wf.yaml: missing key 'workflow'", "dynamic_walks, embeddings, gnn_training, graph_sampling"]),
    ("workflow: walks\n", ["gpipe: error: ", "wf.yaml: 'workflow' must be a shipped workflow", "got 'walks'"]),
    ("workflow: nowhere/run.py\n", ["gpipe: error: ", "wf.yaml: 'workflow' names", "nowhere/run.py", "not exist"]),
    ("workflow: [embeddings\n", ["gpipe: error: ", "wf.yaml: not valid YAML"]),
    ("workflow: embeddings\nwalks: {lenght: 5}\n",
     ["embeddings: error: ", "wf.yaml: unknown key 'walks.lenght'", "'walks' takes algorithm, length"]),
    ("workflow: graph_sampling\nsampler: {algorithm: walk}\n",
     ["graph_sampling: error: ", "'sampler.algorithm'", "'walk'"]),
])
def test_gpipe_run_on_a_bad_workflow_file_exits_2_with_one_line_naming_the_file_and_key(tmp_path, capsys, text,
                                                                                       expected):
    path = tmp_path / "wf.yaml"
    if text is not None:
        path.write_text(text)
    code = main(["run", str(path), "--address", "tcp://127.0.0.1:1"])  # checked before connecting
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(part in err for part in expected), err


def test_gpipe_run_names_a_shipped_workflow_and_checks_its_flags(capsys):
    assert main(["run", "embeddings", "--set", "walks.length=0", "--address", "tcp://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == "embeddings: error: 'walks.length' must be a positive integer, got 0\n"
    assert main(["run", "nope"]) == 2
    assert "'workflow' must be a workflow YAML file or the name of a shipped workflow (dynamic_walks, embeddings, " \
           "gnn_training, graph_sampling, mining, walk, sample, mine, count), got 'nope'" in capsys.readouterr().err
    assert main(["run", "embeddings", "--scheduler-file", "s.json", "--address", "tcp://127.0.0.1:1"]) == 2
    assert "give 'scheduler_file' or 'address', not both" in capsys.readouterr().err
    assert main(["run", "embeddings", "--wait-for-workers", "0"]) == 2
    assert "'--wait-for-workers' must be a positive integer, got 0" in capsys.readouterr().err


def test_gpipe_run_gives_up_on_a_scheduler_file_that_never_appears(tmp_path, capsys):
    missing = tmp_path / "scheduler.json"
    code = main(["run", "graph_sampling", "--scheduler-file", str(missing), "--wait-timeout", "0.5",
                 "--set", f"output={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("graph_sampling: error: the scheduler file") and str(missing) in err
    assert "did not appear within 0.5 s" in err


@pytest.mark.skipif(importlib.util.find_spec("dask_mpi") is not None, reason="dask-mpi is installed here")
def test_mpi_launch_without_dask_mpi_says_what_to_install(tmp_path):
    env = _env(tmp_path, PYTHON=sys.executable, MPIRUN="false")  # never reached
    for args in (["bash", os.path.join(CLUSTER, "mpi", "gpipe-mpi.sh"), "wf.yaml"],
                 [sys.executable, os.path.join(CLUSTER, "mpi", "launch.py"), "wf.yaml"]):
        run = subprocess.run(args, check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "dask-mpi is not installed" in run.stderr, run.stderr
        assert "pip install dask-mpi mpi4py" in run.stderr and run.stderr.count("\n") == 1


@pytest.mark.skipif(importlib.util.find_spec("dask_mpi") is None or shutil.which("mpirun") is None,
                    reason="needs dask-mpi, mpi4py and mpirun")
def test_mpi_launch_runs_the_workflow_on_mpi_ranks(tmp_path):
    out = tmp_path / "out"
    config = _write(tmp_path / "sample.yaml", "workflow: graph_sampling\ngraph: {path: 'rmat:7:4'}\n"
                    f"seeds: [0, 5]\noutput: {out}\ncluster: {{device: cpu}}\n")
    env = _env(tmp_path, NPROCS="4", PYTHON=sys.executable, MPIRUN=shutil.which("mpirun"))
    with _started(["bash", os.path.join(CLUSTER, "mpi", "gpipe-mpi.sh"), config], env, tmp_path,
                  tmp_path / "mpi.log") as job:
        assert job.wait(timeout=180) == 0, (tmp_path / "mpi.log").read_text()
    summary = read_summary(out)
    assert summary["status"] == "ok" and summary["seeds"] == [0, 5]
    assert summary["sample"]["workers"] == 2 and summary["config"]["cluster"]["address"].startswith("tcp://")
