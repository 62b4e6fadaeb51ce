"""node2vec step kernel: CUDA in ``kernels/walk_node2vec.cu``, CPU twin here (same random stream).

Exact second-order walks by rejection sampling: at v coming from t, a
candidate x is proposed in proportion to w(v, x) (or uniformly) and accepted
with probability bias(x) / max(1/p, 1, 1/q). When the decision needs to know
whether x is a neighbor of t and t lives in another partition, the walker
travels to t's partition as a query and comes back with the answer.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..kernels import function, id_type, launch_queued
from ..runtime import step_kernel
from ._common import has_edge, pick_edge

FIELDS = (("cur", "int64", "vertex"), ("prev", "int64", -1), ("cand", "int64", -1), ("trial", "int32", 0),
          ("answer", "int8", -1), ("state", "int8", 0))


@step_kernel
def advance_node2vec(x, part, walkers: dict, params: dict, out: dict) -> None:
    n = walkers["walk_id"].shape[0]
    weighted = bool(params["weighted"])
    cdf = part.cdf() if weighted else x.zeros(1, x.float64)
    scalars = (int(weighted), part.lo, part.hi, params["key"], params["length"], 1.0 / params["p"],
               1.0 / params["q"], n)
    arrays = (walkers["walk_id"], walkers["step"], walkers["cur"], walkers["prev"], walkers["cand"],
              walkers["trial"], walkers["answer"], walkers["state"], out["offset"], out["flat"], out["length"],
              out["vertex"], out["step"], out["cur"], out["prev"], out["cand"], out["trial"], out["answer"],
              out["state"], out["moved"])
    if x is np:
        _advance_cpu(part.indptr, part.indices, cdf, *scalars, *arrays)
    else:
        kernel = function("walk_node2vec.cu", "gp_walk_node2vec", template=id_type(part.indices.dtype))
        types = (np.int32, np.int64, np.int64, np.uint64, np.int32, np.float64, np.float64, np.int64)
        launch_queued(kernel, n, (part.indptr, part.indices, cdf, *(t(v) for t, v in zip(types, scalars)), *arrays))


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, cdf, weighted, lo, hi, key, length, inv_p, inv_q, n, walk_id, step, cur, prev,
                 cand, trial, answer, state, offset, flat, piece_len, out_vertex, out_step, out_cur, out_prev,
                 out_cand, out_trial, out_answer, out_state, moved):
    bound = max(inv_p, max(1.0, inv_q))
    sure = min(1.0, inv_q)
    never = max(1.0, inv_q)
    for i in prange(n):
        v = cur[i]
        t = prev[i]
        x = cand[i]
        route = v
        s = step[i]
        kk = trial[i]
        known = answer[i]
        st = 0
        left = 0
        o = offset[i]
        k = 0
        if state[i] == 1:  # a query: is x a neighbor of t (here)?
            flat[o + k] = v
            k += 1
            a = indptr[t - lo]
            known = 1 if has_edge(indices, a, indptr[t - lo + 1] - a, x) else 0
            left = 1
        else:
            while True:
                flat[o + k] = v
                k += 1
                if s >= length:
                    break
                a = indptr[v - lo]
                d = indptr[v - lo + 1] - a
                if d == 0:
                    break
                if t < 0:  # the first step is first-order
                    e = pick_edge(cdf, weighted, a, d, _rng.bits(key, walk_id[i], s, 0))
                else:
                    while True:
                        e = pick_edge(cdf, weighted, a, d, _rng.bits(key, walk_id[i], s, 2 * kk))
                        if e < 0:
                            break
                        x = np.int64(indices[e])
                        u = _rng.unit(_rng.bits(key, walk_id[i], s, 2 * kk + 1)) * bound
                        if x == t:
                            ok = u < inv_p
                        elif u < sure:
                            ok = True
                        elif u >= never:
                            ok = False
                        else:
                            if t >= lo and t < hi:
                                at = indptr[t - lo]
                                member = 1 if has_edge(indices, at, indptr[t - lo + 1] - at, x) else 0
                            elif known >= 0:
                                member = known
                            else:
                                st = 1  # ask t's partition
                                break
                            ok = u < (1.0 if member == 1 else inv_q)
                        known = -1
                        if ok:
                            break
                        kk += 1
                    if st == 1:
                        left = 1
                        route = t
                        break
                if e < 0:
                    break
                nx = np.int64(indices[e])
                t = v
                v = nx
                s += 1
                kk = 0
                known = -1
                if nx < lo or nx >= hi:
                    left = 1
                    route = nx
                    break
            if left == 0:
                route = v
        piece_len[i] = k
        out_vertex[i] = route
        out_step[i] = s
        out_cur[i] = v
        out_prev[i] = t
        out_cand[i] = x
        out_trial[i] = kk
        out_answer[i] = known
        out_state[i] = st
        moved[i] = left
