"""The ``agentlens`` command's entry point (also ``python -m agentlens``).

A Ctrl-C while the command line loads (a command's modules can take half a second to import) ends
the command quietly, with ``interrupted`` and exit code 130: this module, which imports nothing
heavy, installs a SIGINT handler that exits at once, and the command line puts Python's own
handler back (Ctrl-C as ``KeyboardInterrupt``, which commands such as ``score`` report on) only
once it is inside its error handling.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from types import FrameType

__all__ = ["main"]


def _interrupted(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130)


# Not in the main thread (imported by a tool), signal() raises: leave the handler alone then.
with contextlib.suppress(ValueError):
    signal.signal(signal.SIGINT, _interrupted)


def main() -> None:
    """Run the ``agentlens`` command line with ``sys.argv``.

    Once the command has finished (returned or exited), a Ctrl-C is ignored: the process is only
    shutting down, and while it does Python puts the default SIGINT disposition back for any
    handler but "ignore", so a late Ctrl-C killed it (exit status -2, "killed by SIGINT", for a
    command that had done its work)."""
    from agentlens.cli import main as run

    try:
        run()
    finally:
        with contextlib.suppress(ValueError):  # not in the main thread
            signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    main()
