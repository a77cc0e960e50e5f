"""Text in PostgreSQL: the escape of values PostgreSQL's ``text`` cannot hold (a NUL)."""

from __future__ import annotations

__all__ = ["dec", "enc"]


def enc(value: str | None) -> str | None:
    """A string as PostgreSQL text: unchanged unless it holds NUL or starts with ``\\x01``."""
    if value is None or ("\x00" not in value and not value.startswith("\x01")):
        return value
    return "\x01" + value.replace("\x01", "\x01\x01").replace("\x00", "\x01\x02")


def dec(value: str | None) -> str | None:
    """The inverse of :func:`enc`."""
    if value is None or not value.startswith("\x01"):
        return value
    out: list[str] = []
    i, n = 1, len(value)
    while i < n:
        c = value[i]
        if c == "\x01" and i + 1 < n:
            out.append("\x00" if value[i + 1] == "\x02" else "\x01")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
