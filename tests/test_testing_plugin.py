"""The ``agentlens.testing`` pytest plugin, run in a separate pytest process like a user's suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import threading
import agentlens

@agentlens.tool
def lookup(key):
    return {"key": key}

def agent(question):
    with agentlens.run(agent="support", input=question) as run:
        lookup("a")
        with run.step("agent", "plan"):
            lookup("b")
        run.output = "answer"

def test_deterministic_ids_and_clock(captured_traces):
    agent("q1")
    agent("q2")
    assert [t.id for t in captured_traces] == ["run-0001", "run-0002"]
    first = captured_traces[0]
    assert [(s.id, s.parent_id) for s in first.steps] == [("s1", None), ("s2", None), ("s3", "s2")]
    assert first.started_at.isoformat() == "2026-01-01T00:00:00+00:00"
    assert first.steps[0].started_at.isoformat() == "2026-01-01T00:00:00.001000+00:00"
    assert captured_traces.stats().exported == 2

def test_each_test_starts_afresh(captured_traces):
    assert len(captured_traces) == 0
    agent("q3")
    assert captured_traces.one().id == "run-0001"
    captured_traces.clear()
    assert len(captured_traces) == 0

def test_capture_is_restored_after_the_fixture():
    from agentlens.capture import is_enabled
    assert not is_enabled()
    assert not any(t.name == "agentlens-export" for t in threading.enumerate())

def test_store_fixture(agentlens_store, captured_traces):
    agent("q4")
    agentlens_store.put_traces(captured_traces.traces)
    assert agentlens_store.get_trace("run-0001").output == "answer"
"""


def test_fixtures_in_a_users_test_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=4)


def test_a_project_that_does_not_use_the_plugin_is_unaffected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_other="def test_ok():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-W", "error")
    result.assert_outcomes(passed=1)
    disabled = pytester.runpytest_subprocess("-p", "no:agentlens")
    disabled.assert_outcomes(passed=1)


def test_the_plugin_is_registered_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, importlib.metadata as m; "
        "eps = [e.value for e in m.entry_points(group='pytest11') if e.name == 'agentlens']; "
        "import agentlens.testing; "
        "heavy = [x for x in ('agentlens.capture', 'agentlens.store', 'agentlens.model', 'sqlite3',"
        " 'pydantic') if x in sys.modules]; print(eps, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['agentlens.testing'] []"


def test_naming_the_plugin_in_a_conftest_as_well_is_harmless(pytester: pytest.Pytester) -> None:
    """`pytest_plugins = ["agentlens.testing"]` in a conftest (needed where plugins are not
    autoloaded) crashed every run where the entry point had loaded it already: pytest stopped
    with `ValueError: Plugin already registered under a different name`."""
    pytester.makeconftest('pytest_plugins = ["agentlens.testing"]\n')
    pytester.makepyfile(test_user=USER_TESTS)
    both = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    both.assert_outcomes(passed=4)
    conftest_only = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:agentlens")
    conftest_only.assert_outcomes(passed=4)


def test_naming_the_plugin_with_p_as_well_is_harmless(pytester: pytest.Pytester) -> None:
    """`pytest -p agentlens.testing` loads it before the entry points, which then stopped
    pytest the same way."""
    pytester.makepyfile(test_user=USER_TESTS)
    named = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "agentlens.testing")
    named.assert_outcomes(passed=4)
