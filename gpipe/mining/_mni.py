"""MNI support by existence checks (GraMi's): whether some embedding of a small labeled pattern maps a given
pattern vertex to a given data vertex, a search per (task, data vertex) on the workers (``kernels/fpm.cu`` and
its CPU twin).

A task is a pattern and one of its vertices (the root, place 0 of a matching
order grown from it), with a domain: the data vertices that may be the root's
image (its label's vertices, or those a smaller frequent pattern found valid
for the same vertex: an embedding of the larger pattern holds one of the
smaller). A round's items are its tasks' domains one after the other; each
worker checks a contiguous range of them and sends back a bit per item.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .._search import has_edge
from ..backend import cpu_kernel, prange, to_device, to_host
from ..kernels import Arg, Kernel
from ..runtime.calls import spread
from ._extend import whole_graph
from ._patterns import LABEL_BITS, MAX_EDGES, MAX_VERTICES, _COUNT_SHIFT, adjacent, label_of

# a task's int32 fields: its vertex count, then per place its label rank, pattern degree and mask of earlier
# neighbors (GP_MNI_FIELDS of kernels/fpm.cu)
FIELDS = 1 + 3 * MAX_VERTICES
_CHUNK = 1024  # items per chunk of the CPU twin's parallel loop (room for a search allocated once per chunk)


@cpu_kernel()
def _embeds(f, v, indptr, indices, label, m, pos, end, scan) -> bool:
    """Whether the task of fields ``f`` embeds with its place 0 at data vertex ``v`` (``m``, ``pos``, ``end``,
    ``scan``: room for the search). CUDA: ``gp_mni_embeds``, which says how."""
    nv = f[0]
    if label[v] != f[1] or indptr[v + 1] - indptr[v] < f[1 + MAX_VERTICES]:
        return False
    if nv == 1:
        return True
    m[0] = v
    _enter(1, f, m, indptr, scan, pos, end)
    k = 1
    while k > 0:
        found = False
        while not found and pos[k] < end[k]:
            c = np.int64(indices[pos[k]])
            pos[k] += 1
            if label[c] != f[1 + k] or indptr[c + 1] - indptr[c] < f[1 + MAX_VERTICES + k]:
                continue
            found = True
            for j in range(k):
                if not found:
                    break
                found = m[j] != c
                if found and j != scan[k] and (f[1 + 2 * MAX_VERTICES + k] >> j) & 1:
                    a, b = m[j], c  # search the shorter row
                    if indptr[a + 1] - indptr[a] > indptr[b + 1] - indptr[b]:
                        a, b = c, m[j]
                    found = has_edge(indices, indptr[a], indptr[a + 1] - indptr[a], b)
            if found:
                m[k] = c
        if not found:
            k -= 1
        else:
            k += 1
            if k == nv:
                return True
            _enter(k, f, m, indptr, scan, pos, end)
    return False


@cpu_kernel()
def _enter(k, f, m, indptr, scan, pos, end) -> None:
    """Place ``k`` entered: its candidates are the row of its earlier adjacent vertex of least degree."""
    s = -1
    for j in range(k):
        if (f[1 + 2 * MAX_VERTICES + k] >> j) & 1 and (
                s < 0 or indptr[m[j] + 1] - indptr[m[j]] < indptr[m[s] + 1] - indptr[m[s]]):
            s = j
    scan[k] = s
    pos[k] = indptr[m[s]]
    end[k] = indptr[m[s] + 1]


@cpu_kernel(parallel=True)
def _exists_cpu(n, first, tasks, start, task, offset, domain, indptr, indices, label, valid):
    for chunk in prange((n + _CHUNK - 1) // _CHUNK):
        m, pos = np.empty(MAX_VERTICES, np.int64), np.empty(MAX_VERTICES, np.int64)
        end, scan = np.empty(MAX_VERTICES, np.int64), np.empty(MAX_VERTICES, np.int64)
        for i in range(chunk * _CHUNK, min(n, (chunk + 1) * _CHUNK)):
            item = first + i
            t = np.searchsorted(start[:tasks], item, side="right") - 1
            v = np.int64(domain[offset[t] + item - start[t]])
            valid[i] = 1 if _embeds(task[t * FIELDS:(t + 1) * FIELDS], v, indptr, indices, label, m, pos, end,
                                    scan) else 0


EXISTS = Kernel(
    "fpm.cu", "gp_mni_exists", twin=_exists_cpu, items="n", queued=True,
    defines={"GP_FPM_MAX_EDGES": MAX_EDGES, "GP_FPM_LABEL_BITS": LABEL_BITS}, args=(
        Arg("n", "i64", note="items of this range"), Arg("first", "i64", note="the range's first item"),
        Arg("tasks", "i32"), Arg("start", "i64[]", note="each task's first item, ascending"),
        Arg("task", "i32[]", note=f"{FIELDS} fields a task"), Arg("offset", "i64[]", note="each task's domain"),
        Arg("domain", "IdT[]", note="the domains' data vertices"), Arg("indptr", "i64[]"),
        Arg("indices", "IdT[]", note="sorted per vertex, each neighbor once"),
        Arg("label", "i32[]", note="each vertex's label rank"),
        Arg("valid", "u8[n]", out=True, note="whether the item's pattern embeds with its root there")))


@cpu_kernel()
def _task_fields_cpu(codes, roots, fields):
    for t in range(codes.shape[0]):
        code, n = codes[t], codes[t] >> _COUNT_SHIFT
        order = np.empty(MAX_VERTICES, np.int64)
        placed = np.zeros(MAX_VERTICES, np.bool_)
        order[0] = roots[t]
        placed[roots[t]] = True
        for k in range(1, n):
            best, most = -1, -1
            for p in range(n):
                links = 0
                for j in range(k):
                    links += 0 if placed[p] else adjacent(code, p, order[j])
                if not placed[p] and links > most:
                    best, most = p, links
            order[k] = best
            placed[best] = True
        fields[t, 0] = n
        for k in range(n):
            p = order[k]
            fields[t, 1 + k] = label_of(code, p)
            for q in range(n):
                fields[t, 1 + MAX_VERTICES + k] += 1 if q != p and adjacent(code, p, q) else 0
            for j in range(k):
                fields[t, 1 + 2 * MAX_VERTICES + k] |= (1 << j) if adjacent(code, p, order[j]) else 0


def task_fields(codes: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """The fields of each task (a row each): the pattern of canonical code ``codes[t]`` searched from its position
    ``roots[t]``, in a matching order that takes next the unmatched vertex with most matched neighbors (then the
    lowest position)."""
    fields = np.zeros((codes.size, FIELDS), np.int32)
    _task_fields_cpu(np.ascontiguousarray(codes, dtype=np.int64), np.ascontiguousarray(roots, dtype=np.int64), fields)
    return fields


@dataclass(frozen=True)
class Round:
    """A round of checks: each task's fields (a row each), domain (``offset`` into ``domain``) and first item
    (``start``: a row per task and the total last); the label rank of every vertex."""

    graph_id: str
    task: np.ndarray  # int32 (tasks, FIELDS)
    start: np.ndarray  # int64 (tasks + 1,)
    offset: np.ndarray  # int64 (tasks,)
    domain: np.ndarray  # int32 or int64: the data vertices of the domains
    labels: np.ndarray  # int32: each vertex's label rank


def check(g, round_: Round) -> tuple[np.ndarray, float]:
    """Every item of ``round_`` checked on ``g``'s workers: whether its task's pattern embeds with its root at its
    data vertex (bool, an item each), and the seconds of the slowest worker."""
    total = int(round_.start[-1])
    replies = spread(g, "mining", _check_here, total, round_)
    valid = np.concatenate([np.empty(0, bool)] + [np.unpackbits(bits, count=n).view(bool) for bits, n, _ in replies])
    return valid, max((s for _, _, s in replies), default=0.0)


def _check_here(first: int, count: int, round_: Round) -> tuple[np.ndarray, int, float]:
    """On a worker: the items ``first .. first + count - 1`` of ``round_``, a bit each (packed), and the seconds."""
    started = time.perf_counter()
    graph, device, x = whole_graph(round_.graph_id)
    put = (lambda a, dtype=None: to_device(np.ascontiguousarray(a, dtype), device))
    valid = x.empty(count, x.uint8)
    EXISTS.launch(n=count, first=first, tasks=round_.task.shape[0], start=put(round_.start),
                  task=put(round_.task.reshape(-1)), offset=put(round_.offset),
                  domain=put(round_.domain, graph.indices.dtype), indptr=graph.indptr, indices=graph.indices,
                  label=put(round_.labels), valid=valid)
    return to_host(x.packbits(valid)), count, time.perf_counter() - started
