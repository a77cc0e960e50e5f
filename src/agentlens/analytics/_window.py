"""Time windows over runs' start times, always in UTC: :class:`Window`, :func:`parse_time` and
:func:`resolve_window` (defined in :mod:`agentlens.model._time`, the one home of window parsing,
so that the CLI and the reading API below analytics use them too)."""

from agentlens.model._time import TimeRangeError, Window, parse_time, resolve_window

__all__ = ["TimeRangeError", "Window", "parse_time", "resolve_window"]
