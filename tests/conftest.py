"""Fixtures of the tests; the clusters are in the repository's conftest.py, shared with the docstring examples."""

import time

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def cpu(cpu_cluster):
    """The two-worker CPU client, current for the test."""
    with cpu_cluster.as_current():
        yield cpu_cluster


@pytest.fixture
def small_edges() -> pd.DataFrame:
    """A small undirected graph with a skewed degree sequence, a pendant vertex and a triangle."""
    rng = np.random.default_rng(5)
    src = np.concatenate([np.zeros(12, int), rng.integers(1, 40, 80)])
    dst = np.concatenate([np.arange(1, 13), rng.integers(1, 40, 80)])
    return pd.DataFrame({"src": src, "dst": dst})


@pytest.fixture
def eventually():
    """``eventually(condition)``: poll ``condition`` for up to 5 s (for what the cluster does in the background)."""

    def wait(condition) -> bool:
        for _ in range(50):
            if condition():
                return True
            time.sleep(0.1)
        return condition()

    return wait
