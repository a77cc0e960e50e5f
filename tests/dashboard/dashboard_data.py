"""Runs for the dashboard tests (imported by name: tests/dashboard is on sys.path): ordinary
runs of two projects, flagged ones, a loop with token and cost figures, a truncated output,
and runs whose every untrusted field carries an XSS payload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentlens.model import Step, Trace

NOW = datetime.now(UTC).replace(microsecond=0)

XSS = [
    "<script>alert('xss-script')</script>",
    "<img src=x onerror=alert('xss-img')>",
    "javascript:alert('xss-js')",
    "</textarea><script>alert('xss-textarea')</script>",
    "\"><svg onload=alert('xss-svg')>",
    "</pre><iframe src=javascript:alert('xss-iframe')></iframe>",
]
"""Payloads that would run (and open a dialog) if any page rendered them as markup."""


def _at(minutes_ago: float) -> datetime:
    return NOW - timedelta(minutes=minutes_ago)


def fabricated(
    run_id: str,
    *,
    agent: str = "support",
    project: str = "default",
    minutes_ago: float = 10,
    order: str = "ORD-1243",
    release: str = "v1",
    links: dict[str, str] | None = None,
) -> Trace:
    """A run whose answer cites ``order`` where the tool returned ORD-1234: flagged (a
    fabricated reference; its closest evidence is ORD-1234 in step s1) unless ``order`` is
    ORD-1234."""
    return Trace(
        id=run_id,
        project=project,
        agent=agent,
        name=f"answer {run_id}",
        started_at=_at(minutes_ago),
        ended_at=_at(minutes_ago - 0.5),
        input="where is my order?",
        output=f"Your order {order} ships on 2026-03-04.",
        metadata={"release": release},
        links={"blog_post": f"post-{run_id}"} if links is None else links,
        steps=[
            Step(id="s0", kind="user", output="where is my order?"),
            Step(
                id="s1",
                kind="tool",
                name="get_order",
                input={"id": "ORD-1234"},
                output={"order": "ORD-1234", "ships": "2026-03-04", "note": "x" * 40},
                attributes={"duration_ms": 120},
            ),
            Step(
                id="s2",
                kind="llm",
                name="chat",
                parent_id=None,
                input=[{"role": "user", "content": "where is my order?"}],
                output=f"Your order {order} ships on 2026-03-04.",
                attributes={
                    "model": "gpt-4o",
                    "input_tokens": 120,
                    "output_tokens": 30,
                    "cost_usd": 0.0021,
                },
            ),
        ],
    )


def looping(run_id: str, *, project: str = "default", minutes_ago: float = 20) -> Trace:
    """A run that calls the same tool with the same arguments five times (a repeated call),
    each call after an llm turn with tokens and cost; one output truncated."""
    steps: list[Step] = [Step(id="u", kind="user", output="find the invoice INV-1")]
    for i in range(5):
        steps.append(
            Step(id=f"l{i}", kind="llm", name="chat", output="calling search",
                 attributes={"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001})
        )  # fmt: skip
        steps.append(
            Step(id=f"t{i}", kind="tool", name="search", input={"q": "INV-1"},
                 output={"hits": ["INV-1 paid"], "page": "y" * 2000},
                 attributes={"truncated": i == 4})
        )  # fmt: skip
    return Trace(
        id=run_id, project=project, agent="researcher", name="find invoice",
        started_at=_at(minutes_ago), ended_at=_at(minutes_ago - 1),
        input="find the invoice INV-1", output="INV-1 is paid.", metadata={"release": "v2"},
        steps=steps,
    )  # fmt: skip


def hostile(run_id: str, payload: str, *, minutes_ago: float = 5) -> Trace:
    """A flagged run with ``payload`` in its output, tool result, agent name, name, step names,
    link kind and id, metadata keys and values, error and attributes."""
    return Trace(
        id=run_id,
        agent=f"agent {payload}",
        name=payload,
        started_at=_at(minutes_ago),
        ended_at=_at(minutes_ago - 0.1),
        input=payload,
        output=f"Order ORD-6666 {payload} and see {payload}",
        metadata={"release": payload, payload: payload, "url": "javascript:alert('meta')"},
        links={f"k{payload[:20]}": payload, "url": "javascript:alert('link')"},
        steps=[
            Step(
                id="s1",
                kind="tool",
                name=payload,
                input={payload: payload},
                output={"result": payload, "order": "ORD-1234"},
                error=payload,
                attributes={"model": payload, "note": payload},
            )
        ],
    )


def history() -> list[Trace]:
    """Two runs a day 8 to 20 days ago (before the runs page's default window, and the trend
    comparison's baseline window), one of them flagged every other day."""
    out = []
    for day in range(8, 21):
        for k, agent in enumerate(("support", "billing")):
            flagged = k == 0 and day % 2 == 0
            out.append(
                fabricated(
                    f"old-{day:02d}-{k}", agent=agent, minutes_ago=day * 1440 + 60 * k,
                    order="ORD-1243" if flagged else "ORD-1234", release="v0",
                )
            )  # fmt: skip
    return out


def store_with_runs(url: str, *, review: bool = True) -> Any:
    """A store at ``url`` with the runs above, reviewed (scored and flagged)."""
    from agentlens.review import review_pending
    from agentlens.store import open_store

    store = open_store(url)
    traces = [
        fabricated("run-flagged-1", minutes_ago=30),
        fabricated("run-flagged-2", agent="billing", minutes_ago=25, release="v2"),
        fabricated("run-clean-1", order="ORD-1234", minutes_ago=40),
        fabricated("run-clean-2", agent="billing", order="ORD-1234", minutes_ago=45),
        looping("run-loop-1"),
        fabricated("other-flagged", project="other", minutes_ago=15),
    ]
    traces += [hostile(f"xss-{i}", p, minutes_ago=5 + i) for i, p in enumerate(XSS)]
    traces += history()
    store.put_traces(traces)
    if review:
        review_pending(store)
    return store
