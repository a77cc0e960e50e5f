"""The spill directory: finished runs that could not be exported in time, kept on local disk.

When the destination stays unavailable (another process holds SQLite's write lock during a long
``agentlens import``, a server is down) and the in-memory queue runs out of room, or capture is
shut down (exit, SIGTERM) before the runs could be written, the
:class:`~agentlens.capture.BatchProcessor` writes them here instead of dropping them, and the
next processor for the same destination (in this process or the next one started) sends them
again. Writing a run twice is harmless: a store replaces a run by its id.

Each spill is one JSON Lines file of traces, written under a temporary name and renamed when
complete (so a reader never sees half a file). A processor that re-sends a file first claims it
by renaming it to ``NAME.sending-PID``; a claim left by a process that no longer exists is taken
over. Files are created owner-only (0600): runs hold what the agent saw.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from agentlens._ids import new_id
from agentlens.model import Trace

__all__ = ["SpillDir"]

logger = logging.getLogger("agentlens")

_SUFFIX = ".jsonl"
_SENDING = ".sending-"


class SpillDir:
    """A directory of spilled runs (created when first written to)."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._size: int | None = None  # bytes held, measured at the first write, then counted
        self._lock = threading.Lock()  # the export and spill threads both write

    def __repr__(self) -> str:
        return f"SpillDir({str(self.path)!r})"

    def write(self, traces: Sequence[Trace]) -> int:
        """Write ``traces`` to a new spill file; return how many were written (0 on failure,
        logged). Never raises."""
        if not traces:
            return 0
        with self._lock:
            return self._write(traces)

    def _write(self, traces: Sequence[Trace]) -> int:
        try:
            self.path.mkdir(mode=0o700, exist_ok=True)  # its parent is the store's folder
            lines = [trace.to_json() + "\n" for trace in traces]
            size = sum(len(line) for line in lines)
            if self._size is None:
                self._size = sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())
            if self._size + size > self.max_bytes:
                logger.warning(
                    "agentlens: the spill directory %s is full (%d bytes); %d run(s) not spilled",
                    self.path,
                    self.max_bytes,
                    len(traces),
                )
                return 0
            name = f"{new_id()}-{os.getpid()}"
            tmp = self.path / f".{name}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.writelines(lines)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path / f"{name}{_SUFFIX}")
            self._size += size
            return len(traces)
        except Exception as exc:
            logger.warning(
                "agentlens: could not spill %d run(s) to %s: %s", len(traces), self.path, exc
            )
            return 0

    def has_files(self) -> bool:
        """Something is waiting to be sent (or claimed by a process that died)."""
        try:
            return any(self._candidates())
        except OSError:
            return False

    def claim(self) -> tuple[Path, list[Trace]] | None:
        """The oldest spill file not claimed by a live process, claimed, with its runs; lines
        that cannot be read back are logged and skipped. ``None`` when there is none."""
        try:
            for path in sorted(self._candidates()):
                claimed = path.with_name(f"{self._base(path)}{_SENDING}{os.getpid()}")
                try:
                    os.replace(path, claimed)
                except OSError:
                    continue  # another process claimed it first
                return claimed, self._read(claimed)
        except OSError as exc:
            logger.warning("agentlens: cannot read the spill directory %s: %s", self.path, exc)
        return None

    def done(self, claimed: Path) -> None:
        """The claimed file's runs were exported: remove it."""
        with contextlib.suppress(OSError):
            size = claimed.stat().st_size
            claimed.unlink()
            if self._size is not None:
                self._size = max(0, self._size - size)

    def release(self, claimed: Path) -> None:
        """The claimed file's runs could not be exported: put it back for a later attempt."""
        with contextlib.suppress(OSError):
            os.replace(claimed, claimed.with_name(f"{self._base(claimed)}{_SUFFIX}"))

    # -- internals ------------------------------------------------------------------------------

    def _candidates(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        found = []
        for entry in self.path.iterdir():
            name = entry.name
            if name.endswith(_SUFFIX) and not name.startswith("."):
                found.append(entry)
            elif _SENDING in name:
                pid = name.rpartition(_SENDING)[2]
                if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                    found.append(entry)  # its claimer died before finishing
        return found

    @staticmethod
    def _base(path: Path) -> str:
        name = path.name
        if _SENDING in name:
            return name.rpartition(_SENDING)[0]
        return name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name

    @staticmethod
    def _read(path: Path) -> list[Trace]:
        traces: list[Trace] = []
        bad = 0
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    traces.append(Trace.from_json(line))
                except Exception:
                    bad += 1
        if bad:
            logger.warning(
                "agentlens: %d unreadable run(s) in the spill file %s skipped", bad, path
            )
        return traces


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True
