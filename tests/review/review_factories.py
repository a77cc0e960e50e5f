"""Runs for the review tests (imported by name: tests/review is on sys.path)."""

from __future__ import annotations

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
