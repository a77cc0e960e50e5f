"""Values no JSON store can hold as given (lone surrogates, huge integers) cost nothing but
themselves: captured into a real SQLite file, every run of the batch is stored and readable."""

from __future__ import annotations

from pathlib import Path

import agentlens
from agentlens.store import open_store


@agentlens.tool
def lookup(key: str) -> object:
    if key == "big":
        return {"balance": 10**5000}
    if key == "surrogate":
        return "caf\ud800 menu"
    return {"id": "CUST-1"}


def test_one_hostile_run_costs_only_its_bad_values(fresh_capture: None, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/agentlens.db"
    agentlens.configure(db=url)
    for i in range(20):
        with agentlens.run(agent="support", input=f"q{i}") as run:
            run.output = lookup("plain")["id"]  # type: ignore[index]
    with agentlens.run(agent="support\udfff", name="n\ud800", input="q\ud800") as bad:
        lookup("surrogate")
        bad.metadata["k\udc00"] = "v\udc00"
        bad.links["ticket"] = "T\ud800"
        bad.output = {"note\ud800": "x"}
        try:
            with bad.step("tool", "fails"):
                raise ValueError("broken \ud800 text")
        except ValueError:
            pass
    with agentlens.run(agent="support", input="big") as big:
        big.output = lookup("big")
    assert agentlens.flush(30)
    stats = agentlens.capture.stats()
    assert (stats.exported, stats.failed, stats.dropped) == (22, 0, 0)

    store = open_store(url)
    try:
        assert store.count_runs() == 22
        got = store.get_trace(bad.id)
        assert (got.agent, got.name, got.input) == ("support\ufffd", "n\ufffd", "q\ufffd")
        assert got.steps[0].output == "caf\ufffd menu"
        assert got.metadata == {"k\ufffd": "v\ufffd"}
        assert got.links == {"ticket": "T\ufffd"}
        assert got.output == {"note\ufffd": "x"}
        assert got.steps[1].error["message"] == "broken \ufffd text"
        huge = store.get_trace(big.id)
        marked = {"type": "int", "repr": "1" + "0" * 5000}
        assert huge.output == {"balance": marked}
        assert huge.steps[0].output == {"balance": marked}
    finally:
        store.close()
