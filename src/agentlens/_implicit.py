"""The exporter of capture's implicit configuration (``AGENTLENS_DB`` set, no ``configure()``
call), as the top level provides it.

Capture resolves that configuration itself when the first run starts, but what a stored run
goes through next (review on completion) sits above capture. So the top level
(``agentlens/__init__.py``, which every import of the package runs first) registers here the
function that builds the exporter, and capture asks here for it: neither imports the other, and
nothing heavy is imported until a run is captured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["set_store_exporter", "store_exporter"]

_factory: Callable[[str], Any] | None = None


def set_store_exporter(factory: Callable[[str], Any] | None) -> None:
    """Make ``factory(store_url)`` build the exporter of the implicit configuration (``None``:
    capture's plain store exporter)."""
    global _factory
    _factory = factory


def store_exporter() -> Callable[[str], Any] | None:
    """The registered factory, if any."""
    return _factory
