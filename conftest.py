"""Fixtures shared by the tests (``tests/``) and the docstring examples (``gpipe/``): real Dask clusters of
worker processes, never mocks."""

import gc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.cluster import ENV_ADDRESS

_PACKAGE = Path(__file__).resolve().parent / "gpipe"  # the examples: its modules' docstrings

# What the tests' process has imported (gpipe and its dependencies, 340,000 objects) lives as long as the session:
# left out of every collection, the tests' gc.collect() (what a failed call's traceback held, let go) scans only
# what the tests made since, as a worker's does (gpipe's store freezes what a worker holds at its setup)
gc.freeze()


def _local(n_workers: int, device: str):
    return gpipe.connect(n_workers=n_workers, threads_per_worker=1, device=device, dashboard_address=":0")


@pytest.fixture(scope="session")
def cpu_cluster():
    """A LocalCluster of two worker processes, CPU device."""
    with _local(2, "cpu") as client:
        yield client


@pytest.fixture(scope="session")
def one_worker_cluster():
    with _local(1, "cpu") as client:
        yield client


@pytest.fixture
def killable_cluster():
    """A cluster of two worker processes of its own, for a test that kills one."""
    with _local(2, "cpu") as client:
        yield client


@pytest.fixture(autouse=True)
def _doctest_cluster(request, monkeypatch, doctest_namespace):
    """A docstring example runs as written, on the one-worker cluster.

    Its ``gpipe.connect(n_workers=1, device="cpu")`` finds that cluster in ``GPIPE_SCHEDULER_ADDRESS``, as a
    batch job's script does (connect's documented order), instead of starting a cluster of its own: the same
    results, seconds sooner per example. ``gpipe``, ``np`` and ``pd`` are in every example's namespace.
    """
    if not request.node.path.resolve().is_relative_to(_PACKAGE):
        return
    doctest_namespace.update(gpipe=gpipe, np=np, pd=pd)
    monkeypatch.setenv(ENV_ADDRESS, request.getfixturevalue("one_worker_cluster").scheduler.address)
