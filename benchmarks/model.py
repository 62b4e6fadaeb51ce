"""A planning model of partitioned walks over P GPUs (issue 66, item 5): the call's seconds against the link
between the GPUs and their number, from the committed figures (``docs/planning.md`` says how to read it).

    python benchmarks/model.py --out benchmarks/results/model_partitioned.json

A DeepWalk-like run of ``S`` steps (``W`` walks of ``L`` steps) on one partition a GPU takes, on each GPU,

    K = S / (P * f * r)                 its kernels (r: the whole-graph kernel's steps/s on one GPU; f: the
                                        partitioned superstep kernel's fraction of it)
    X = S * c * b / (P * B)             its walkers on the link (c: crossings a step; b: bytes a crossing walker;
                                        B: the link's bytes/s out of one GPU)
    n * t                               the supersteps' barriers (n supersteps of t seconds each, empty)
    G = W * (L + 1) * i * (P - 1) / (P * B)         the rows as the run ends, up to 4 GPUs (each holds every
                                        walk's rows and sends each peer the cells of its blocks, written there or
                                        not: runtime/_advance.py's _keep_rows; i: bytes an id)
    G = W * (L + 1) * p * (P - 1) / (P * P * B)     beyond 4, the pieces written away from their block's GPU
                                        (p: bytes a vertex of them, about 10)

with the exchange of a chunk hidden behind the next chunk's kernel (``gpipe.exchange-chunks``, k chunks): a
superstep costs max(K, X) + min(K, X) / k of them. One GPU takes S / r. The figures each parameter comes from are
named in the JSON (``parameters``); a link without a measurement is taken at its nominal line rate, and its
barriers at the NVLink host's (no network run yet: the sockets run of item 5 is to calibrate both). ``calibration``
sets the model beside the measured 2- and 4-GPU runs (20-byte walkers then, no chunks), with their own kernel
seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from _common import write_json
from figures import draw

RESULTS = Path(__file__).resolve().parent / "results"
SCALING = {2: "scaling_partitioned_rmat24_2xh200_nccl.json", 4: "scaling_partitioned_rmat24_4xh200.json"}
KERNEL = "superstep_kernel_rmat23_h100.json"
BARRIER = "superstep_4xh200.json"
LOCALITY = "locality_cpu.json"
# bytes/s out of one GPU: NVLink between two H200s as NCCL moved a 1 GB grouped send/recv (../shared/gpu/README.md's
# probe), the others their nominal line rates
LINKS = {"NVLink (2 H200, measured)": 354e9, "InfiniBand NDR 400 Gb/s": 50e9, "InfiniBand HDR 200 Gb/s": 25e9,
         "100 GbE": 12.5e9, "25 GbE": 3.125e9}
CHUNKS = 4  # gpipe.exchange-chunks: auto's most
EVERY_ROW_RANKS = 4  # up to this many GPUs each holds every walk's rows (runtime/_advance.py)
PIECE_BYTES = 10  # what a vertex written as pieces sends (R-MAT 24: pieces of 1.3 vertices; _keep_rows' docstring)
GPUS = (2, 4, 8, 16)


def _load(name: str) -> dict:
    with open(RESULTS / name) as f:
        return json.load(f)


def _deepwalk(report: dict, gpus: int) -> dict:
    return next(r for r in report["records"] if r["workload"] == "deepwalk" and r["walks_per_vertex"] == 10
                and r["gpus"] == gpus)


def wire_bytes(walks: int, vertices: int, length: int) -> int:
    """A crossing DeepWalk walker's bytes: walk id, vertex and step in the bits their spans take, in whole 32-bit
    words (``gpipe.runtime._packing``)."""
    bits = sum(max(1, (n - 1).bit_length()) for n in (walks, vertices, length + 1))
    return 4 * math.ceil(bits / 32)


def seconds(p: int, *, steps: float, walks: int, length: int, rate: float, fraction: float, crossing: float,
            wire: float, link: float, supersteps: int, barrier: float, id_bytes: int = 4, chunks: int = CHUNKS) -> dict:
    """The model's seconds of a run on ``p`` GPUs, term by term (see the module's docstring)."""
    if p == 1:
        return {"kernel": steps / rate, "exchange": 0.0, "barriers": 0.0, "rows": 0.0, "seconds": steps / rate}
    kernel = steps / (p * fraction * rate)
    exchange = steps * crossing * wire / (p * link)
    cells = walks * (length + 1)
    rows = (cells * id_bytes * (p - 1) / p if p <= EVERY_ROW_RANKS else cells * PIECE_BYTES * (p - 1) / (p * p)) / link
    barriers = supersteps * barrier
    overlapped = max(kernel, exchange) + min(kernel, exchange) / chunks
    return {"kernel": kernel, "exchange": exchange, "barriers": barriers, "rows": rows,
            "seconds": overlapped + barriers + rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="model_partitioned.json")
    args = ap.parse_args()
    scaling = _load(SCALING[2])
    one = _deepwalk(scaling, 1)
    steps, length = one["steps"], one["length"]
    vertices = 1 << scaling["graph"]["scale"]
    walks = vertices * one["walks_per_vertex"]  # (those from vertices with no arc take no step, but have rows)
    rate = steps / one["kernel_seconds"]
    kernel = max((r for r in _load(KERNEL)["records"] if r["partitions"] > 1), key=lambda r: r["of_whole_graph_kernel"])
    barriers = {r["gpus"]: r["seconds"] for r in _load(BARRIER)["records"] if r["exchange"] == "nccl"}
    wire = wire_bytes(walks, vertices, length)
    fractions = {"measured": kernel["of_whole_graph_kernel"], "issue 66's bar": 0.8, "whole speed": 1.0}
    crossings = {"R-MAT (ids scrambled)": lambda p: (p - 1) / p}
    for r in _load(LOCALITY)["records"]:
        if not r["graph"].startswith("rmat"):
            by_p = {f["partitions"]: f["arcs"] for f in r["fractions"]}
            crossings[f"{r['graph']}, order {r['order']}"] = by_p.get
    records = []
    for graph, crossing in crossings.items():
        for p in GPUS:
            c = crossing(p)
            if c is None:
                continue
            for link_name, link in LINKS.items():
                for fraction_name, fraction in fractions.items():
                    t = seconds(p, steps=steps, walks=walks, length=length, rate=rate, fraction=fraction, crossing=c,
                                wire=wire, link=link, supersteps=length + 1, barrier=barriers[min(p, max(barriers))])
                    records.append({"crossings": graph, "gpus": p, "link": link_name, "link_bytes_per_second": link,
                                    "kernel_fraction": fraction_name, "crossing_fraction": c, **t,
                                    "speedup": (steps / rate) / t["seconds"]})
    calibration = []
    for p, name in SCALING.items():
        run = _deepwalk(_load(name), p)
        t = seconds(p, steps=steps, walks=walks, length=length, rate=rate, fraction=steps / (p * rate * run["kernel_seconds"]),
                    crossing=(p - 1) / p, wire=run["walker_bytes"] / (steps * (p - 1) / p), link=LINKS[next(iter(LINKS))],
                    supersteps=run["supersteps"], barrier=barriers[p], chunks=1)
        on_wire = run["exchange_seconds"] - run["supersteps"] * barriers[p]  # the exchange less its barriers
        calibration.append({"gpus": p, "source": name, "measured_seconds": run["seconds"],
                            "measured_kernel_seconds": run["kernel_seconds"],
                            "measured_exchange_seconds": run["exchange_seconds"], "model": t,
                            "effective_link_bytes_per_second": run["walker_bytes"] / (p * on_wire)})
    report = {"benchmark": "model", "device": "gpu", "device_name": scaling["device_name"],
              "parameters": {"steps": steps, "walks": walks, "length": length, "vertices": vertices,
                             "whole_steps_per_second": rate, "source_whole": SCALING[2],
                             "kernel_fractions": fractions, "source_fraction": KERNEL,
                             "wire_bytes": wire, "barrier_seconds": barriers, "source_barriers": BARRIER,
                             "supersteps": length + 1, "chunks": CHUNKS, "links": LINKS,
                             "source_crossings": LOCALITY},
              "records": records, "calibration": calibration}
    write_json(args.out, report)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    for c in calibration:
        print(f"{c['gpus']} GPUs: measured {c['measured_seconds']:.3f} s, model {c['model']['seconds']:.3f} s; the "
              f"exchange moved {c['effective_link_bytes_per_second'] / 1e9:.0f} GB/s a GPU")
    for r in records:
        if r["crossings"].startswith("R-MAT") and r["kernel_fraction"] == "measured":
            print(f"{r['gpus']:>2} GPUs over {r['link']}: {r['seconds']:.3f} s, {r['speedup']:.2f}x one GPU")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))


if __name__ == "__main__":
    main()
