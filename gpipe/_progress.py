"""The progress a batch run (a workflow or a ``gpipe`` command) prints on stderr: phases with a spinner and byte
counts, walk supersteps, timings."""

from __future__ import annotations

import glob
import os
import sys
import threading
import time

from dask.utils import format_bytes


class _Stopwatch:
    """Seconds spent in each phase of a run, one lap per phase."""

    def __init__(self):
        self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last  # a phase resumed adds up
        self._last = now

    def total(self) -> float:
        return sum(self.seconds.values())


class _Phase:
    """A long phase of a command told on stderr: ``reading edges.el (1.2 GB) ...`` as it starts, its seconds
    ticking in place on a TTY (else a line every ``interval`` seconds), then what it did and how long it took.
    Silent with ``--quiet`` (or where a command has no such flag)."""

    tick = 1.0
    interval = 10.0

    def __init__(self, args, text: str):
        self._stream = sys.stderr if getattr(args, "quiet", True) is False else None
        self._text = text
        self._detail = "done"
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._started

    def done(self, detail: str) -> None:
        """What the phase did, said at its end."""
        self._detail = detail

    def __enter__(self) -> _Phase:
        self._started = time.perf_counter()
        if self._stream is not None:
            self._write(f"{self._text} ...", end=not self._stream.isatty())
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            outcome = self._detail if kind is None else "failed"
            self._write(f"{self._text}: {outcome} in {self.seconds:.1f} s", end=True)

    def _tick(self) -> None:
        tty, last = self._stream.isatty(), 0.0
        while not self._stop.wait(self.tick):
            if tty:
                self._write(f"{self._text} ... {self.seconds:.0f} s", end=False)
            elif self.seconds - last >= self.interval:
                last = self.seconds
                self._write(f"{self._text} ... {last:.0f} s", end=True)

    def _write(self, line: str, end: bool) -> None:
        tty = self._stream.isatty()
        self._stream.write(("\r\033[K" if tty else "") + line + ("\n" if end else ""))
        self._stream.flush()


def _bytes_at(path: str) -> int:
    """The bytes of the file at ``path``, or of every file under the folder (or glob) there."""
    paths = [path] if os.path.exists(path) else glob.glob(path)
    total = 0
    for p in paths:
        if os.path.isdir(p):
            total += sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(p) for f in files)
        elif os.path.isfile(p):
            total += os.path.getsize(p)
    return total


def _reading(path: str) -> str:
    """What a phase that reads ``path`` says: the path and its bytes."""
    return f"reading {path} ({format_bytes(_bytes_at(path))})"


def _graph_done(phase: _Phase, g) -> None:
    """Say what the graph ``g`` (a :class:`gpipe.Graph`) holds at the end of the phase that loaded it."""
    phase.done(f"{g.num_vertices:,} vertices, {g.num_edges:,} edges "
               f"({g.num_edges / max(phase.seconds, 1e-9):,.0f} edges/s)")


def _written(phase: _Phase, outputs: dict) -> None:
    size = sum(_bytes_at(path) for path in outputs.values())
    phase.done(f"{format_bytes(size)} ({format_bytes(int(size / max(phase.seconds, 1e-9)))}/s)")


class _Progress:
    """A walk's ``progress=`` callback: a bar redrawn in place on a TTY, else printed every 2 s and at the end."""

    width = 30
    interval = 2.0

    def __init__(self, stream):
        self._stream = stream
        self._tty = stream.isatty()
        self._printed = time.monotonic()

    def __call__(self, *, superstep: int, active: int, steps: int, total: int) -> None:
        done = (total - active) / total if total else 1.0
        filled = round(done * self.width)
        line = (f"walks [{'#' * filled}{'-' * (self.width - filled)}] {done:4.0%} "
                f"superstep {superstep} steps {steps:,}")
        now = time.monotonic()
        if self._tty:
            self._stream.write("\r" + line + ("\n" if active == 0 else ""))
        elif active == 0 or now - self._printed >= self.interval:
            self._stream.write(line + "\n")
            self._printed = now
        self._stream.flush()
