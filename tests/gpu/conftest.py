"""The GPU clusters of the GPU tests (each module skips first where no GPU is usable)."""

import pytest

import gpipe


@pytest.fixture(scope="session")
def gpu_cluster():
    """A LocalCluster of one GPU worker process."""
    with gpipe.connect(n_workers=1, device="gpu", dashboard_address=":0") as client:
        yield client


@pytest.fixture(scope="module")
def shared_gpu_cluster():
    """Two GPU worker processes on one host, both on its first GPU (NCCL cannot join them: the comms carry the
    exchange)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        gpipe.attach(client, device="gpu")
        yield client
