"""Data in and out (issue 15): read + build, walk exports and sampling per input format, beside single-process baselines.

    python benchmarks/io.py --device gpu --scale 20 --out io_rmat20_h200.json
    python benchmarks/io.py --device gpu --scale 22 --out io_rmat22_h200.json
    python benchmarks/io.py --device cpu --scale 12 --out /tmp/io_rmat12_cpu.json

(the two H200 runs: one H200, 16 cores; ``--tmp`` on the host's local disk,
~6 GB free for R-MAT 22). The graph is Graph500's R-MAT (``gpipe.generators.rmat``,
weighted, seeded) generated once on the cluster, brought to this process and
written once into a temp folder, each undirected edge once (``u < v``), as
every ``--formats``: ``el`` (SNAP text ``u v w``), ``el.gz`` (the same,
gzip), ``parquet`` (a folder of files of 4 M rows, columns ``src``, ``dst``,
``weight``) and ``npz`` (CSR as ``../shared/gpu/gen_rmat.py`` writes it:
``indptr`` int64, ``indices`` int32, ``weights`` float32, both directions
stored, rows sorted). After a warm-up of every stage on a tiny graph (the
kernels compile), per format, each stage timed once, from the call until it
returns:

* ``read + build``: ``gpipe.read_edges`` (undirected, weights read) to the
  graph ready, the file in the page cache (just written); edges/s counts the
  input's rows (for ``npz`` both directions): the process's first read of a
  file of that size (its buffers are new: on a VM, fresh pinned host memory
  costs more than the read). ``read + build, again``: the same read once
  more. ``read + build, cold``: the
  same after the file's pages are dropped from the page cache (``fsync``,
  then ``posix_fadvise(DONTNEED)``): read from the disk; its baseline, the
  disk's floor: the file's bytes alone read cold again, by as many threads as
  gpipe's reader, into memory touched before.
  Baselines: ``pandas.read_csv`` and ``pyarrow.csv.read_csv`` of the text
  file, ``pyarrow.parquet.read_table`` of the folder, ``np.load`` of the npz
  (its arrays read), each in this process alone.
* ``walk``: ``gpipe.walks.deepwalk``, 1 walk per vertex, length 80 (steps/s);
  then ``compute`` (the walk matrix in this process; on a GPU also ``compute
  device``, on this process's GPU), ``to_corpus`` (ids/s:
  ids written, padding excluded) and ``to_parquet``, each on the same walk
  (the first of them assembles its blocks). Baselines: the same matrix written
  as a corpus by a few lines of numpy (digits by vectorized division, written
  in chunks of rows), and by ``pyarrow.parquet.write_table``.
* ``neighbor ready`` / ``neighbor compute``: ``gpipe.sampling.neighbor`` of
  ``--seeds`` random vertices with out-edges (fanout 8, depth 3) from the call
  to its lazy result (the best of 3 calls after one that compiles its
  kernels), then its ``compute()`` (and on a GPU ``compute(device=True)``,
  ``neighbor compute device``); ``supersteps_seconds`` is that call's own
  ``stats['seconds']`` (the acceptance: ready <= 2x it).

The JSON (``"benchmark": "io"``) holds a record per format with its stages,
each with its seconds, throughput and baselines; the figure (``figures.py``)
draws seconds per stage, gpipe beside the baselines.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import gpipe
from _common import environment, write_json
from gpipe.graph._readers._bytes import _READ_THREADS, read_into
from figures import draw

FORMATS = ("el", "el.gz", "parquet", "npz")
PARQUET_ROWS = 1 << 22


def _edges(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The graph's undirected edges once each (``src < dst``) and their weights, in this process."""
    folder = tempfile.mkdtemp(prefix="gpipe-io-graph-")
    try:
        g.to_parquet(os.path.join(folder, "g"))
        table = pq.read_table(os.path.join(folder, "g"), columns=["src", "dst", "weight"])
    finally:
        shutil.rmtree(folder)
    src, dst = table["src"].to_numpy(), table["dst"].to_numpy()
    keep = src < dst
    return src[keep], dst[keep], table["weight"].to_numpy()[keep].astype(np.float32)


