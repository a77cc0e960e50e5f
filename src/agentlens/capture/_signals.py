"""Flushing captured runs on SIGTERM, what ``docker stop`` and Kubernetes send.

Python's default action for SIGTERM ends the process at once, without running :mod:`atexit`:
the runs still queued for export were lost (1,400 of 3,000 in one test). Capture therefore
installs a SIGTERM handler of its own when it is first configured, in the main thread only
(``signal.signal`` can be called nowhere else): it writes what is queued, for at most
:data:`SIGTERM_TIMEOUT` seconds (spilling what the destination cannot take in that time), and
then does what would have happened without it:

- the default action: the default is restored and the signal raised again, so the process
  ends as killed by SIGTERM (its exit status says so);
- a handler the host installed before capture was configured: it is called, after a flush
  (not a shutdown: a host that shuts down gracefully may still finish runs);
- ``SIG_IGN``: the runs are flushed and the signal stays ignored.

A handler the host installs after capture replaces this one: the host then owns SIGTERM (call
``agentlens.shutdown()`` from it). Nothing here ever raises into the host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["SIGTERM_TIMEOUT", "install_sigterm_handler"]

logger = logging.getLogger("agentlens")

SIGTERM_TIMEOUT = 5.0
"""Seconds the SIGTERM handler spends writing queued runs before the process goes on ending."""

_installed = False
_previous: Any = None
_flush: Callable[[float], object] | None = None
_shutdown: Callable[[float], object] | None = None


def install_sigterm_handler(
    flush: Callable[[float], object], shutdown: Callable[[float], object]
) -> bool:
    """Install the handler once per process; True when it is (now or already) installed.
    Refused (False) outside the main thread, or where SIGTERM does not exist."""
    global _installed, _previous, _flush, _shutdown
    _flush, _shutdown = flush, shutdown
    if _installed:
        return True
    try:
        if threading.current_thread() is not threading.main_thread():
            return False
        sigterm = getattr(signal, "SIGTERM", None)
        if sigterm is None:  # pragma: no cover - every supported platform has it
            return False
        _previous = signal.getsignal(sigterm)
        signal.signal(sigterm, _on_sigterm)
        _installed = True
    except Exception as exc:  # never break the host: capture just goes without it
        logger.debug("agentlens: no SIGTERM handler installed: %s", exc)
        return False
    return True  # a forked child inherits it, and acts on its own pipeline


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _previous
    chained = callable(previous) and previous is not _on_sigterm
    ignored = previous == signal.SIG_IGN
    try:
        action = _flush if chained or ignored else _shutdown
        if action is not None:
            action(SIGTERM_TIMEOUT)
    except Exception:  # pragma: no cover - never break the host
        pass
    if chained:
        previous(signum, frame)
        return
    if ignored:
        return
    # The default action (SIG_DFL, or a handler installed from C that Python cannot call):
    # end the process as the signal would have.
    with contextlib.suppress(Exception):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
