"""Times and windows a user gives: one parser of times (:func:`parse_time`), of durations
(:func:`parse_duration`) and of "since" values (:func:`parse_since`), one :class:`Window` with its
label and baseline arithmetic, one :func:`resolve_window` for the window options, used by the
CLI, the gate, the server's query parameters and the rate functions
(``agentlens.analytics.Window`` is this class)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agentlens.errors import ConfigError
from agentlens.model._trace import utc

__all__ = [
    "TimeRangeError",
    "Window",
    "parse_duration",
    "parse_since",
    "parse_time",
    "resolve_window",
]


class TimeRangeError(ConfigError):
    """A duration or time that is well-formed but outside what a window can hold (before the
    year 1, after 9999). ``reason`` says why, without the value."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MAX_SECONDS = 9999 * 366 * 86400.0
"""No window is longer than the years 1 to 9999 (and no :class:`timedelta` longer than that
overflows)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """Parse a duration such as ``7d``, ``36h``, ``90m``, ``2w`` or ``1h30m``.

    Units: ``s`` seconds, ``m`` minutes, ``h`` hours, ``d`` days, ``w`` weeks.

    Raises:
        ConfigError: the text is not a duration.
    """
    cleaned = text.strip()
    pos = 0
    seconds = 0.0
    for match in _DURATION.finditer(cleaned):
        if match.start() != pos and cleaned[pos : match.start()].strip():
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2).lower()]
        pos = match.end()
    if not cleaned or pos != len(cleaned) or seconds <= 0:
        raise ConfigError(
            f"bad duration {text!r}: use a number and a unit, e.g. 30m, 36h, 7d, 2w or 1h30m"
        )
    if seconds >= _MAX_SECONDS:
        reason = "longer than the 9,999 years a window can span"
        raise TimeRangeError(f"bad duration {text!r}: {reason}", reason)
    return timedelta(seconds=seconds)


def parse_time(text: str, option: str = "time") -> datetime:
    """Parse an ISO 8601 date or time; a time without an offset is UTC. Returns UTC.

    The one parser of times a user types: the CLI's ``--from``/``--to``/``--since``, the rate
    functions' ``start``/``end``.

    Raises:
        ConfigError: the text is not an ISO date or time (the message names ``option``);
            :class:`TimeRangeError` when its offset takes it out of range.
    """
    cleaned = text.strip()
    if cleaned.endswith(("z", "Z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ConfigError(
            f"bad {option} {text!r}: use an ISO 8601 date or time, "
            "e.g. 2026-11-29 or 2026-11-29T10:00:00Z"
        ) from None
    try:
        return utc(parsed)
    except ValueError as exc:  # its offset takes it out of range
        raise TimeRangeError(f"bad {option} {text!r}: {exc}", str(exc)) from None


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open time window ``start <= started_at < end`` over runs' start times (UTC).

    ``None`` on either side leaves that side open.
    """

    start: datetime | None
    end: datetime | None

    @property
    def duration(self) -> timedelta | None:
        """The window's length, when both sides are closed."""
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    def preceding(self, length: timedelta, option: str = "the baseline") -> Window:
        """The window of ``length`` that ends where this one starts (a baseline).

        Raises:
            ConfigError: this window has no start, or the baseline would start before the
                year 1 (the message names ``option``).
        """
        if self.start is None:
            raise ConfigError(f"{option} needs a current window with a start")
        try:
            return Window(self.start - length, self.start)
        except OverflowError:
            raise ConfigError(
                f"{option}: the baseline would start before the year 1; use a shorter duration"
            ) from None

    def label(self, open_start: str = "the first run", open_end: str = "now") -> str:
        """A short human form: ``2026-03-01 10:00 → 2026-03-08 10:00 UTC``; an open side reads
        ``open_start`` / ``open_end``."""

        def fmt(t: datetime | None, open_as: str) -> str:
            return open_as if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M")

        return f"{fmt(self.start, open_start)} → {fmt(self.end, open_end)} UTC"

    def __iter__(self) -> Iterator[datetime | None]:
        """``start, end = window``."""
        return iter((self.start, self.end))


def parse_since(since: str, option: str, now: datetime) -> datetime:
    """A start time given as a duration back from ``now`` (``7d``, ``1h30m``) or an ISO date or
    time: the CLI's ``--since`` and the server's ``since``; messages name ``option``.

    Raises:
        ConfigError: neither, or out of range (:class:`TimeRangeError`).
    """
    try:
        length = parse_duration(since)
    except TimeRangeError as exc:
        raise ConfigError(f"bad {option} {since!r}: {exc.reason}") from None
    except ConfigError:
        try:
            return parse_time(since, option)
        except TimeRangeError:
            raise
        except ConfigError:
            raise ConfigError(
                f"bad {option} {since!r}: use a duration (30m, 36h, 7d, 2w) "
                "or an ISO date or time (2026-11-29, 2026-11-29T10:00:00Z)"
            ) from None
    try:
        return now - length
    except OverflowError:
        raise ConfigError(
            f"bad {option} {since!r}: it reaches back before the year 1; use a shorter duration"
        ) from None


def resolve_window(
    *,
    since: timedelta | None = None,
    since_hours: float | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    default_since: timedelta | None = None,
    now: datetime | None = None,
) -> Window:
    """Turn the window options into a :class:`Window`.

    ``since`` (or ``since_hours``) counts back from ``end`` (default: now) and cannot be combined
    with ``start``. With none of them, ``default_since`` applies; ``None`` leaves the start open.

    Raises:
        ConfigError: conflicting options, a bad duration or time, or ``start >= end``.
    """
    if since is not None and since_hours is not None:
        raise ConfigError("give since or since_hours, not both")
    if (since is not None or since_hours is not None) and start is not None:
        raise ConfigError("give since_hours (or since) or start, not both")
    end_t = _as_time(end, "end") if end is not None else None
    start_t = _as_time(start, "start") if start is not None else None
    length: timedelta | None
    if since is not None:
        if since <= timedelta(0):
            raise ConfigError(f"the window length must be positive, got {since}")
        length = since
    elif since_hours is not None:
        if isinstance(since_hours, bool) or not isinstance(since_hours, int | float):
            raise ConfigError(f"since_hours must be a positive number, got {since_hours!r}")
        if not since_hours > 0:  # NaN too
            raise ConfigError(f"since_hours must be a positive number, got {since_hours!r}")
        try:
            length = timedelta(hours=since_hours)
        except OverflowError:
            raise ConfigError(
                f"since_hours={since_hours!r} is longer than any window can be"
            ) from None
    elif start_t is None:
        length = default_since
    else:
        length = None
    if length is not None:
        end_t = end_t or (now or datetime.now(UTC)).astimezone(UTC)
        try:
            start_t = end_t - length
        except OverflowError:
            raise ConfigError(
                f"the window of {length} reaches back before the year 1; give a shorter one"
            ) from None
    if start_t is not None and end_t is not None and start_t >= end_t:
        raise ConfigError(
            f"the window is empty: start {start_t:%Y-%m-%dT%H:%M:%SZ} is not before "
            f"end {end_t:%Y-%m-%dT%H:%M:%SZ}"
        )
    return Window(start_t, end_t)


def _as_time(value: datetime | str, label: str) -> datetime:
    if isinstance(value, str):
        return parse_time(value, label)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
