"""``agentlens.configure``: capture's configuration, plus review on completion.

Capture knows nothing of review (DESIGN.md's layers: review sits above capture), so the two are
joined here, above both. :func:`configure` is :func:`agentlens.capture.configure` with one
addition: when captured runs go to a store (``db``, ``AGENTLENS_DB`` or the configuration
file's ``db``) and review on capture is on (``review=True``, or ``[review] on_capture``, true
by default), the store exporter is a :class:`ReviewingExporter` and a background
:class:`~agentlens.review.Reviewer` reviews the runs it writes.

What runs where:

- the agent's thread: ``run.__exit__`` hands the run to capture's processor (a bounded queue)
  and returns; nothing of review runs there;
- capture's export thread: writes a batch of runs (they are now pending review in the store)
  and calls :meth:`Reviewer.notify <agentlens.review.Reviewer.notify>`, which sets an event;
- the reviewer's thread: scores the pending runs with their role's review scorers, sets the
  flags and content flags, calls the ``on_flagged`` callbacks, delivers the webhook.

A slow scorer or a hanging webhook delays only the reviewer's thread. At shutdown (or when
capture is configured again) the reviewer gets up to :data:`SHUTDOWN_REVIEW_S` seconds to
finish what is pending; what is left stays pending in the store, for the next process that
reviews it (``agentlens review run``, the server).

With only ``AGENTLENS_DB`` set and no ``configure()`` call, capture's implicit configuration
uses :func:`implicit_exporter` (registered through :mod:`agentlens._implicit`): the same
reviewer, started by capture's export thread at the first write, so the agent's thread loads
nothing of review. Bad review settings there are logged (the runs stay pending), never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentlens.capture import ExportResult, LoopEvent, LoopGuard, RoleGuard, StoreExporter
from agentlens.config import AgentSettings, Settings
from agentlens.errors import ConfigError
from agentlens.model import Trace

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.review import Reviewer
    from agentlens.store import TraceStore

__all__ = [
    "SHUTDOWN_REVIEW_S",
    "ReviewingExporter",
    "build_loop_guard",
    "configure",
    "implicit_exporter",
]

logger = logging.getLogger("agentlens")

SHUTDOWN_REVIEW_S = 2.0
"""Seconds the reviewer may use at shutdown to finish the runs already written."""


class ReviewingExporter(StoreExporter):
    """A :class:`~agentlens.capture.StoreExporter` that notifies a reviewer after each write.

    Args:
        store: a store URL or an open store.
        reviewer: the :class:`~agentlens.review.Reviewer` of that store; ``None`` starts one
            at the first write that succeeds, in the exporting thread, from the settings (what
            capture's implicit configuration uses: the agent's thread never loads review). When
            it cannot be started (review off, bad review settings), that is logged once and the
            runs stay pending review in the store.
    """

    def __init__(
        self, store: str | TraceStore, reviewer: Reviewer | None = None, **kwargs: Any
    ) -> None:
        super().__init__(store, **kwargs)
        self._store_ref = store
        self._reviewer = reviewer
        self._lazy = reviewer is None
        self._lock = threading.Lock()

    @property
    def reviewer(self) -> Reviewer | None:
        """The reviewer (``None`` until a lazy one is started, or when it could not be)."""
        return self._reviewer

    def export(self, traces: Sequence[Trace]) -> ExportResult:
        """Store the runs, then wake the reviewer (never blocks on review)."""
        result = super().export(traces)
        if result.ok:
            reviewer = self._reviewer if not self._lazy else self._start_reviewer()
            if reviewer is not None:
                reviewer.notify()
        return result

    def _start_reviewer(self) -> Reviewer | None:
        with self._lock:
            if self._lazy:
                self._lazy = False
                try:
                    self._reviewer = _reviewer(self._store_ref, None)
                except Exception as exc:  # never raise into capture: the runs stay pending
                    logger.warning(
                        "agentlens: review on capture is off: %s: %s", type(exc).__name__, exc
                    )
            return self._reviewer

    def shutdown(self, timeout: float | None = None) -> bool:
        """Give the reviewer a bounded moment to finish, stop it, let go of the store."""
        with self._lock:
            self._lazy = False  # no reviewer starts after this
            reviewer = self._reviewer
        if reviewer is not None:
            budget = SHUTDOWN_REVIEW_S if timeout is None else min(SHUTDOWN_REVIEW_S, timeout)
            deadline = time.monotonic() + budget
            try:
                reviewer.flush(budget)
            finally:  # what is left of the budget (a daemon thread: it never holds the exit)
                reviewer.shutdown(max(0.0, deadline - time.monotonic()))
        return super().shutdown(timeout)


def build_loop_guard(
    mode: str | None, on_loop: Callable[[LoopEvent], object] | None, settings: Settings
) -> LoopGuard | None:
    """The online loop guard the settings ask for: ``mode`` (else the ``loop_guard`` setting) for
    every role without its own ``[agents.ROLE] loop_guard``, each role with the rule of its
    ``repeated_tool_calls`` options (``max_repeats``, volatile parts, bookkeeping events, exempt
    tools). ``None`` when it is off for every role (nothing on capture's hot path).

    Raises:
        ConfigError: a bad mode, callback or ``repeated_tool_calls`` option.
    """
    from agentlens.config import LOOP_GUARD_MODES

    if on_loop is not None and not callable(on_loop):
        raise ConfigError(f"configure(): on_loop must be callable, got {on_loop!r}")
    if mode is not None and mode not in LOOP_GUARD_MODES:
        raise ConfigError(
            f"configure(): loop_guard must be one of {', '.join(LOOP_GUARD_MODES)}, got {mode!r}"
        )
    default_mode = mode if mode is not None else settings.loop_guard

    def role_guard(role: AgentSettings, role_mode: str) -> RoleGuard | None:
        if role_mode == "off":
            return None
        from agentlens.eval.detectors._transcript import loop_rule  # only for a guard that is on

        try:
            rule = loop_rule(role.scorer_options("repeated_tool_calls"))
        except ConfigError as exc:
            raise ConfigError(f"{role.option_key('repeated_tool_calls')}: {exc}") from None
        return RoleGuard(role_mode, rule.repeats, rule.skip, rule.call_key, rule.result_key)

    default = role_guard(settings.default, default_mode)
    roles = {
        name: role_guard(role, role.loop_guard or default_mode)
        for name, role in settings.agents.items()
    }
    if default is None and not any(roles.values()):
        return None
    return LoopGuard(default=default, roles=roles, on_loop=on_loop)


def implicit_exporter(url: str) -> ReviewingExporter:
    """The exporter of capture's implicit configuration (only ``AGENTLENS_DB`` set): runs are
    stored, and reviewed in the background as :func:`configure` would review them (unless
    ``[review] on_capture`` is off); the reviewer starts in capture's export thread."""
    return ReviewingExporter(url)


def _reviewer(store: str | TraceStore, review: bool | None) -> Reviewer | None:
    """A started reviewer of ``store`` with its settings, or ``None`` when review on capture is
    off (``review`` is :func:`configure`'s argument).

    Raises:
        ConfigError: bad settings (naming the file and the key).
    """
    from agentlens.config import load_settings
    from agentlens.review import Reviewer, review_settings

    settings = load_settings(db=store) if isinstance(store, str) else load_settings()
    checked = review_settings(settings)
    if review is None and not checked.on_capture:
        return None
    return Reviewer(store, settings=settings, review=checked).start()


def configure(
    db: str | TraceStore | None = None,
    *,
    review: bool | None = None,
    loop_guard: str | None = None,
    on_loop: Callable[[LoopEvent], object] | None = None,
    **kwargs: Any,
) -> None:
    """Say where captured runs go, and review them as they are written. Call it once.

    Takes every argument of :func:`agentlens.capture.configure` (see there), and:

    Args:
        review: review captured runs in the background (``None``: ``[review] on_capture``,
            true by default). Only when runs go to a store: a custom ``exporter`` or
            ``processor`` is left as it is, and runs sent to a server (``endpoint``) are
            reviewed by the server.
        loop_guard: the online loop guard (docs/capture.md): ``"off"``, ``"warn"`` (a warning,
            ``on_loop`` and a finding on the run once a tool returned the same result for the
            same arguments ``max_repeats`` times) or ``"raise"`` (also
            :class:`~agentlens.LoopDetected` from the next identical call, before the tool
            runs). ``None``: ``AGENTLENS_LOOP_GUARD``, else the file's ``loop_guard``, else
            off. A role's ``[agents.ROLE] loop_guard`` is that role's mode.
        on_loop: called with a :class:`~agentlens.capture.LoopEvent` when the guard sees a loop
            (in the agent's thread; an exception it raises is logged, not raised).

    Raises:
        ConfigError: a bad argument, or bad review settings (the message names the file and
            the key).
    """
    from agentlens import capture
    from agentlens.capture._state import _env_disabled
    from agentlens.config import load_settings

    try:
        settings = load_settings()
    except ConfigError as exc:
        if loop_guard is not None:
            raise
        # what capture did before the guard: a destination given in code needs no file
        logger.warning("agentlens: loop guard off, the settings cannot be read: %s", exc)
        kwargs["guard"] = None
    else:
        kwargs["guard"] = build_loop_guard(loop_guard, on_loop, settings)

    custom = any(kwargs.get(k) is not None for k in ("exporter", "processor", "endpoint"))
    if not custom and db is None:
        # runs sent to a server (AGENTLENS_ENDPOINT) are reviewed there, not here
        custom = load_settings().endpoint is not None
    enabled = kwargs.get("enabled")
    if enabled is None:
        enabled = not _env_disabled()
    if review is False or custom or not enabled:  # nothing of review: capture as it is
        capture.configure(db, **kwargs)
        return

    from agentlens.capture._state import _resolve_url, check_options
    from agentlens.store import set_default_url

    check_options(**kwargs)  # before a reviewer starts: a bad argument leaves nothing running
    store = _resolve_url(db) if db is None or isinstance(db, str) else db
    reviewer = _reviewer(store, review)
    if reviewer is None:
        capture.configure(db, **kwargs)
        return
    capture.configure(exporter=ReviewingExporter(store, reviewer), **kwargs)
    set_default_url(store)  # the reading API (get_trace, query_traces) reads there too
