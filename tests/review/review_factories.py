"""Runs for the review tests (imported by name: tests/review is on sys.path)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from agentlens.model import Step, Trace


def fabricated(
    run_id: str = "r1",
    *,
    agent: str = "support",
    order: str = "ORD-9999",
    links: dict[str, str] | None = None,
) -> Trace:
    """A run whose answer cites ``order`` where the tool returned ORD-1234 (flagged unless
    ``order`` is ORD-1234)."""
    return Trace(
        id=run_id,
        agent=agent,
        name=f"answer {run_id}",
        input="where is my order ORD-1234?",
        output=f"Your order {order} ships on 2026-03-04.",
        links={"blog_post": "123"} if links is None else links,
        steps=[
            Step(
                id="s1",
                kind="tool",
                name="get_order",
                input={"id": "ORD-1234"},
                output={"order": "ORD-1234", "ships": "2026-03-04"},
            ),
        ],
    )


@dataclass
class Receiver:
    """A webhook receiver on a loopback socket: fails ``fail_first`` requests with 500, then
    accepts; records every request (headers and raw body)."""

    url: str
    fail_first: int = 0
    hang_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(r["body"]) for r in self.accepted]
