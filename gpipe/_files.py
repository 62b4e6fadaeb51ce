"""Outputs appear complete or not at all: written under a temporary name, then renamed.

A writer removes nothing but its own output. A file writer replaces the regular file it is
given (as pandas does: through a symbolic link, the file the link leads to) and refuses
anything else there (a folder, a FIFO, a device). A folder writer writes into a new or empty
folder (through a symbolic link, the folder it leads to), and lists the files it wrote there,
with their sizes and times, in ``.gpipe-files.json``; with ``overwrite`` it also replaces a
folder that holds nothing but files gpipe writes there and that list names as they were
written (no other file, no file changed or put in their place, no link, no empty folder), and
refuses any other. A mount point (a container's volume, say) cannot be renamed over: its output
is made in a hidden folder inside it, then moved up entry by entry, the earlier output's list
moved aside first and the new list last, so that the folder is whole once its list is there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterator
from typing import IO

from ._validate import check_bool
from .errors import GpipeValueError

# The files gpipe writes in each kind of output folder, as paths relative to it ('/'-separated).
GRAPH_PART = r"part-(?:\d{5}|[1-9]\d{5,})\.parquet"  # part-00000.parquet, ..., part-99999.parquet, part-100000.parquet
GRAPH_FILES = rf"_gpipe\.json|ids\.parquet|{GRAPH_PART}"
WALK_FILES = r"walks-\d{12}\.parquet"
SAMPLE_FILES = r"(?:edges|nodes)-\d{6}\.parquet"
EMBEDDING_FILES = r"embeddings-\d{6}\.parquet"
VECTOR_FILES = r"vectors-\d{6}\.parquet"
SCORE_FILES = r"scores-\d{6}\.parquet"

# The list of what a folder writer wrote in its folder: the files' paths (relative, '/'-separated), each with its
# size and modification time, so that a file put in place of one of them is not taken for gpipe's.
MANIFEST = ".gpipe-files.json"

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _temporary(path: str) -> str:
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:8]}")


def _kind(path: str) -> str:
    """What ``path`` is, in words ('a FIFO'), not following a symbolic link there."""
    mode = os.lstat(path).st_mode
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


def _resolved(path: str, name: str, rule: str, wanted: str) -> str:
    """``path``, or, when it is a symbolic link, where it leads: gpipe writes through a link, as pandas does. A link
    that leads nowhere (dangling, or a loop) is refused, naming ``name`` and ``rule``."""
    if not os.path.islink(path):
        return path
    try:
        return os.path.realpath(path, strict=True)
    except OSError as exc:
        raise GpipeValueError(f"'{name}' must be {rule}, got {path!r}: a symbolic link that leads to no {wanted} "
                              f"({exc.strerror})") from None


def _refused_kind(name: str, rule: str, given: str, target: str) -> GpipeValueError:
    """The error for a target of the wrong kind: what is at ``given``, or what the link there leads to."""
    if target == given:
        return GpipeValueError(f"'{name}' must be {rule}, got {given!r}: {_kind(target)} of that name exists")
    return GpipeValueError(f"'{name}' must be {rule}, got {given!r}: it is a symbolic link to {_kind(target)} "
                           f"({target})")


def _not_creatable(name: str, what: str, given: str, target: str, tmp: str, exc: OSError) -> GpipeValueError:
    """``exc``, raised creating ``target``'s folder or the temporary ``tmp`` beside it, as the error naming ``name``:
    the file in the way of the folder, or the system's reason."""
    above = os.path.dirname(target)
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        reason = f"{above!r} is {_kind(above)}, not a folder"
    elif exc.filename == tmp:
        reason = f"{exc.strerror} (writing in {os.path.dirname(tmp)!r})"
    else:
        reason = f"{exc.strerror} ({exc.filename})" if exc.filename else exc.strerror
    return GpipeValueError(f"'{name}' must be {what} gpipe can create, got {given!r}: {reason}")


def _written(folder: str) -> dict[str, list[int]]:
    """What :data:`MANIFEST` in ``folder`` says gpipe wrote there (path -> [size, mtime_ns]); nothing when it is
    absent or not such a list."""
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            files = json.load(f)["files"]
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    return files if isinstance(files, dict) else {}


def _identity(entry: os.DirEntry) -> list[int]:
    st = entry.stat(follow_symlinks=False)
    return [st.st_size, st.st_mtime_ns]


def _files_under(folder: str, prefix: str = ""):
    """``(relative path, DirEntry)`` of each entry under ``folder``, by path, depth first."""
    with os.scandir(folder) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        yield prefix + entry.name, entry
        if entry.is_dir(follow_symlinks=False):
            yield from _files_under(entry.path, prefix + entry.name + "/")


def _write_manifest(folder: str) -> None:
    """List every file under ``folder`` in its :data:`MANIFEST`, as written now."""
    files = {relative: _identity(entry) for relative, entry in _files_under(folder)
             if relative != MANIFEST and entry.is_file(follow_symlinks=False)}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump({"format": "gpipe-files", "version": 1, "files": files}, f)


