"""Outputs appear complete or not at all: written under a temporary name, then renamed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid


def _temporary(path: str) -> str:
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:8]}")


@contextlib.contextmanager
def atomic_dir(path: str):
    """Yield a temporary folder that replaces ``path`` when the block succeeds."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _temporary(path)
    os.makedirs(tmp)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if os.path.exists(path):
        old = _temporary(path)
        os.rename(path, old)
    os.rename(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if os.path.isdir(old) else os.remove(old)


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w"):
    """Yield an open temporary file that replaces ``path`` when the block succeeds."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _temporary(path)
    try:
        with open(tmp, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_json(path: str, obj) -> str:
    with atomic_file(path) as f:
        json.dump(obj, f, indent=2, default=str)
        f.write("\n")
    return path
