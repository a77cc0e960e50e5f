"""How ``agentlens score`` plans its chunks: the stores' fast path (``run_keys`` and
``score_keys``, one statement per chunk) gives the same jobs as the protocol's path
(``list_runs`` and one ``unscored_run_ids`` per scorer), on every backend."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from store_factories import T0, make_score, make_trace

from agentlens.config import AgentSettings, Settings
from agentlens.eval._runner import ScoreSummary, _bases, _jobs, _Resolver
from agentlens.model import Trace
from agentlens.store import RunFilter, TraceStore

SCORERS = ["no_fabricated_refs", "parametric_leakage", "repeated_tool_calls"]
CFG = Settings(
    agents={"billing": AgentSettings(scorers={"repeated_tool_calls": {"max_repeats": 5}})}
)


class ProtocolOnly:
    """A store that answers only through the TraceStore protocol (no fast path)."""

    def __init__(self, store: TraceStore) -> None:
        self._store = store

    def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.list_runs(*args, **kwargs)

    def unscored_run_ids(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.unscored_run_ids(*args, **kwargs)


def plan(store: Any, where: RunFilter, *, rescore: bool, chunk_size: int) -> tuple[Any, int]:
    resolver = _Resolver(_bases(SCORERS, CFG), CFG)
    summary = ScoreSummary()
    jobs = list(
        _jobs(store, where, resolver, rescore=rescore, chunk_size=chunk_size, summary=summary)
    )
    return jobs, summary.skipped


@pytest.fixture
def scored(store: TraceStore) -> TraceStore:
    rng = random.Random(19)
    agents = [None, "support", "billing"]
    runs: list[Trace] = []
    for i in range(230):
        run = make_trace(i, steps=1, agent="support", started=True if i % 9 else None)
        runs.append(run.model_copy(update={"agent": agents[i % 3]}))
    store.put_traces(runs)
    resolver = _Resolver(_bases(SCORERS, CFG), CFG)
    scores = []
    for run in runs:
        for scorer in resolver.all_for(run.agent):
            pick = rng.random()
            if pick < 0.4:  # scored at the current version
                scores.append(make_score(run.id, scorer.name, scorer.stored_version, passed=True))
            elif pick < 0.55:  # at another version only
                scores.append(make_score(run.id, scorer.name, "0", passed=True))
    store.put_scores(scores)
    return store


@pytest.mark.parametrize("rescore", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 7, 200, 500])
def test_the_fast_plan_equals_the_protocols(
    scored: TraceStore, rescore: bool, chunk_size: int
) -> None:
    assert hasattr(scored, "run_keys") and hasattr(scored, "score_keys")
    for where in (
        RunFilter(),
        RunFilter(agent="billing"),
        RunFilter(start=T0 + timedelta(hours=20), end=T0 + timedelta(hours=150)),
        RunFilter(run_ids=["r00003", "r00004", "missing", "r00200"]),
    ):
        fast = plan(scored, where, rescore=rescore, chunk_size=chunk_size)
        slow = plan(ProtocolOnly(scored), where, rescore=rescore, chunk_size=chunk_size)
        assert fast == slow
        assert fast[0] or where.run_ids is not None  # something to plan


def test_score_keys_and_run_keys(scored: TraceStore) -> None:
    keys = scored.score_keys(["r00000", "r00001", "missing", "r00000"])  # type: ignore[attr-defined]
    assert set(keys) == {"r00000", "r00001"}
    for run_id, have in keys.items():
        assert have == {(s.scorer, s.version) for s in scored.get_scores(run_id)}
    assert scored.score_keys([]) == {}  # type: ignore[attr-defined]
    for newest_first in (True, False):
        want = [(r.id, r.agent) for r in scored.list_runs(newest_first=newest_first)]
        assert list(scored.run_keys(newest_first=newest_first)) == want  # type: ignore[attr-defined]
