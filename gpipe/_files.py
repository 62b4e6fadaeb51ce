"""Outputs appear complete or not at all: written under a temporary name, then renamed.

A writer removes nothing but its own output. A file writer replaces the file it is
given (as pandas does) and refuses a folder there. A folder writer writes into a new
or empty folder; with ``overwrite`` it also replaces a folder that holds nothing but
files gpipe writes there, and refuses any other.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid

from ._validate import check_bool
from .errors import GpipeValueError

# The files gpipe writes in each kind of output folder, as paths relative to it ('/'-separated).
GRAPH_FILES = r"_gpipe\.json|ids\.parquet|part-\d{5}\.parquet"
WALK_FILES = r"walks-\d{12}\.parquet"
SAMPLE_FILES = r"(?:edges|nodes)-\d{6}\.parquet"
EMBEDDING_FILES = r"embeddings-\d{6}\.parquet"
SCORE_FILES = r"scores-\d{6}\.parquet"


def _temporary(path: str) -> str:
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:8]}")


def _foreign_file(folder: str, owned: re.Pattern) -> str | None:
    """The first file under ``folder`` (its relative path) that ``owned`` does not match, else None."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            relative = os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
            if not owned.fullmatch(relative):
                return relative
    return None


def check_folder_target(path: str, name: str, owned: re.Pattern, overwrite: bool) -> None:
    """Refuse to replace ``path`` unless it is absent, an empty folder, or (``overwrite``) gpipe's output only (a
    ``GpipeValueError`` naming ``name``): what :func:`atomic_dir` checks, for a caller to check before its work."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        raise GpipeValueError(f"'{name}' must be a folder to write into, got {path!r}: a file of that name exists")
    entries = sorted(os.listdir(path))
    if not entries:
        return
    if not overwrite:
        listed = ", ".join(map(repr, entries[:3])) + (", ..." if len(entries) > 3 else "")
        raise GpipeValueError(f"'{name}' must be a new or empty folder unless overwrite is set, got {path!r}: "
                              f"it holds {len(entries)} entries ({listed})")
    foreign = _foreign_file(path, owned)
    if foreign is not None:
        raise GpipeValueError(f"'{name}' must hold only gpipe's output to be overwritten, got {path!r}: "
                              f"{foreign!r} is not a file gpipe writes there")


@contextlib.contextmanager
def atomic_dir(path: str, *, owned: str, overwrite: bool = False, name: str = "path"):
    """Yield a temporary folder that replaces the folder ``path`` when the block succeeds.

    ``path`` is checked before the block, so that a refusal comes before the work, and again
    before the swap, which replaces exactly what was checked. A block that raises (an
    interrupt too) leaves ``path`` as it was and removes the temporary folder.

    Parameters
    ----------
    path : str
        The folder to write: new, empty, or (``overwrite``) holding only files that ``owned`` matches.
    owned : str
        A regular expression that matches the path, relative to the folder and '/'-separated, of every
        file written there (``summary\\.json|edges\\.parquet``).
    overwrite : bool
        Replace a folder of earlier output (only files that ``owned`` matches).
    name : str
        The parameter or config key that gave ``path``, named in the errors.

    Yields
    ------
    str
        The temporary folder, next to ``path``.

    Raises
    ------
    GpipeValueError
        ``path`` may not be replaced (a file, a folder that is not empty without ``overwrite``, or one
        holding a file ``owned`` does not match), or no folder can be created there.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import atomic_dir
    >>> out = os.path.join(tempfile.mkdtemp(), "results")
    >>> with atomic_dir(out, owned=r"notes\\.txt") as folder:
    ...     _ = open(os.path.join(folder, "notes.txt"), "w").write("complete or absent\\n")
    ...     os.path.exists(out)
    False
    >>> os.listdir(out)
    ['notes.txt']
    """
    path = os.path.abspath(path)
    owned_files = re.compile(owned)
    check_bool("overwrite", overwrite)
    check_folder_target(path, name, owned_files, overwrite)
    tmp = _temporary(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.makedirs(tmp)
    except OSError as exc:
        culprit = "" if exc.filename == tmp else f" ({exc.filename})"
        message = f"'{name}' must be a folder gpipe can create, got {path!r}: {exc.strerror}{culprit}"
        raise GpipeValueError(message) from None
    try:
        yield tmp
        check_folder_target(path, name, owned_files, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if os.path.lexists(path):
        old = _temporary(path)
        os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:  # the earlier output goes back where it was, under its own name
        if old is not None:
            os.rename(old, path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w"):
    """Yield an open temporary file that replaces the file ``path`` when the block succeeds.

    Parameters
    ----------
    path : str
        The file to write; its folder is created if need be.
    mode : str
        The mode the temporary file is opened in (``"w"``, ``"wb"``).

    Yields
    ------
    file
        The open temporary file (a writer that opens files by name uses its ``name``).

    Raises
    ------
    GpipeValueError
        ``path`` is a folder.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import atomic_file
    >>> path = os.path.join(tempfile.mkdtemp(), "out", "notes.txt")
    >>> with atomic_file(path) as f:
    ...     _ = f.write("complete or absent\\n")
    >>> open(path).read()
    'complete or absent\\n'
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise GpipeValueError(f"'path' must be a file path, got {path!r}: a folder of that name exists")
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
    """Write ``obj`` as indented JSON to ``path`` with :func:`atomic_file` (values JSON lacks as ``str``).

    Parameters
    ----------
    path : str
        The file to write.
    obj : object
        What to write: dicts, lists, strings, numbers; anything else is written as its ``str``.

    Returns
    -------
    str
        ``path``.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from gpipe.workflow import write_json
    >>> path = write_json(os.path.join(tempfile.mkdtemp(), "summary.json"), {"status": "ok"})
    >>> json.load(open(path))
    {'status': 'ok'}
    """
    with atomic_file(path) as f:
        json.dump(obj, f, indent=2, default=str)
        f.write("\n")
    return path
