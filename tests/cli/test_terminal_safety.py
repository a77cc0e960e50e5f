"""What ``show`` and ``runs`` print from a trace never drives the terminal: control characters
(escape sequences, OSC 52 clipboard writes, carriage returns, bidi overrides) are printed as
visible escapes; a huge answer is cut with a note."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from typer.testing import Result

from agentlens.cli._util import preview, visible
from agentlens.model import Finding, Score, ScoreResult, Step, StepKind, Trace
from agentlens.store import open_store

Invoke = Callable[..., Result]
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
HOSTILE = f"a{CLEAR}b{CLIPBOARD}c\rd\x9b31m\u202ee\x00"
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _seed(db_url: str, output: str = f"Answer {HOSTILE} CUST-1 end") -> None:
    trace = Trace(
        id=f"run{CLEAR}",
        agent=f"agent{CLIPBOARD}",
        name=f"name{HOSTILE}",
        input=f"question {HOSTILE}",
        output=output,
        metadata={"k": HOSTILE},
        links={"ticket": HOSTILE},
        steps=[
            Step(
                id=f"s1{CLEAR}",
                kind=StepKind.TOOL,
                name=f"tool{CLEAR}",
                input={"q": HOSTILE},
                output=HOSTILE,
                error=HOSTILE,
            )
        ],
    )
    start = output.find("CUST-1")
    finding = Finding(
        failure_mode="fabricated_grounding",
        text="CUST-1",
        start=start,
        end=start + 6,
        detail=f"detail {HOSTILE}",
        location="output",
    )
    result = ScoreResult(passed=False, detail=f"d {HOSTILE}", findings=[finding])
    store = open_store(db_url)
    try:
        store.put_traces([trace])
        store.put_scores(
            [Score.of(result, run_id=trace.id, scorer="no_fabricated_refs", version="1")]
        )
    finally:
        store.close()


@pytest.mark.parametrize(
    "args", [["runs"], ["show", f"run{CLEAR}"], ["show", f"run{CLEAR}", "--json"]]
)
def test_no_control_character_from_a_trace_reaches_the_terminal(
    cli: Invoke, db_url: str, args: list[str]
) -> None:
    _seed(db_url)
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert _RAW.search(result.stdout) is None, repr(result.stdout[:400])
    if "--json" in args:
        assert json.loads(result.stdout)["output"].startswith(f"Answer {HOSTILE}")
    else:
        assert "\\x1b" in result.stdout


def test_the_answer_stays_highlighted_where_the_finding_is(cli: Invoke, db_url: str) -> None:
    _seed(db_url)
    out = cli("show", f"run{CLEAR}").stdout
    assert "»CUST-1«" in out
    assert "Answer a\\x1b[2Jb" in out


def test_a_huge_answer_is_cut_with_a_note(cli: Invoke, db_url: str) -> None:
    _seed(db_url, output="word " * 200_000 + "CUST-1")
    cut = cli("show", f"run{CLEAR}")
    assert cut.exit_code == 0
    assert len(cut.stdout) < 60_000
    assert "--full" in cut.stdout and "20,000 of 1,000,006 characters" in cut.stdout
    whole = cli("show", f"run{CLEAR}", "--full")
    assert len(whole.stdout) > 1_000_000


def test_visible_and_preview() -> None:
    assert visible("a\x1bb\nc\td") == "a\\x1bb\nc\td"
    assert visible("a\nb\tc", lines=False) == "a b c"
    assert visible("\u202eabc\x85") == "\\u202eabc\\x85"
    assert visible("plain é ✓") == "plain é ✓"
    assert _RAW.search(preview({"k": HOSTILE * 50}, 60)) is None
