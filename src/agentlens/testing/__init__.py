"""pytest plugin: fixtures for testing code that is captured with agentlens.

Installed with agentlens and loaded by pytest through the ``pytest11`` entry point, so the
fixtures are available in any test without an import. It defines fixtures, and one hook that
lets a conftest name it as well (``pytest_plugins = ["agentlens.testing"]``, needed where
plugins are not autoloaded), and imports nothing of agentlens until a fixture is used;
``pytest -p no:agentlens`` turns it off.

``captured_traces``
    Capture is configured for the test to record into memory, with deterministic run ids
    (``run-0001``, ``run-0002``...), step ids (``s1``, ``s2``... within each run) and a clock that
    starts at 2026-01-01T00:00:00Z and advances one millisecond per reading::

        def test_agent_cites_the_customer(captured_traces):
            answer = support_agent("where is my order?")     # uses agentlens.run and @tool
            trace = captured_traces.one()
            assert trace.id == "run-0001"
            assert [s.name for s in trace.steps] == ["get_customer", "search_orders"]

    Runs are exported as their block ends (a :class:`~agentlens.capture.SimpleProcessor` over an
    :class:`~agentlens.capture.InMemoryExporter`, installed with the public
    ``agentlens.configure(processor=..., clock=..., id_generator=...)``). After the test
    capture is reset (:func:`agentlens.capture.reset`): unconfigured, read from the environment
    again at the next run, as in a fresh process.

``agentlens_store``
    A fresh, private in-memory SQLite store (``sqlite:///:memory:``), closed after the test.

``agentlens_eval``
    An :class:`AgentEval`: run an agent over fixed inputs, capture and score the runs, assert
    on the rate (``result.assert_rate_below(0.05)``).

The modules: ``_capture`` (the capture fixtures and the deterministic clock and ids), ``_eval``
(:class:`AgentEval` and its result). Scoring and counting are
:func:`agentlens.review.score_finished`, shared with ``agentlens demo``.
"""

from typing import Any

from agentlens.testing._capture import (
    CLOCK_START,
    CapturedTraces,
    agentlens_store,
    captured_traces,
    deterministic_clock,
    deterministic_run_ids,
)
from agentlens.testing._eval import AgentEval, EvalCase, EvalResult, agentlens_eval

__all__ = [
    "CLOCK_START",
    "AgentEval",
    "CapturedTraces",
    "EvalCase",
    "EvalResult",
    "agentlens_eval",
    "agentlens_store",
    "captured_traces",
    "deterministic_clock",
    "deterministic_run_ids",
]


def pytest_plugin_registered(plugin: Any, manager: Any) -> None:
    """Registered under one of its names (``agentlens`` by the entry point, ``agentlens.testing``
    by ``-p agentlens.testing`` or a conftest's ``pytest_plugins``), hold the other too: pytest
    would load the same module again under it, and stop with ``Plugin already registered under a
    different name``."""
    import sys

    if plugin is not sys.modules[__name__]:
        return
    for name in _NAMES:
        if manager.get_plugin(name) is None and not manager.is_blocked(name):
            manager.register(_AlreadyLoaded(), name)


_NAMES = ("agentlens", __name__)
"""The entry point's name and the module's."""


class _AlreadyLoaded:
    """Holds a name of this plugin, loaded under its other name."""