def _foreign_entry(folder: str, owned: re.Pattern, ignored: str | None = None) -> str | None:
    """The first entry under ``folder`` (by path) that is not gpipe's output, said in words: anything but a file
    ``owned`` matches (its path relative to the top folder, '/'-separated), or a folder holding only such entries
    (gpipe writes no link and no empty folder); then the first such file that the folder's :data:`MANIFEST` does
    not list as written (the same size and time). None when there is none; the entry ``ignored`` is not looked
    at."""
    entries = [(relative, entry) for relative, entry in _files_under(folder) if relative.split("/")[0] != ignored]
    for relative, entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if not os.listdir(entry.path):
                return f"{relative!r} is an empty folder, not a file gpipe writes there"
        elif not entry.is_file(follow_symlinks=False):
            return f"{relative!r} is {_kind(entry.path)}, not a file gpipe writes there"
        elif not (owned.fullmatch(relative) or os.path.basename(relative) == MANIFEST):
            return f"{relative!r} is not a file gpipe writes there"
    written = _written(folder)
    for relative, entry in entries:
        if relative == MANIFEST or entry.is_dir(follow_symlinks=False):
            continue
        if relative not in written:
            return f"{relative!r} is not a file gpipe wrote there (its {MANIFEST} does not list it)"
        if written[relative] != _identity(entry):
            return f"{relative!r} is not the file gpipe wrote there (changed since: its {MANIFEST} lists another)"
    return None


def check_folder_target(path: str, name: str, owned: re.Pattern, overwrite: bool, *, ignored: str | None = None) -> str:
    """The folder that writing ``path`` replaces: ``path``, or the folder a symbolic link there leads to.

    Refuse to replace it unless it is absent, an empty folder, or (``overwrite``) gpipe's output only (a
    ``GpipeValueError`` naming ``name``): what :func:`atomic_dir` checks, for a caller to check before its work.
    The entry named ``ignored`` (atomic_dir's temporary folder inside a mount point) is not looked at."""
    given = os.path.abspath(path)
    rule = "a folder to write into"
    path = _resolved(given, name, rule, "folder")
    if not os.path.lexists(path):
        return path
    if not os.path.isdir(path):
        raise _refused_kind(name, rule, given, path)
    entries = sorted(entry for entry in os.listdir(path) if entry != ignored)
    if not entries:
        return path
    if not overwrite:
        listed = ", ".join(map(repr, entries[:3])) + (", ..." if len(entries) > 3 else "")
        raise GpipeValueError(f"'{name}' must be a new or empty folder unless overwrite is set, got {given!r}: "
                              f"it holds {len(entries)} entries ({listed})")
    foreign = _foreign_entry(path, owned, ignored)
    if foreign is not None:
        raise GpipeValueError(f"'{name}' must hold only gpipe's output to be overwritten, got {given!r}: {foreign}")
    return path


def check_file_target(path: str, name: str = "path") -> str:
    """The file that writing ``path`` replaces: ``path``, or the file a symbolic link there leads to.

    Refuse anything there but a regular file (a ``GpipeValueError`` naming ``name``): what :func:`atomic_file`
    checks, for a caller to check before its work."""
    given = os.path.abspath(path)
    rule = "a file path (a new file, or a file or a link to one to replace)"
    path = _resolved(given, name, rule, "file")
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise _refused_kind(name, rule, given, path)
    return path


