"""Tables on an 80-, 100- or 120-column terminal: the run id is never cut (users copy it), the
status and the verdict always show, and the less important columns give way first (cut with
``…``, then left out); an over-long id is cut with ``…`` without pushing the other columns out."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _cli_process import cli_env
from agentlens.cli import _app, _util, app
from agentlens.cli._util import KEY_WHOLE, Column, fit_widths
from agentlens.model import Score, Trace
from agentlens.store import open_store

WIDTHS = [80, 100, 120]


def _agentlens(db: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "agentlens", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=cli_env(db.parent),
        cwd=db.parent,
        timeout=120,
        check=True,
    )
    return proc.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The demo's four runs (three flagged), with a verdict on two of them; and their rows."""
    db = tmp_path_factory.mktemp("layout") / "demo.db"
    _agentlens(db, "demo")
    rows = [json.loads(line) for line in _agentlens(db, "runs", "--json").splitlines()]
    flagged = [r["id"] for r in rows if r["hallucination_detected"]]
    _agentlens(db, "review", "verdict", flagged[0], "confirmed")
    _agentlens(db, "review", "verdict", flagged[1], "false_positive")
    return db, rows


def _at(width: int, db: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the command prints on a terminal ``width`` columns wide."""
    out = io.StringIO()
    console = _app.make_console(file=out, width=width, highlight=False, soft_wrap=True)
    monkeypatch.setattr(_util, "out_console", console)
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    lines = out.getvalue().splitlines()
    assert lines
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    return lines


def _row(lines: list[str], run_id: str) -> str:
    found = [line for line in lines if run_id in line.split()]
    assert len(found) == 1, f"{run_id} not whole in:\n" + "\n".join(lines)
    return found[0]


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_shows_the_id_status_and_verdict(
    demo: tuple[Path, list[dict[str, Any]]], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, rows = demo
    lines = _at(width, db, "runs", monkeypatch=monkeypatch)
    header = lines[0].split()
    assert {"id", "status", "verdict"} <= set(header)
    if width >= 80:
        assert "reason" in header
    for r in rows:
        line = _row(lines, r["id"])
        assert r["status"] in line.split()
        assert f" {r['verdict']}" in line  # flagged / passed: the verdict, not cut
    flagged = [r for r in rows if r["verdict"] == "flagged"]
    assert any("flagged: no_fabric" in _row(lines, r["id"]) for r in flagged)


def test_runs_piped_is_whole(demo: tuple[Path, list[dict[str, Any]]]) -> None:
    db, rows = demo
    lines = _agentlens(db, "runs").splitlines()
    assert lines[0].split("┃")[-1].strip() == "reason"
    for r in rows:
        line = _row(lines, r["id"])
        assert r["name"] in line and "…" not in line.split("│")[6]  # the verdict whole


@pytest.mark.parametrize("width", WIDTHS)
def test_the_review_queue_shows_whole_ids_and_the_reason(
    demo: tuple[Path, list[dict[str, Any]]], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, rows = demo
    lines = _at(width, db, "review", "queue", monkeypatch=monkeypatch)
    header = lines[0].split()
    assert "modes" in header and "reason" in header
    queued = [line for line in lines[2:] if line.strip()]
    flagged = {r["id"] for r in rows if r["hallucination_detected"]}
    assert len(queued) >= 1
    for line in queued:
        assert line.split()[0] in flagged  # the whole id, as `show` takes it


@pytest.mark.parametrize("width", WIDTHS)
def test_precision_numbers_are_never_cut(
    demo: tuple[Path, list[dict[str, Any]]], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = demo
    lines = _at(width, db, "review", "precision", monkeypatch=monkeypatch)
    header = [cell.strip() for cell in lines[0].split("┃")]
    assert header[2:] == ["confirmed", "false_positive", "precision", "95% interval"]
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.split("│")]
        assert all(re.fullmatch(r"\d+", cell) for cell in cells[2:4]), line
        assert re.fullmatch(r"\d+\.\d%", cells[4])
        assert re.fullmatch(r"\d+\.\d% - \d+\.\d%", cells[5])


@pytest.mark.parametrize("width", WIDTHS)
def test_score_shows_whole_ids_and_verdicts(
    demo: tuple[Path, list[dict[str, Any]]],
    width: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    db, rows = demo
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    lines = _at(width, copy, "score", "--rescore", monkeypatch=monkeypatch)
    ids = {r["id"] for r in rows}
    table = [line for line in lines[1:] if line[:1].strip() and not line.startswith("scored ")]
    assert table
    for line in table:
        run, _scorer, verdict, *_ = line.split()
        assert run in ids
        assert verdict in {"passed", "flagged", "unverifiable", "error"}


# -- ids longer than the terminal ---------------------------------------------------------------


@pytest.fixture
def long_ids(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "long.db"
    normal, long = "01M8ZBEFH6WXNQKRY8ZRAM7548", "L" * 200
    huge = "H" * 100_000
    store = open_store(f"sqlite:///{db}")
    try:
        store.put_traces(
            [
                Trace(id=i, agent="support", name="a run", input="q", output="fine")
                for i in (normal, long, huge)
            ]
        )
        store.put_scores(
            [
                Score(run_id=i, scorer="no_fabricated_refs", version="1", passed=True)
                for i in (
                    normal,
                    long,
                    huge,
                )
            ]
        )
    finally:
        store.close()
    return db, normal, long


@pytest.mark.parametrize("width", [*WIDTHS, 240])
def test_an_over_long_id_is_cut_with_an_ellipsis_and_nothing_else_is_lost(
    long_ids: tuple[Path, str, str], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, normal, _ = long_ids
    lines = _at(width, db, "runs", monkeypatch=monkeypatch)
    assert {"id", "status", "verdict"} <= set(lines[0].split())
    assert "ok" in _row(lines, normal).split()
    cut = [line for line in lines[2:] if line.startswith(("L", "H"))]
    assert len(cut) == 2
    for line in cut:
        first = line.split()[0]
        assert first.endswith("…") and len(first) >= KEY_WHOLE  # cut, and says so
        assert "ok" in line.split() and "passed (1)" in line
    assert "L" * 200 not in "\n".join(lines) or width >= 240


def test_an_over_long_id_is_whole_when_it_fits(
    long_ids: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _, long = long_ids
    lines = _at(320, db, "runs", "--agent", "support", monkeypatch=monkeypatch)
    assert any(line.split()[0] == long for line in lines[2:])


# -- the width rules themselves ------------------------------------------------------------------

_COLUMNS = [
    Column("id", key=True),
    Column("name", min=8, drop=1, grow=2),
    Column("status"),
    Column("verdict", min=12, grow=1),
]


def test_natural_widths_when_they_fit() -> None:
    assert fit_widths(_COLUMNS, [26, 20, 6, 30], 26 + 20 + 6 + 30 + 6) == [26, 20, 6, 30]


def test_the_shrinkable_columns_give_way_before_the_id() -> None:
    assert fit_widths(_COLUMNS, [26, 20, 6, 30], 70) == [26, 8, 6, 24]
    assert fit_widths(_COLUMNS, [26, 20, 6, 30], 50) == [26, None, 6, 14]  # name dropped


def test_the_id_is_cut_only_when_nothing_else_can_give() -> None:
    widths = fit_widths(_COLUMNS, [26, 20, 6, 30], 40)
    assert widths[1] is None and widths[2] == 6
    assert widths[0] is not None and widths[3] is not None
    assert widths[0] + widths[2] + widths[3] + 4 <= 40
    assert widths[0] >= 8


def test_a_huge_id_does_not_push_the_other_columns_out() -> None:
    widths = fit_widths(_COLUMNS, [100_000, 20, 6, 30], 120)
    assert widths[1:] == [8, 6, 12] or widths[1:] == [20, 6, 30]
    assert widths[0] is not None and sum(w or 0 for w in widths) + 6 <= 120


# -- a real terminal ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["runs"], ["review", "queue"]], ids=" ".join)
def test_on_a_real_80_column_terminal(
    demo: tuple[Path, list[dict[str, Any]]], command: list[str]
) -> None:
    db, rows = demo
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentlens", "--db", str(db), *command],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=cli_env(db.parent),
        cwd=db.parent,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the other end closed: the command is done
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r", "")
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80
    assert "reason" in lines[0].split()
    ids = {r["id"] for r in rows}
    body = [line.split()[0] for line in lines[2:]]
    assert body and set(body) <= ids
    if command == ["runs"]:
        assert {"status", "verdict"} <= set(lines[0].split())
        assert set(body) == ids