def write_inputs(src, dst, weight, folder: str, formats) -> dict[str, str]:
    """Write the edges once per format into ``folder``; the paths by format."""
    paths = {}
    table = pa.table({"src": src, "dst": dst, "weight": weight})
    text = os.path.join(folder, "rmat.el")
    if "el" in formats or "el.gz" in formats:
        pacsv.write_csv(table, text, pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
        paths["el"] = text
    if "el.gz" in formats:
        paths["el.gz"] = text + ".gz"
        with open(text, "rb") as raw, gzip.open(paths["el.gz"], "wb", compresslevel=6) as out:
            shutil.copyfileobj(raw, out, 1 << 24)
    if "parquet" in formats:
        paths["parquet"] = os.path.join(folder, "rmat.parquet")
        os.mkdir(paths["parquet"])
        for i, lo in enumerate(range(0, len(table), PARQUET_ROWS)):
            pq.write_table(table.slice(lo, PARQUET_ROWS), os.path.join(paths["parquet"], f"edges-{i:05d}.parquet"))
    if "npz" in formats:
        paths["npz"] = os.path.join(folder, "rmat.npz")
        n = int(max(src.max(), dst.max())) + 1 if len(src) else 0
        rows, cols, w = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([weight, weight])
        order = np.lexsort((cols, rows))
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        np.savez(paths["npz"], indptr=indptr, indices=cols[order].astype(np.int32), weights=w[order])
    if "el" not in formats and "el" in paths:
        paths.pop("el")
    return paths


def _evict(path: str) -> str:
    """Drop ``path``'s pages (a folder's files') from the page cache, so that the next read comes from the disk:
    written back first, then let go (``posix_fadvise(DONTNEED)``, which needs no privileges); what was done."""
    names = [os.path.join(path, f) for f in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    for name in names:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "dropped: fsync, then posix_fadvise(POSIX_FADV_DONTNEED) of every file"


def _cold_bytes(path: str, rows: int) -> dict:
    """The disk's floor for a cold read: the bytes of ``path`` (a folder's files) alone, their pages dropped, read
    as gpipe's reader reads them (``read_into``: its threads, ``os.preadv``) into memory touched before (its fresh
    pages' cost is the host's, not the disk's)."""
    names = [os.path.join(path, f) for f in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    seconds = 0.0
    for name in names:
        into = np.ones(os.path.getsize(name), np.uint8)
        _evict(name)
        t0 = time.perf_counter()
        read_into(into, name, 0)
        seconds += time.perf_counter() - t0
    return {"baseline": f"the file's bytes alone, cold ({_READ_THREADS} threads, os.preadv)", "seconds": seconds,
            "rate": rows / seconds, "unit": "edges/s", "bytes_per_second": _size(path) / seconds}


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return os.path.getsize(path)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _read_baselines(fmt: str, path: str) -> list[dict]:
    """Single-process reads of the same file, and their rows."""
    runs = []
    if fmt in ("el", "el.gz"):
        runs.append(("pandas.read_csv", lambda: len(pd.read_csv(path, sep=" ", header=None,
                                                                names=["src", "dst", "weight"]))))
        runs.append(("pyarrow.csv.read_csv", lambda: pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(column_names=["src", "dst", "weight"]),
            parse_options=pacsv.ParseOptions(delimiter=" ")).num_rows))
    elif fmt == "parquet":
        runs.append(("pyarrow.parquet.read_table", lambda: pq.read_table(path).num_rows))
    else:
        def load():
            with np.load(path) as z:
                return len({k: z[k] for k in z.files}["indices"])

        runs.append(("np.load", load))
    out = []
    for name, fn in runs:
        seconds, rows = _timed(fn)
        out.append({"baseline": name, "seconds": seconds, "rate": rows / seconds, "unit": "edges/s"})
    return out


def numpy_corpus(walks: np.ndarray, path: str, chunk_rows: int = 1 << 16) -> int:
    """Write the walk matrix (int64, padded with -1 after a walk's end) as text, one walk per line: digits by
    vectorized division into a byte buffer per chunk of rows. Returns the ids written."""
    written = 0
    powers = 10 ** np.arange(19, dtype=np.int64)
    with open(path, "wb") as f:
        for lo in range(0, len(walks), chunk_rows):
            block = walks[lo:lo + chunk_rows]
            valid = block >= 0
            ids = block[valid]  # row-major: each walk's ids in order
            digits = np.searchsorted(powers, ids, side="right").clip(1)  # decimal digits of each id
            ends = np.cumsum(digits + 1)  # each token's end, its separator included
            out = np.empty(ends[-1] if len(ends) else 0, np.uint8)
            starts = ends - digits - 1
            for k in range(int(digits.max()) if len(digits) else 0):
                has = digits > k
                out[starts[has] + digits[has] - 1 - k] = 48 + (ids[has] // powers[k]) % 10
            last = np.zeros(valid.shape, bool)  # a walk's last id ends its line
            last[np.arange(len(block)), valid.sum(axis=1) - 1] = True
            out[ends - 1] = np.where(last[valid], 10, 32)
            f.write(out.data)
            written += len(ids)
    return written


def _arrow_parquet(walks: np.ndarray, path: str) -> None:
    columns = {"walk": np.arange(len(walks), dtype=np.int64),
               **{f"step_{i}": np.ascontiguousarray(walks[:, i]) for i in range(walks.shape[1])}}
    pq.write_table(pa.table(columns), path)


def _stage(name: str, seconds: float, amount: float | None = None, unit: str | None = None,
           baselines: list | None = None, **extra) -> dict:
    record = {"stage": name, "seconds": seconds, **extra, "baselines": baselines or []}
    if amount is not None:
        record.update(amount=amount, rate=amount / seconds if seconds else 0.0, unit=unit)
    return record


def run_format(fmt: str, path: str, rows: int, args, folder: str, quiet: bool = False) -> dict:
    """Every stage on ``path``'s graph; a record."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    weight = {"el": None, "el.gz": None, "parquet": "weight", "npz": True}[fmt]
    stages = []
    seconds, g = _timed(lambda: gpipe.read_edges(path, weight=weight))
    base = [] if quiet else _read_baselines(fmt, path)
    stages.append(_stage("read + build", seconds, rows, "edges/s", base, num_vertices=g.num_vertices,
                         num_edges=g.num_edges, mode=g.mode))
    g.release()
    again, g = _timed(lambda: gpipe.read_edges(path, weight=weight))
    stages.append(_stage("read + build, again", again, rows, "edges/s"))
    g.release()
    dropped = _evict(path)
    cold, g = _timed(lambda: gpipe.read_edges(path, weight=weight))
    floor = [] if quiet else [_cold_bytes(path, rows)]
    stages.append(_stage("read + build, cold", cold, rows, "edges/s", floor, page_cache=dropped))
    say(f"{fmt}: read + build {seconds:.3f} s ({rows / seconds / 1e6:.3g} M edges/s), again {again:.3f} s, cold "
        f"{cold:.3f} s ({rows / cold / 1e6:.3g} M edges/s); " + "; ".join(f"{b['baseline']} {b['seconds']:.3f} s"
                                                                        for b in base))

    seconds, w = _timed(lambda: gpipe.walks.deepwalk(g, length=args.length, walks_per_vertex=1, seed=args.seed))
    stages.append(_stage("walk", seconds, w.stats["steps"], "steps/s", walk_seconds=w.stats["seconds"]))
    seconds, walks = _timed(w.compute)
    ids = int((walks >= 0).sum()) if walks.dtype != object else int((walks != None).sum())  # noqa: E711
    stages.append(_stage("compute", seconds, ids, "ids/s", assemble_seconds=w.stats.get("assemble_seconds"),
                         dtype=str(walks.dtype)))
    if g.device == "gpu":  # the walks on this process's GPU, written there by the workers
        seconds, _ = _timed(lambda: w.compute(device=True))
        stages.append(_stage("compute device", seconds, ids, "ids/s"))
    corpus = os.path.join(folder, f"corpus-{fmt}.txt")
    seconds, _ = _timed(lambda: w.to_corpus(corpus))
    corpus_bytes = os.path.getsize(corpus)
    base = []
    if not quiet:
        mine = corpus + ".numpy"
        t, written = _timed(lambda: numpy_corpus(walks, mine))
        same = corpus_bytes == os.path.getsize(mine) and _same_file(corpus, mine)
        base.append({"baseline": "numpy (vectorized digits)", "seconds": t, "rate": written / t, "unit": "ids/s",
                     "same_bytes": same})
        os.remove(mine)
    stages.append(_stage("to_corpus", seconds, ids, "ids/s", base, bytes=corpus_bytes))
    os.remove(corpus)
    timed = {stage["stage"]: stage["seconds"] for stage in stages}
    say(f"{fmt}: walk {timed['walk']:.4f} s, compute {timed['compute']:.3f} s, to_corpus "
        f"{seconds:.3f} s ({ids / seconds / 1e6:.3g} M ids/s); " + "; ".join(f"{b['baseline']} {b['seconds']:.3f} s"
                                                                           for b in base))
    out = os.path.join(folder, f"walks-{fmt}")
    seconds, _ = _timed(lambda: w.to_parquet(out))
    parquet_bytes = _size(out)
    shutil.rmtree(out)
    base = []
    if not quiet:
        t, _ = _timed(lambda: _arrow_parquet(walks, out + ".parquet"))
        base.append({"baseline": "pyarrow.parquet.write_table", "seconds": t, "rate": ids / t, "unit": "ids/s"})
        os.remove(out + ".parquet")
    stages.append(_stage("to_parquet", seconds, ids, "ids/s", base, bytes=parquet_bytes))
    say(f"{fmt}: to_parquet {seconds:.3f} s; " + "; ".join(f"{b['baseline']} {b['seconds']:.3f} s" for b in base))
    del walks, w

    degrees = g.degrees()
    seeds = np.random.default_rng(args.seed).choice(degrees.index.to_numpy()[degrees.to_numpy() > 0],
                                                    size=args.seeds)
    def neighbor():
        return gpipe.sampling.neighbor(g, seeds, fanouts=args.fanout, depth=args.depth, seed=args.seed)

    neighbor()  # compile its kernels (the first format's run) and look the seeds' ids up once
    seconds, sample = min((_timed(neighbor) for _ in range(3)), key=lambda timed: timed[0])
    supersteps = sample.stats["seconds"]
    stages.append(_stage("neighbor ready", seconds, sample.stats["edges"], "edges/s", supersteps_seconds=supersteps,
                         ready_over_supersteps=seconds / supersteps if supersteps else None,
                         supersteps=sample.stats.get("supersteps")))
    t, edges = _timed(sample.compute)
    stages.append(_stage("neighbor compute", t, len(edges), "edges/s"))
    if g.device == "gpu":
        stages.append(_stage("neighbor compute device", _timed(lambda: sample.compute(device=True))[0], len(edges),
                             "edges/s"))
    say(f"{fmt}: neighbor({args.seeds:,} seeds, fanout {args.fanout}, depth {args.depth}) ready {seconds:.3f} s "
        f"(supersteps {supersteps:.3f} s, {seconds / supersteps if supersteps else float('nan'):.2f}x), "
        f"compute {t:.3f} s, {len(edges):,} edges")
    g.release()
    return {"format": fmt, "file": os.path.basename(path), "bytes": _size(path), "rows": rows, "stages": stages}


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 24), fb.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


def _rows(fmt: str, src: np.ndarray) -> int:
    return 2 * len(src) if fmt == "npz" else len(src)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--seeds", type=int, default=16_000)
    ap.add_argument("--fanout", type=int, default=8)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--tmp", default=None, help="folder for the input files and outputs (default: the system's)")
    ap.add_argument("--out", default="io.json")
    args = ap.parse_args()

    folder = tempfile.mkdtemp(prefix="gpipe-io-", dir=args.tmp)
    try:
        with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
            t0 = time.perf_counter()
            g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, weighted=True)
            src, dst, weight = _edges(g)
            num_vertices, num_edges = g.num_vertices, g.num_edges
            g.release()
            generate_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            paths = write_inputs(src, dst, weight, folder, args.formats)
            write_s = time.perf_counter() - t0
            print(f"R-MAT {args.scale}: {len(src):,} undirected edges; generated {generate_s:.1f} s, files written "
                  f"{write_s:.1f} s: " + ", ".join(f"{f} {_size(p) / 1e6:.1f} MB" for f, p in paths.items()),
                  flush=True)
            warm = tempfile.mkdtemp(prefix="warm-", dir=folder)  # compile every stage's kernels on a tiny graph
            tiny = gpipe.generators.rmat(scale=8, edge_factor=8, seed=1, weighted=True)
            tiny_edges = _edges(tiny)
            tiny.release()
            warm_args = argparse.Namespace(**{**vars(args), "seeds": 64})
            for fmt, path in write_inputs(*tiny_edges, warm, args.formats).items():
                run_format(fmt, path, _rows(fmt, tiny_edges[0]), warm_args, warm, quiet=True)
            shutil.rmtree(warm)
            records = []
            report = {"benchmark": "io",
                      "graph": {"generator": "rmat", "scale": args.scale, "edge_factor": args.edge_factor,
                                "seed": args.seed, "weights": "uniform in (0, 1]", "num_vertices": num_vertices,
                                "num_edges": num_edges, "undirected_edges": len(src),
                                "generate_seconds": generate_s, "write_seconds": write_s},
                      "parameters": {"length": args.length, "walks_per_vertex": 1, "seeds": args.seeds,
                                     "fanout": args.fanout, "depth": args.depth},
                      **environment(client, args.device), "workers": len(client.nthreads()),
                      "records": records, "complete": False}
            for fmt in args.formats:  # saved after each format: a run stopped by a time limit keeps the others
                records.append(run_format(fmt, paths[fmt], _rows(fmt, src), args, folder))
                write_json(args.out, report)
            report["complete"] = True
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    write_json(args.out, report)
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
