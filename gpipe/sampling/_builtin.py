"""Built-in traversal samplers, each a Sampler defined by its bias, update rule and neighbor size."""

from __future__ import annotations

from .._validate import check_int, check_optional_int, check_probability
from ..runtime import EdgeSample
from ._sampler import Sampler


def neighbor(g, seeds, fanout: int = 2, depth: int = 2, weighted: bool = False, seed: int = 0) -> EdgeSample:
    """Neighbor sampling: every frontier vertex picks ``fanout`` out-neighbors without replacement.

    Uniformly, or in proportion to the edge weights when ``weighted``. As a Sampler::

        Sampler(edge_bias="weight" if weighted else "uniform", update="all", neighbor_size=fanout, depth=depth)

    Returns the sampled edges ``instance, depth, src, dst`` (one instance per seed, or per row of a 2-D ``seeds``).

    Examples
    --------
    >>> with gpipe.connect(n_workers=1, device="cpu"):   # doctest: +SKIP
    ...     gpipe.sampling.neighbor(gpipe.generators.rmat(10), seeds=[0, 1], fanout=2, depth=2).compute()
    """
    fanout = check_int("fanout", fanout, minimum=1)
    sampler = Sampler(edge_bias="weight" if weighted else "uniform", update="all", neighbor_size=fanout, depth=depth)
    return sampler.run(g, seeds, seed=seed)


def snowball(g, seeds, depth: int = 2, max_per_vertex: int | None = None, seed: int = 0) -> EdgeSample:
    """Snowball sampling: every frontier vertex adds its out-neighbors (at most ``max_per_vertex``,
    picked uniformly), and each vertex is expanded once per instance. As a Sampler::

        Sampler(edge_bias="uniform", update="unvisited", neighbor_size=max_per_vertex, depth=depth)
    """
    max_per_vertex = check_optional_int("max_per_vertex", max_per_vertex, minimum=1)
    sampler = Sampler(edge_bias="uniform", update="unvisited", neighbor_size=max_per_vertex, depth=depth)
    return sampler.run(g, seeds, seed=seed)


def forest_fire(g, seeds, p_forward: float = 0.7, depth: int = 2, seed: int = 0) -> EdgeSample:
    """Forest fire sampling (Leskovec & Faloutsos): every burning vertex burns a number of unburned
    out-neighbors drawn geometric with mean ``p_forward / (1 - p_forward)``. As a Sampler::

        Sampler(edge_bias="uniform", update="unvisited", neighbor_size=("geometric", p_forward), depth=depth)
    """
    p_forward = check_probability("p_forward", p_forward, open_high=True)
    sampler = Sampler(edge_bias="uniform", update="unvisited", neighbor_size=("geometric", p_forward), depth=depth)
    return sampler.run(g, seeds, seed=seed)
