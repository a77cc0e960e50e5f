"""Time windows over runs' start times, always in UTC."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agentlens.errors import ConfigError

__all__ = ["Window", "parse_time", "resolve_window"]


def parse_time(text: str, *, label: str = "time") -> datetime:
    """Parse an ISO 8601 date or time; a value without an offset is UTC.

    Raises:
        ConfigError: not an ISO 8601 date or date-time.
    """
    raw = text.strip()
    try:
        value = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise ConfigError(
            f"bad {label} {text!r}: use ISO 8601, e.g. 2026-03-01 or 2026-03-01T12:00:00Z"
        ) from None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


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

    def preceding(self, length: timedelta) -> Window:
        """The window of ``length`` that ends where this one starts (a baseline).

        Raises:
            ConfigError: this window has no start.
        """
        if self.start is None:
            raise ConfigError("a baseline needs a current window with a start")
        return Window(self.start - length, self.start)

    def label(self) -> str:
        """A short human form: ``2026-03-01 10:00 → 2026-03-08 10:00 UTC``."""

        def fmt(t: datetime | None) -> str:
            return "…" if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M")

        return f"{fmt(self.start)} → {fmt(self.end)} UTC"


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
        if since_hours <= 0:
            raise ConfigError(f"since_hours must be positive, got {since_hours}")
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
        return parse_time(value, label=label)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
