"""The ``gpipe`` command, for batch and HPC use.

``gpipe info`` reports the software stack, the GPUs and, when one is named, the
cluster; ``gpipe generate rmat`` writes a generated graph; ``gpipe walk ALGORITHM``
(``deepwalk``, ``node2vec``, ``metropolis-hastings``, ``jump``, ``ppr``) walks a
graph file, a graph folder or a generated ``rmat:SCALE[:EDGE_FACTOR]`` graph, and
with ``--updates LOG --rounds N`` (deepwalk, node2vec, jump, ppr) applies an update log to
it in N rounds (:class:`gpipe.dynamic.DynamicGraph`), walking after each;
``gpipe sample ALGORITHM`` (``neighbor``, ``snowball``, ``forest-fire``, ``layer``
from ``--seeds``; ``random-node``, ``random-edge``) writes the sampled edges into
the folder ``edges.parquet``, a file per range of instances written by the workers
(``random-node`` its vertices into ``nodes.parquet`` too);
``gpipe count estimate|exact`` counts the embeddings of a labeled query graph
in a labeled data graph (both in the ``t/v/e`` text format), estimated by
:func:`gpipe.counting.estimate` or exact by :func:`gpipe.counting.count_exact`;
``gpipe mine cliques|match|fpm`` counts (or lists) the k-cliques, the matches
of a small pattern or the frequent labeled patterns of a graph with
:mod:`gpipe.mining`, and prints a JSON summary (or writes it to ``--summary``;
listed embeddings go into the folder ``--embeddings``, a file per block written
by the workers);
``gpipe run WORKFLOW.yaml`` runs the workflow a YAML config names
(:mod:`gpipe.workflow`) on a cluster, as the batch scripts of ``cluster/`` do;
``gpipe demo`` runs DeepWalk on an R-MAT graph in one command.

Commands that do work connect with :func:`gpipe.connect` (``--scheduler-file``,
``--address``, the ``GPIPE_SCHEDULER_*`` variables, else a local cluster of
``--workers`` on ``--device``), print the Dask dashboard link and their progress
(reading, walking, writing) on stderr, and write their outputs and a ``summary.json`` (parameters, graph,
cluster, walk statistics, outputs, timings) to ``--out``. The folder appears as
a whole once the command succeeded, so ``summary.json`` in it means that run
succeeded: it is written under a temporary name and renamed at the end, and removed
when the command fails, is interrupted or gets SIGTERM. ``--out`` must be new or
empty, where a folder can be created; ``--overwrite`` replaces an earlier run's
folder, never one holding other files. Bad input exits with status 2 and a one-line
message naming the parameter, the rule and the value, before any work.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from ..errors import GpipeError
from ._parser import parsed


def main(argv: list[str] | None = None) -> int:
    """Run the ``gpipe`` command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 on bad input (usage errors included)
        or any other :class:`GpipeError`, whose message is printed to stderr
        on one line without a traceback; 130 (128 + SIGINT) when interrupted
        (Ctrl-C) and 143 (128 + SIGTERM) when terminated, after removing the
        unfinished outputs, with one line saying so.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            args = parsed(argv)
        except SystemExit as exc:  # argparse has printed the usage error or the help
            return int(exc.code or 0)  # argparse's status: 2 for a usage error, 0 for --help
        with _terminate_as_interrupt():
            return args.run(args)
    except (GpipeError, FileNotFoundError) as exc:
        print(f"gpipe: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the outputs' context managers have removed what was unfinished
        signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        how = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted (Ctrl-C)"
        print(f"gpipe: {how}; unfinished outputs were removed", file=sys.stderr)
        return 128 + signum


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt, so that the same cleanup runs."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated


@contextlib.contextmanager
def _terminate_as_interrupt():
    """Raise :class:`_Terminated` on SIGTERM inside the block (from the main thread, the only one signals reach)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
