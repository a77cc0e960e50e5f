"""Time windows for ``--since`` / ``--from`` / ``--to``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import typer

from agentlens.analytics import Window
from agentlens.cli._util import json_line, parse_duration, parse_time, preview, time_window
from agentlens.errors import ConfigError

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("90m", timedelta(minutes=90)),
        ("36h", timedelta(hours=36)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5d", timedelta(hours=36)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "7x", "0d", "-1d", "7d ago", "1h 30", "week"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="bad duration"):
        parse_duration(text)


def test_parse_time_is_utc() -> None:
    assert parse_time("2026-03-01") == datetime(2026, 3, 1, tzinfo=UTC)
    assert parse_time("2026-03-01T10:00:00Z") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert parse_time("2026-03-01T10:00:00+02:00") == datetime(2026, 3, 1, 8, tzinfo=UTC)
    assert parse_time("2026-03-01T10:00") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    with pytest.raises(ConfigError, match="bad --to 'noon'"):
        parse_time("noon", "--to")


def test_time_window() -> None:
    """The window options become the one :class:`~agentlens.analytics.Window`."""
    assert time_window(None, None, None, now=NOW) == Window(None, None)
    assert time_window("7d", None, None, now=NOW) == Window(NOW - timedelta(days=7), None)
    assert time_window("2026-03-01", None, None, now=NOW) == Window(
        datetime(2026, 3, 1, tzinfo=UTC), None
    )
    lower, upper = time_window(None, "2026-03-01", "2026-03-02", now=NOW)
    assert (lower, upper) == (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
    assert time_window("1d", None, "2026-03-10T13:00:00Z", now=NOW).end == datetime(
        2026, 3, 10, 13, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("since", "start", "end", "message"),
    [
        ("7d", "2026-03-01", None, "give --since or --from, not both"),
        ("7 parsecs", None, None, "bad --since '7 parsecs'"),
        (None, "2026-03-02", "2026-03-01", "empty time window"),
        (None, "2026-03-02", "2026-03-02", "empty time window"),
    ],
)
def test_time_window_errors(
    since: str | None, start: str | None, end: str | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        time_window(since, start, end, now=NOW)


def test_preview() -> None:
    assert preview(None) == ""
    assert preview("a\n  b") == "a b"
    assert preview({"k": [1, 2]}) == '{"k": [1, 2]}'
    assert preview("x" * 100, 10) == "x" * 9 + "…"
    assert len(preview({"deep": "y" * 500}, 40)) == 40


def test_json_output_never_carries_what_a_terminal_acts_on() -> None:
    text = json_line({"reason": "ORD-1\u202e9\x9b[2J\x7f é"})
    assert text == '{"reason": "ORD-1\\u202e9\\u009b[2J\\u007f é"}'
    assert json_line({"a": "é"}, ensure_ascii=True) == '{"a": "\\u00e9"}'


def test_every_command_is_registered_through_command() -> None:
    """Each command's body runs under the one error mapping (``@command``), with nothing of
    the boilerplate written again in a command module."""
    import re
    from pathlib import Path

    from agentlens import cli
    from agentlens.cli._app import app

    def commands(group: typer.Typer) -> list[object]:
        found = [c.callback for c in group.registered_commands]
        for sub in group.registered_groups:
            assert sub.typer_instance is not None
            found += commands(sub.typer_instance)
        return found

    registered = commands(app)
    assert len(registered) >= 20
    for callback in registered:
        assert getattr(callback, "__wrapped__", None) is not None, callback
        assert callback.__code__ is command_wrapper_code(), callback
    for path in Path(cli.__file__).parent.glob("_*.py"):
        if path.name in {"_util.py", "_app.py", "__init__.py"}:
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\.command\(|user_errors|state\.open_store|\.close\(\)", text), path


def command_wrapper_code() -> object:
    from agentlens.cli._app import app
    from agentlens.cli._util import command

    probe = typer.Typer()
    wrapped = command(probe)(lambda: None)
    del app
    return wrapped.__code__
