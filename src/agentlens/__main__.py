"""The ``agentlens`` command's entry point (also ``python -m agentlens``).

A Ctrl-C while the command line loads (its modules take about half a second to import) ends
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
    """Run the ``agentlens`` command line with ``sys.argv``."""
    from agentlens.cli import main as run

    run()


if __name__ == "__main__":
    main()
