"""Run and step ids: sortable by time, like ULIDs.

A run id is 26 characters of Crockford base32: 48 bits of milliseconds since the epoch, then 80
random bits, so ids sort by creation time and never collide in practice.
"""

from __future__ import annotations

import os
import time

__all__ = ["new_id", "new_step_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(now_ms: int | None = None, *, entropy: bytes | None = None) -> str:
    """Return a time-sortable 26-character id (ULID layout).

    Args:
        now_ms: the time part, in milliseconds since the epoch (default: now).
        entropy: the 10 bytes of the random part (default: random); give a digest of the source
            for ids that are the same every time the same source is read.
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10) if entropy is None else entropy[:10], "big")
    return _encode(ms, 10) + _encode(rand, 16)


def new_step_id() -> str:
    """Return a short random step id, unique within any realistic run."""
    return "s" + os.urandom(6).hex()
