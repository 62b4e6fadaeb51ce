"""word2vec's CUDA kernels against their CPU twins: the serialized mode's vectors equal up to float rounding, the
initial vectors bit for bit, a sharded table's blocks, and the fast mode's quality on planted communities, replicated
and sharded (run with -m gpu on a GPU host)."""

import numpy as np
import pytest

import gpipe
from gpipe.backend import gpu_problem
from gpipe.embeddings._kernels import INITIAL, guide_table, keep_table, negative_table, train_kernel

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402

from helpers import centroid_accuracy, planted_partition  # noqa: E402


def _launch(x, walks: np.ndarray, syn0: np.ndarray, syn1: np.ndarray, keep, cum, *, warps: int, dim: int,
            block: tuple = (1, 0, 0)) -> tuple:
    """One epoch of ``gp_word2vec`` over ``walks`` on the arrays of ``x`` (numpy: the twin; cupy: the kernel); the tables
    and the summed loss."""
    rows, width = walks.shape
    lengths = (walks >= 0).sum(axis=1)
    offset = np.cumsum(lengths) - lengths
    syn0, syn1 = x.asarray(syn0.copy()), x.asarray(syn1.copy())
    loss, terms = x.zeros(rows, x.float64), x.zeros(rows, x.int64)
    guide, shift = guide_table(cum)
    train_kernel(dim).launch(
        walks=x.asarray(walks), rows=rows, width=width, warps=warps, first_walk=0, offset=x.asarray(offset), done=0,
        total=int(lengths.sum()), epoch=0, syn0=syn0, syn1=syn1, dim=dim, keep=x.asarray(keep), cum=x.asarray(cum),
        vocab=syn0.shape[0], guide=x.asarray(guide), shift=shift, window=4, negative=7, key=12345, alpha=0.05,
        min_alpha=0.0001, shards=block[0], context_shard=block[1], center_shard=block[2],
        effective=x.empty((rows, width), x.int32), loss=loss, terms=terms)
    return (np.asarray(syn0.get() if x is cupy else syn0), np.asarray(syn1.get() if x is cupy else syn1),
            float(loss.sum()), int(terms.sum()))


@pytest.mark.parametrize("dim", [8, 45, 64, 100, 128])
@pytest.mark.parametrize("block", [(1, 0, 0), (3, 2, 1)])  # the whole table; a sharded table's block of shards 2, 1
def test_the_serialized_kernel_gives_the_twins_vectors(dim, block):
    rng = np.random.default_rng(dim)
    n, rows, width = 50, 40, 17
    walks = rng.integers(0, n, (rows, width)).astype(np.int32)
    for r in range(rows):  # walks of every length, padded after their end
        walks[r, rng.integers(1, width + 1):] = -1
    counts = np.bincount(walks[walks >= 0], minlength=n)
    retained = counts > 0
    shards, center_shard = block[0], block[2]  # the negatives: the centers' shard's
    keep = keep_table(counts, retained, 0.02)
    cum = negative_table(counts[center_shard::shards], retained[center_shard::shards])
    syn0 = ((rng.random((n, dim)) - 0.5) / dim).astype(np.float32)  # rows enough for any shard
    syn1 = np.zeros((n, dim), np.float32)
    twin = _launch(np, walks, syn0, syn1, keep, cum, warps=1, dim=dim, block=block)
    kernel = _launch(cupy, walks, syn0, syn1, keep, cum, warps=1, dim=dim, block=block)
    np.testing.assert_allclose(kernel[0], twin[0], atol=1e-5)
    np.testing.assert_allclose(kernel[1], twin[1], atol=1e-5)
    assert kernel[3] == twin[3]
    assert kernel[2] == pytest.approx(twin[2], rel=1e-4)


@pytest.mark.parametrize("first", [0, 1000])  # the whole table's first rows; a shard's (every third vertex)
def test_the_initial_vectors_are_the_twins_bit_for_bit(first):
    host, device = np.empty(77 * 45, np.float32), cupy.empty(77 * 45, cupy.float32)
    for syn0 in (host, device):
        INITIAL.launch(syn0=syn0, n=syn0.shape[0], dim=45, first=first, stride=3, key=987654321)
    np.testing.assert_array_equal(device.get(), host)


@pytest.mark.parametrize("table", ["replicated", "sharded"])
def test_the_fast_kernel_separates_planted_communities(gpu_cluster, table):
    edges, labels = planted_partition()
    with gpu_cluster.as_current():
        g = gpipe.from_edges(edges)
        walks = gpipe.walks.deepwalk(g, length=40, walks_per_vertex=5, seed=3)
        emb = gpipe.embeddings.word2vec(walks, dim=32, window=5, seed=1, table=table)
        vectors = emb.compute()
        near = emb.most_similar(0, k=5)
    assert centroid_accuracy(vectors, labels) > 0.9
    assert sum(labels[i] == labels[0] for i, _ in near) >= 4


def test_a_sharded_table_on_two_gpu_workers_separates_planted_communities(shared_gpu_cluster):
    """A shard of the tables on each of two GPU workers (sharing a GPU: the pairs and the shards of syn1 go between
    them as Dask data), trained by the CUDA kernels, as well as on the CPU."""
    import dask

    edges, labels = planted_partition()
    with shared_gpu_cluster.as_current():
        g = gpipe.from_edges(edges)
        with dask.config.set({"gpipe.walks.block-size": 600}):  # two blocks: one on each worker
            walks = gpipe.walks.deepwalk(g, length=40, walks_per_vertex=5, seed=3)
        emb = gpipe.embeddings.word2vec(walks, dim=32, window=5, seed=1, table="sharded")
        vectors = emb.compute()
        near = emb.most_similar(0, k=5)
    assert emb.stats["shards"] == 2 and emb.stats["workers"] == 2 and emb.stats["device"] == "gpu"
    assert centroid_accuracy(vectors, labels) > 0.9
    assert sum(labels[i] == labels[0] for i, _ in near) >= 4
