"""``rate --by``'s table on a narrow terminal: the counts stay whole, a long group name is cut
with ``…`` first, then the chart is left out."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlens.cli import _app, _util, app
from agentlens.model import Score, Step, StepKind, Trace, Verdict
from agentlens.store import open_store

LONG = "support-agent-for-the-european-billing-region-v2"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "rates.db"
    now = datetime.now(UTC)
    runs = [
        Trace(id=f"r{i}", agent=LONG if i % 2 else "short", started_at=now - timedelta(days=i),
              output="x", steps=[Step(id="s1", kind=StepKind.TOOL, output="x")])
        for i in range(4)
    ]  # fmt: skip
    with open_store(f"sqlite:///{path}") as store:  # type: ignore[attr-defined]
        store.put_traces(runs)
        store.put_scores(
            [Score(run_id=r.id, scorer="s", version="1", passed=i % 2 == 0, value=1.0,
                   verdict=Verdict.PASSED if i % 2 == 0 else Verdict.FLAGGED)
             for i, r in enumerate(runs)]
        )  # fmt: skip
    return path


def _table(width: int, db: Path, by: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    out = io.StringIO()
    console = _app.make_console(file=out, width=width, highlight=False, soft_wrap=True)
    monkeypatch.setattr(_util, "out_console", console)
    result = CliRunner().invoke(app, ["--db", str(db), "rate", "--by", by, "--scorer", "s"])
    assert result.exit_code == 0, result.output
    lines = out.getvalue().splitlines()
    assert lines and max(len(line) for line in lines) <= width, "\n".join(lines)
    return lines


@pytest.mark.parametrize("width", [80, 100])
def test_long_agent_names_are_cut_not_the_counts(
    db: Path, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    head, *rows = _table(width, db, "agent", monkeypatch)
    assert head.split() == ["agent", "runs", "scored", "flagged", "rate", "95%", "CI", "apart"]
    [long_row] = [r for r in rows if r.startswith("support-agent")]
    assert long_row.split()[1:5] == ["2", "2", "2", "100.0%"]
    assert ("…" in long_row) == (len(LONG) + 50 > width)


def test_the_chart_goes_before_the_counts(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wide = _table(120, db, "day", monkeypatch)
    assert "─" in wide[0] and any("●" in r for r in wide[1:])
    narrow = _table(60, db, "day", monkeypatch)
    assert narrow[0].split() == ["day", "runs", "scored", "flagged", "rate", "95%", "CI", "apart"]
    assert not any("●" in r for r in narrow)
