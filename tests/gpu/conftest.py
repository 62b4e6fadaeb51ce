"""The GPU cluster of the GPU tests (each module skips first where no GPU is usable)."""

import pytest

import gpipe


@pytest.fixture(scope="session")
def gpu_cluster():
    """A LocalCluster of one GPU worker process."""
    with gpipe.connect(n_workers=1, device="gpu", dashboard_address=":0") as client:
        yield client
