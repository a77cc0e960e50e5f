"""The ``agentlens`` command's entry point (also ``python -m agentlens``).

It imports the command line only inside :func:`main`, so that a Ctrl-C while the command's
modules load (the first half second) ends the command quietly, with ``interrupted`` and exit
code 130, instead of a traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the ``agentlens`` command line with ``sys.argv``."""
    try:
        from agentlens.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()
