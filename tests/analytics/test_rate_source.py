"""The RateSource protocol: the SQLite store answers it; any other store is counted in Python
through the same protocol, with the same results."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from _rate_fixtures import NOW, score, trace
from agentlens.analytics import (
    PythonRateSource,
    hallucination_rate,
    rate_breakdown,
    rate_source,
)
from agentlens.config import Settings
from agentlens.model import FailureMode
from agentlens.store import RateSource, TraceStore, open_store

CFG = Settings()


class PlainStore:
    """Only the TraceStore methods the Python counting reads: no rate queries of its own."""

    def __init__(self, store: TraceStore) -> None:
        self._store = store

    def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.list_runs(*args, **kwargs)

    def get_scores(self, run_id: str) -> Any:
        return self._store.get_scores(run_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    s = open_store(f"sqlite:///{tmp_path / 'rates.db'}")
    runs = [trace(f"r{i}", day=i % 3, hours=1) for i in range(9)]
    s.put_traces(runs)
    s.put_scores(
        [score(r.id, "flagged", modes=(FailureMode.FABRICATED_GROUNDING,)) for r in runs[:3]]
        + [score(r.id, "passed") for r in runs[3:7]]
        + [score(runs[7].id, "error"), score(runs[8].id, "passed", version="0")]
        + [score(r.id, "passed", scorer="t_loops") for r in runs]
    )
    yield s
    s.close()


def test_the_sqlite_store_is_a_rate_source(store: TraceStore) -> None:
    assert isinstance(store, RateSource)
    assert rate_source(store) is store
    plain = PlainStore(store)
    assert not isinstance(plain, RateSource)
    assert isinstance(rate_source(plain), PythonRateSource)  # type: ignore[arg-type]


def test_python_and_sqlite_answer_the_protocol_alike(store: TraceStore) -> None:
    sql, py = rate_source(store), PythonRateSource(store)
    assert sql.stored_scorers() == py.stored_scorers() == ["t_loops", "t_refs"]
    assert [v for v, _ in sql.stored_versions("t_refs")] == [
        v for v, _ in py.stored_versions("t_refs")
    ]
    assert {v for v, _ in sql.stored_versions("t_refs")} == {"0", "1"}


@pytest.mark.parametrize("by", [None, "day", "agent", "mode", "scorer_version"])
def test_a_store_without_rate_queries_gets_the_same_rates(
    store: TraceStore, by: str | None
) -> None:
    plain: Any = PlainStore(store)
    options: dict[str, Any] = {"settings": CFG, "since_hours": 24 * 5, "now": NOW}
    if by is None:
        assert hallucination_rate(store=plain, **options) == hallucination_rate(
            store=store, **options
        )
    else:
        assert rate_breakdown(by, store=plain, **options) == rate_breakdown(
            by, store=store, **options
        )


def test_a_scorer_with_nothing_stored_is_named_not_counted_as_empty(store: TraceStore) -> None:
    """A mistyped name or version counted nothing and read like runs not scored yet."""
    from agentlens.errors import ConfigError

    options: dict[str, Any] = {"settings": CFG, "since_hours": 24 * 5, "now": NOW}
    with pytest.raises(ConfigError, match=r"unknown scorer 'bogus': no scorer has that name"):
        hallucination_rate(store=store, scorers=["bogus"], **options)
    with pytest.raises(ConfigError, match=r"no score of t_refs@9 is stored; .*: (1, 0|0, 1)$"):
        rate_breakdown("day", store=store, scorers=["t_refs@9"], **options)
    # stored, though not in this window: an empty rate, as before
    early: dict[str, Any] = {"settings": CFG, "since_hours": 1, "now": NOW - timedelta(days=30)}
    assert hallucination_rate(store=store, scorers=["t_loops"], **early).scored == 0
    assert hallucination_rate(store=store, scorers=["t_refs@1"], **early).scored == 0
