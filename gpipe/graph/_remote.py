"""Edge inputs at a URL that fsspec opens (``s3://``, ``gs://``, ``https://``, ``memory://``, ...): copied to each host
that reads them, read there by the local readers, the copies removed once the graph is built."""

from __future__ import annotations

import contextlib
import glob
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Iterator

from ..errors import GpipeFileError, GpipeValueError
from ..runtime.calls import submit


def is_url(path) -> bool:
    """Whether ``path`` is a URL for fsspec (``protocol://...``, or a chain such as ``simplecache::s3://...``)."""
    return isinstance(path, str) and ("://" in path or "::" in path)


@contextlib.contextmanager
def local_copy(session, url: str) -> Iterator[str]:
    """The local path of ``url`` (a file, a folder, or a glob of files) copied into a fresh folder of this host's
    temporary folder and of every worker's host (a host that has it already, such as a local cluster's, copies
    nothing), removed from them all on the way out. A ``file://`` URL is its local path, not copied. An error that
    names the copy names ``url`` instead."""
    import fsspec  # a dependency of dask's

    fs, root = fsspec.core.url_to_fs(url)
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        yield root
        return
    files = _files(fs, root, url)
    parts = root.split("/")
    cut = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    base = "/".join(parts[:cut])  # the folder the input is in: the copy keeps the names below it
    folder = os.path.join(tempfile.gettempdir(), f"gpipe-remote-{uuid.uuid4().hex}")
    local = os.path.join(folder, posixpath.relpath(root, base or "."))
    client, workers = session.client, session.workers()
    try:
        _copy(fs, files, base, folder)
        copies = [submit(client, _copy, fs, files, base, folder, workers=[w]) for w in workers]
        for copied in copies:  # all end before one's error is raised: one still copying would outlive the removal
            copied.exception()
        for copied in copies:
            copied.result()
        yield local
    except (GpipeFileError, GpipeValueError) as exc:
        def named(text: str) -> str:
            return text.replace(local, url).replace(folder, fs.unstrip_protocol(base))

        if isinstance(exc, GpipeFileError):
            raise GpipeFileError(named(exc.path), exc.line, named(exc.reason)) from None
        raise GpipeValueError(named(str(exc))) from None
    finally:
        for removed in [submit(client, shutil.rmtree, folder, True, workers=[w]) for w in workers]:
            removed.result()
        shutil.rmtree(folder, ignore_errors=True)


def _files(fs, root: str, url: str) -> list[str]:
    """The files of the input at ``root``: itself, the files under it, or those its glob matches."""
    if glob.has_magic(root):
        files = [name for name in fs.glob(root) if fs.isfile(name)]
    elif fs.isfile(root):
        files = [root]
    else:
        files = fs.find(root) if fs.isdir(root) else []
    if not files:
        raise GpipeFileError(url, None, "missing: no such file or folder" if not glob.has_magic(root) else
                             "no file matches the glob")
    return sorted(files)


def _copy(fs, files: list[str], base: str, folder: str) -> None:
    """Copy ``files`` into ``folder`` under their names below ``base``, unless this host has the folder already.
    The copiers of one host (its workers, the client) take turns: the first copies into a folder of its own and
    renames it into place, the others then find it there. Should a copy fail, the next copier tries; nothing but
    the finished folder is left."""
    while not os.path.exists(folder):
        with _turn(f"{folder}.lock") as mine:
            if mine and not os.path.exists(folder):
                _fetch(fs, files, base, folder)


def _fetch(fs, files: list[str], base: str, folder: str) -> None:
    part = f"{folder}.{uuid.uuid4().hex}.part"
    try:
        for name in files:
            target = os.path.join(part, posixpath.relpath(name, base or "."))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fs.get_file(name, target)
        os.rename(part, folder)
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise


@contextlib.contextmanager
def _turn(path: str) -> Iterator[bool]:
    """An exclusive lock on the file at ``path`` (made if missing) for one thread or process of this host at a
    time, the file removed by its holder before it lets go. Yields whether the lock is the file's still: a holder
    before this one may have removed it, leaving this one a lock that no newcomer sees, so it must try again."""
    import fcntl  # POSIX: imported here, so that gpipe imports where it is not

    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # flock, not lockf: a lock per open file, so threads exclude too
        try:
            mine = os.path.samestat(os.fstat(descriptor), os.stat(path))
        except FileNotFoundError:
            mine = False
        try:
            yield mine
        finally:
            if mine:
                os.unlink(path)
    finally:
        os.close(descriptor)
