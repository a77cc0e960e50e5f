"""The judge's rules (its ``prompt_version``) are part of a judged scorer's stored version."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentlens.config import Settings
from agentlens.errors import ScorerError
from agentlens.eval import ScoreResult, get_scorer, resolve_scorer, scorer
from agentlens.eval._runner import score_runs
from agentlens.eval._scorer import Bound
from agentlens.eval.judges import JudgeUsage, OfflineJudge
from agentlens.eval.judges._protocol import ClaimVerdict, Label
from agentlens.model import Score, Step, Trace
from agentlens.store import open_store

ROOT = Path(__file__).resolve().parents[3]
CFG = Settings()
DEFAULT = "1+offline-6"
"""``faithful_synthesis`` with the default (offline) judge: documented in docs/judges.md."""


def _trace(output: str = "Order 12 shipped on May 3.") -> Trace:
    step = Step(id="s1", kind="tool", name="get_order", output={"order_id": 12, "on": "May 3"})
    return Trace(input="Where is order 12?", output=output, steps=[step])


class NoRules:
    """A custom judge without a ``prompt_version``: everything is supported."""

    name = "mine"
    model = "v0"
    usage = JudgeUsage()

    async def judge(self, *, claims: Sequence[Any], evidence: Any) -> list[ClaimVerdict]:
        return [ClaimVerdict(Label.SUPPORTED, 1.0, "ok", claim=c, judge="mine/v0") for c in claims]


def test_the_default_judge_gives_a_stable_documented_version() -> None:
    assert OfflineJudge.prompt_version == "offline-6"
    assert resolve_scorer("faithful_synthesis", None, CFG).stored_version == DEFAULT
    assert get_scorer("faithful_synthesis").stored_version == DEFAULT  # bound without settings
    assert get_scorer("faithful_synthesis").with_options(judge="offline").stored_version == DEFAULT
    # the documentation says which version a default store holds
    assert f"`{DEFAULT}`" in (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")
    # the deterministic half of parametric_leakage uses no judge: its version is unchanged
    assert resolve_scorer("parametric_leakage", None, CFG).stored_version == "5"


def test_each_judge_names_its_rules_and_keeps_the_hash_of_before() -> None:
    synthesis = get_scorer("faithful_synthesis")
    # the hashes are those that the previous release stored without the rules
    assert synthesis.with_options(mode="strict").stored_version == "1+offline-6+425a1c54"
    assert synthesis.with_options(judge="openai", model="m1").stored_version == "1+llm-1+e2fbda8a"
    leakage = get_scorer("parametric_leakage").with_options(judge="offline")
    assert leakage.stored_version == "5+offline-6+fdc99cbe"


def test_a_judge_whose_rules_differ_gives_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {
        name: resolve_scorer(get_scorer(name).with_options(**opts), None, CFG).stored_version
        for name, opts in (("faithful_synthesis", {}), ("parametric_leakage", {"judge": "offline"}))
    }
    monkeypatch.setattr(OfflineJudge, "prompt_version", "offline-7")
    after = {
        name: resolve_scorer(get_scorer(name).with_options(**opts), None, CFG).stored_version
        for name, opts in (("faithful_synthesis", {}), ("parametric_leakage", {"judge": "offline"}))
    }
    assert after == {
        "faithful_synthesis": "1+offline-7",
        "parametric_leakage": "5+offline-7+fdc99cbe",
    }
    assert all(before[k] != after[k] for k in before)
    # a judge object given in code: its own rules
    other = OfflineJudge()
    other.prompt_version = "offline-8"  # type: ignore[misc]
    assert get_scorer("faithful_synthesis").with_options(judge=other).stored_version == (
        "1+offline-8"
    )


def test_the_same_judge_gives_the_same_version_in_a_new_process() -> None:
    code = (
        "import json\n"
        "from agentlens.config import Settings\n"
        "from agentlens.eval import get_scorer, resolve_scorer\n"
        "s = get_scorer('faithful_synthesis')\n"
        "print(json.dumps([resolve_scorer('faithful_synthesis', None, Settings()).stored_version,"
        " s.with_options(mode='lenient').stored_version,"
        " s.with_options(judge='openai', model='m1').stored_version,"
        " get_scorer('parametric_leakage').with_options(judge='offline').stored_version]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env = {k: v for k, v in env.items() if not k.startswith("AGENTLENS_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    s = get_scorer("faithful_synthesis")
    here = [
        resolve_scorer("faithful_synthesis", None, CFG).stored_version,
        s.with_options(mode="lenient").stored_version,
        s.with_options(judge="openai", model="m1").stored_version,
        get_scorer("parametric_leakage").with_options(judge="offline").stored_version,
    ]
    assert json.loads(out.stdout) == here


def test_a_custom_judge_without_rules_still_works() -> None:
    bound = get_scorer("faithful_synthesis").with_options(judge=NoRules())
    # its identity only, as before: the version the previous release stored for it
    assert bound.stored_version == "1+" + _hash({"judge": "mine", "model": "v0"})
    result = bound.score(_trace())
    assert result.passed and result.attributes["prompt_version"] is None


def test_rules_that_are_not_a_plain_token_are_hashed() -> None:
    odd = OfflineJudge()
    odd.prompt_version = "my rules, v2"  # type: ignore[misc]
    version = get_scorer("faithful_synthesis").with_options(judge=odd).stored_version
    assert version == "1+" + _hash({"prompt_version": "my rules, v2"})


def test_a_factory_cannot_tag_its_version_with_anything() -> None:
    @scorer(name="t_tagged", version="1", register=False)
    def tagged(*, tag: str = "ok-1") -> Bound:
        return Bound(lambda *, trace: ScoreResult(passed=True), {}, version_tag=tag)

    assert tagged().stored_version == "1+ok-1"
    with pytest.raises(ScorerError, match="version tag"):
        tagged(tag="a b")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    s = open_store(f"sqlite:///{tmp_path / 'judged.db'}")
    yield s
    s.close()


def test_score_runs_rescores_what_an_older_judge_scored(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, current = _trace(), _trace("Order 12 shipped on May 3. It is in Lyon.")
    store.put_traces([old, current])
    # a store of the previous release: "1" was the offline-5 judge's; and one at today's version
    store.put_scores(
        [
            Score.of(
                ScoreResult(passed=True), run_id=old.id, scorer="faithful_synthesis", version="1"
            ),
            Score.of(
                ScoreResult(passed=True),
                run_id=current.id,
                scorer="faithful_synthesis",
                version=DEFAULT,
            ),
        ]
    )
    first = score_runs(store, ["faithful_synthesis"], settings=CFG)
    assert (first.scores_written, first.skipped) == (1, 1)
    assert {s.version for s in store.get_scores(old.id)} == {"1", DEFAULT}
    assert [s.version for s in store.get_scores(current.id)] == [DEFAULT]
    assert score_runs(store, ["faithful_synthesis"], settings=CFG).scores_written == 0
    # the judge's rules change: every judged run is scored again, the old results stay
    monkeypatch.setattr(OfflineJudge, "prompt_version", "offline-7")
    again = score_runs(store, ["faithful_synthesis"], settings=CFG)
    assert (again.scores_written, again.skipped) == (2, 0)
    assert {s.version for s in store.get_scores(current.id)} == {DEFAULT, "1+offline-7"}


def test_workers_store_the_parents_version(store: Any) -> None:
    runs = [_trace(o) for o in ("Order 12 shipped on May 3.", "It is in Lyon.") * 3]
    store.put_traces(runs)
    summary = score_runs(store, ["faithful_synthesis"], settings=CFG, workers=2, chunk_size=2)
    assert summary.scores_written == 6  # a worker's other version would be refused
    versions = {s.version for r in store.list_runs() for s in store.get_scores(r.id)}
    assert versions == {DEFAULT}


def _hash(material: dict[str, Any]) -> str:
    blob = json.dumps(material, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:8]