@contextlib.contextmanager
def atomic_dir(path: str, *, owned: str, overwrite: bool = False, name: str = "path") -> Iterator[str]:
    """Yield a temporary folder that replaces the folder ``path`` when the block succeeds.

    ``path`` is checked before the block, so that a refusal comes before the work, and again
    before the swap, which replaces exactly what was checked. A block that raises (an
    interrupt too), or a swap that fails, leaves ``path`` as it was and removes the temporary
    folder. The files written are listed, with their sizes and times, in the folder's
    ``.gpipe-files.json``: what ``overwrite`` may replace later.

    Parameters
    ----------
    path : str
        The folder to write: new, empty, or (``overwrite``) holding only files that ``owned`` matches and
        that its ``.gpipe-files.json`` lists as written; or a symbolic link to such a folder, which is
        replaced, the link kept. In a mount point, which cannot be renamed over, the output is made in a
        hidden folder inside it and moved up, entry by entry, its ``.gpipe-files.json`` last.
    owned : str
        A regular expression that matches the path, relative to the folder and '/'-separated, of every
        file written there (``summary\\.json|edges\\.parquet``).
    overwrite : bool
        Replace a folder of earlier output (only files that ``owned`` matches, as gpipe wrote them).
    name : str
        The parameter or config key that gave ``path``, named in the errors.

    Yields
    ------
    str
        The temporary folder, next to ``path``.

    Raises
    ------
    GpipeValueError
        ``path`` may not be replaced (a file, a folder that is not empty without
        ``overwrite``, or one holding anything but files ``owned`` matches as gpipe wrote them: another
        file, a file of that name gpipe did not write, a link, an empty folder), no folder can be created
        there, or the finished output cannot be renamed to ``path`` (nothing is written then).

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import atomic_dir
    >>> out = os.path.join(tempfile.mkdtemp(), "results")
    >>> with atomic_dir(out, owned=r"notes\\.txt") as folder:
    ...     _ = open(os.path.join(folder, "notes.txt"), "w").write("complete or absent\\n")
    ...     os.path.exists(out)
    False
    >>> sorted(os.listdir(out))
    ['.gpipe-files.json', 'notes.txt']
    """
    given = os.path.abspath(path)
    owned_files = re.compile(owned)
    check_bool("overwrite", overwrite)
    path = check_folder_target(given, name, owned_files, overwrite)
    inside = os.path.ismount(path)  # a mount point cannot be renamed over: the output is made inside it
    tmp = os.path.join(path, f".gpipe.tmp-{uuid.uuid4().hex[:8]}") if inside else _temporary(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.makedirs(tmp)
    except OSError as exc:
        raise _not_creatable(name, "a folder", given, path, tmp, exc) from None
    try:
        yield tmp
        _write_manifest(tmp)
        check_folder_target(given, name, owned_files, overwrite, ignored=os.path.basename(tmp) if inside else None)
        (_fill if inside else _replace)(tmp, path, name, given)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _not_renamed(name: str, what: str, given: str, exc: OSError) -> GpipeValueError:
    """``exc``, raised renaming a finished output to ``given``'s place, as the error naming ``name``."""
    return GpipeValueError(f"'{name}' must be {what} gpipe can rename its finished output to, got {given!r}: "
                           f"{exc.strerror} (renaming {exc.filename!r}); the output was not written")


def _replace(tmp: str, path: str, name: str, given: str) -> None:
    """Rename ``tmp`` to ``path``, the folder there put aside first and removed once replaced; where a rename fails,
    that folder is back at ``path`` and the error names ``name`` and the system's reason."""
    old = _temporary(path) if os.path.lexists(path) else None
    try:
        if old is not None:
            os.rename(path, old)
        try:
            os.rename(tmp, path)
        except BaseException:  # the earlier output goes back where it was, under its own name
            if old is not None:
                os.rename(old, path)
            raise
    except OSError as exc:
        raise _not_renamed(name, "a folder", given, exc) from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fill(tmp: str, path: str, name: str, given: str) -> None:
    """Move the entries of ``tmp``, a folder inside the mount point ``path``, up into ``path``: the earlier output's
    entries aside first (its list first), then the new ones (the list last), then the earlier ones removed; where a
    rename fails, every entry moved goes back and the error names ``name`` and the system's reason."""
    old = os.path.join(path, f".gpipe.old-{uuid.uuid4().hex[:8]}")
    earlier = sorted(set(os.listdir(path)) - {os.path.basename(tmp)}, key=lambda entry: entry != MANIFEST)
    new = sorted(os.listdir(tmp), key=lambda entry: entry == MANIFEST)
    moved = []
    try:
        try:
            os.mkdir(old)
            for entry in earlier:
                moved.append((os.path.join(path, entry), os.path.join(old, entry)))
                os.rename(*moved[-1])
            for entry in new:
                moved.append((os.path.join(tmp, entry), os.path.join(path, entry)))
                os.rename(*moved[-1])
        except BaseException:  # the earlier output goes back where it was, the new one back into tmp
            for src, dst in reversed(moved):
                with contextlib.suppress(OSError):
                    os.rename(dst, src)
            with contextlib.suppress(OSError):
                os.rmdir(old)
            raise
    except OSError as exc:
        raise _not_renamed(name, "a folder", given, exc) from None
    shutil.rmtree(old, ignore_errors=True)
    os.rmdir(tmp)


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", *, name: str = "path") -> Iterator[IO]:
    """Yield an open temporary file that replaces the file ``path`` when the block succeeds.

    Parameters
    ----------
    path : str
        The file to write: new, a file, or a symbolic link to a file (which is replaced, the link kept, as
        pandas' writers write through a link); its folder is created if need be.
    mode : str
        The mode the temporary file is opened in (``"w"``, ``"wb"``).
    name : str
        The parameter or config key that gave ``path``, named in the errors.

    Yields
    ------
    file
        The open temporary file (a writer that opens files by name uses its ``name``).

    Raises
    ------
    GpipeValueError
        ``path`` is (or leads to) anything but a file, such as a folder, a FIFO or a device, or is a link that
        leads nowhere; or the file cannot be created there (a file in the way of its folder, no permission), or
        the finished file cannot be renamed to ``path`` (nothing is written then).

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
    given = os.path.abspath(path)
    path = check_file_target(given, name)
    tmp = _temporary(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = open(tmp, mode)
    except OSError as exc:
        raise _not_creatable(name, "a file", given, path, tmp, exc) from None
    try:
        with f:
            yield f
        check_file_target(given, name)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise _not_renamed(name, "a file", given, exc) from None
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
