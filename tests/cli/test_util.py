"""Time windows for ``--since`` / ``--from`` / ``--to``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentlens.cli._util import parse_duration, parse_time, preview, time_window
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
    assert time_window(None, None, None, now=NOW) == (None, None)
    assert time_window("7d", None, None, now=NOW) == (NOW - timedelta(days=7), None)
    assert time_window("2026-03-01", None, None, now=NOW) == (
        datetime(2026, 3, 1, tzinfo=UTC),
        None,
    )
    assert time_window(None, "2026-03-01", "2026-03-02", now=NOW) == (
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 3, 2, tzinfo=UTC),
    )
    assert time_window("1d", None, "2026-03-10T13:00:00Z", now=NOW)[1] == datetime(
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
