"""Writing a file atomically: what ``agentlens export -o`` and ``agentlens gate``'s reports use.

The content goes to a temporary file in the target's folder, flushed to disk, and is renamed
over the target only once all of it is written, so a reader sees the old file or the new one,
never half of one, and a failure leaves the old file as it was (and no temporary file). The new
file keeps the permission bits of the file it replaces; a new file gets what the umask leaves
of 0o666, as ``open()`` would give it (not the private mode of a temporary file).

Every :class:`OSError` names the target, not the temporary file the user never asked for.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO, TypeVar

__all__ = ["write_atomic"]

_T = TypeVar("_T")


def write_atomic(path: str | os.PathLike[str], write: Callable[[TextIO], _T]) -> _T:
    """Call ``write(fp)`` on a new UTF-8 text file (``\\n`` line ends) that then replaces
    ``path``; returns what ``write`` returned.

    Raises:
        OSError: the folder is missing or cannot be written to, ``path`` is a folder, or
            writing failed; its ``filename`` is ``path``. Whatever ``write`` raises otherwise
            is raised as it is, the old file untouched.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _naming(exc, target) from None
    try:
        os.chmod(tmp, _mode_for(target))
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fp:
            result = write(fp)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise _naming(exc, target) from None
    except BaseException:
        _remove(tmp)
        raise
    return result


def _naming(exc: OSError, target: Path) -> OSError:
    """``exc`` with ``target`` as its file name (the same class, so a caller's ``except
    FileNotFoundError`` still holds)."""
    if exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), str(target))


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _mode_for(target: Path) -> int:
    """The permission bits a written file gets: those of the file it replaces, else what the
    umask leaves of 0o666."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
