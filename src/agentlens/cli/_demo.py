"""``agentlens demo``: record a few realistic support-agent runs, score them, show the rate.

The runs go through the real capture SDK (decorated tools returning JSON records, a scripted
model standing in for the LLM, no network) into the configured store, then through the
configured default scorers. Each run gets a fresh id, so the demo can be run again and again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentlens.cli._app import app, err_console, fail, out_console, state
from agentlens.cli._util import command, command_store

__all__ = ["DEMO_AGENT", "demo"]

DEMO_AGENT = "support-demo"
"""The agent role of the demo runs (``agentlens runs --agent support-demo``)."""

_SYSTEM_PROMPT = (
    "You are the support assistant of Acme Cloud. Answer only from the customer record, "
    "invoices and help-centre articles your tools return. Quote ids exactly."
)

# -- the pretend back office the tools read ----------------------------------------------------

_CUSTOMERS: dict[str, dict[str, Any]] = {
    "jane.doe@acme.io": {
        "id": "CUST-48213",
        "name": "Jane Doe",
        "email": "jane.doe@acme.io",
        "company": "Acme Robotics",
        "plan": "Business",
        "customer_since": "2023-04-12",
        "open_invoices": ["INV-7781"],
    },
    "li.wei@northwind.example": {
        "id": "CUST-50977",
        "name": "Li Wei",
        "email": "li.wei@northwind.example",
        "company": "Northwind Traders",
        "plan": "Team",
        "customer_since": "2024-09-30",
        "open_invoices": [],
    },
}

_INVOICES: dict[str, dict[str, Any]] = {
    "INV-7781": {
        "id": "INV-7781",
        "customer_id": "CUST-48213",
        "status": "overdue",
        "amount": 1834.2,
        "currency": "USD",
        "issued": "2026-02-03",
        "due_date": "2026-03-05",
        "lines": [
            {"sku": "BUS-SEAT", "quantity": 12, "amount": 1680.0},
            {"sku": "STORAGE-1TB", "quantity": 2, "amount": 154.2},
        ],
    },
}

_ARTICLES: list[dict[str, Any]] = [
    {
        "id": "DOC-1a2b3c4d",
        "title": "Resetting your password",
        "text": "Open Settings > Security and choose Reset password. We e-mail a link that "
        "expires after 30 minutes; request a new one if it has expired.",
    },
    {
        "id": "DOC-9f8e7d6c",
        "title": "Plans and billing cycles",
        "text": "Business and Team plans renew automatically at the end of each billing "
        "cycle. Change or cancel your plan any time under Billing > Plan.",
    },
]


@dataclass(frozen=True)
class _Scenario:
    title: str
    expect: str
    question: str
    play: Callable[[Any, dict[str, Callable[..., Any]]], str]


def _grounded(run: Any, t: dict[str, Callable[..., Any]]) -> str:
    customer = t["get_customer"]("jane.doe@acme.io")
    invoice = t["get_invoice"](customer["open_invoices"][0])
    return str(
        t["chat"](
            [run.input, customer, invoice],
            reply=(
                f"Invoice {invoice['id']} for {customer['name']} ({customer['id']}) is overdue: "
                "$1,834.20 was due on March 5, 2026. You can pay it under Billing > Invoices."
            ),
        )
    )


def _fabricated_id(run: Any, t: dict[str, Callable[..., Any]]) -> str:
    customer = t["get_customer"]("jane.doe@acme.io")
    return str(
        t["chat"](
            [run.input, customer],
            # Two digits swapped: the id the tool returned was CUST-48213.
            reply="Your customer ID is CUST-48231. Enter it in the Account field of the form.",
        )
    )


def _from_memory(run: Any, t: dict[str, Callable[..., Any]]) -> str:
    customer = t["get_customer"]("li.wei@northwind.example")
    docs = t["search_docs"]("plan renewal date and price")
    return str(
        t["chat"](
            [run.input, customer, docs],
            # Neither the date nor the price is in anything the tools returned.
            reply="Your Team plan renews on October 1, 2026 and will cost $1,188.00 per year.",
        )
    )


def _stuck(run: Any, t: dict[str, Callable[..., Any]]) -> str:
    docs: Any = None
    for _ in range(3):  # the model keeps asking for the same search
        docs = t["search_docs"]("reset password link not working")
    article = docs[0]
    return str(
        t["chat"](
            [run.input, docs],
            reply=(
                "Open Settings > Security and choose Reset password. The link expires after "
                f"30 minutes, so request a new one if it has expired ({article['id']})."
            ),
        )
    )


_SCENARIOS = (
    _Scenario(
        "invoice status",
        "grounded",
        "Hi, this is jane.doe@acme.io. Is our invoice paid?",
        _grounded,
    ),
    _Scenario(
        "customer id for a form",
        "cites an id no tool returned",
        "What is my customer ID? I'm jane.doe@acme.io and the billing form asks for it.",
        _fabricated_id,
    ),
    _Scenario(
        "plan renewal",
        "states a date and a price from memory",
        "li.wei@northwind.example here: when does our plan renew and what will it cost?",
        _from_memory,
    ),
    _Scenario(
        "password reset",
        "stuck repeating the same search",
        "The password reset link in your e-mail does not work. What do I do?",
        _stuck,
    ),
)


def _tools() -> dict[str, Callable[..., Any]]:
    """The demo agent's tools, decorated with the real capture SDK."""
    import agentlens

    @agentlens.tool
    def get_customer(email: str) -> dict[str, Any]:
        """Look a customer up by e-mail."""
        return dict(_CUSTOMERS[email])

    @agentlens.tool
    def get_invoice(invoice_id: str) -> dict[str, Any]:
        """Fetch one invoice."""
        return dict(_INVOICES[invoice_id])

    @agentlens.retrieval
    def search_docs(query: str) -> list[dict[str, Any]]:
        """Search the help centre (a fixed ranking, like a cached index)."""
        words = set(query.lower().split())
        ranked = sorted(
            _ARTICLES,
            key=lambda a: -len(words & set((a["title"] + " " + a["text"]).lower().split())),
        )
        return [dict(a) for a in ranked[:1]]

    script: list[str] = []

    @agentlens.llm(name="scripted-model")
    def chat(messages: list[dict[str, Any]], model: str = "scripted-model") -> dict[str, Any]:
        """A scripted model: answers with the next reply of its script (no network)."""
        return {"role": "assistant", "content": script.pop()}

    def ask(context: list[Any], *, reply: str) -> str:
        messages = [{"role": "system", "content": _SYSTEM_PROMPT}]
        for item in context:
            if isinstance(item, str):
                messages.append({"role": "user", "content": item})
            else:
                messages.append({"role": "tool", "content": json.dumps(item)})
        script.append(reply)
        return str(chat(messages)["content"])

    return {
        "get_customer": get_customer,
        "get_invoice": get_invoice,
        "search_docs": search_docs,
        "chat": ask,
    }


@command(app)
def demo() -> None:
    """Record a few realistic agent runs, check them against their evidence, show the rate."""
    settings = state.settings()
    url = settings.store_url
    with command_store() as store:  # opened first: a bad --db fails early, with a clear message
        _record_and_report(store, url, settings)


def _record_and_report(store: Any, url: str, settings: Any) -> None:
    from rich.text import Text

    import agentlens
    from agentlens.capture import configure, flush, stats

    before = stats()
    configure(db=url, enabled=True)  # the demo records even with AGENTLENS_DISABLED set
    tools = _tools()
    run_ids: list[str] = []
    out_console.print(
        Text.assemble(
            ("recording ", ""),
            (f"{len(_SCENARIOS)} demo runs", "bold"),
            (f" of a support agent into {url}", ""),
        )
    )
    for i, scenario in enumerate(_SCENARIOS, 1):
        with agentlens.run(
            agent=DEMO_AGENT,
            name=scenario.title,
            input=scenario.question,
            metadata={"demo": True, "scenario": scenario.expect},
            links={"ticket": f"DEMO-{i}"},
        ) as run:
            run.step("system", "system prompt", output=_SYSTEM_PROMPT)
            run.output = scenario.play(run, tools)
        run_ids.append(run.id)
    flushed = flush(timeout=30)
    after = stats()
    if not flushed or after.failed > before.failed or after.dropped > before.dropped:
        raise fail(f"the demo runs could not be written to {url} (see the log for why)")
    _score_and_report(store, run_ids, settings)


def _score_and_report(store: Any, run_ids: list[str], settings: Any) -> None:
    from rich.text import Text

    from agentlens.analytics import wilson_interval
    from agentlens.cli._runs import print_score, render_answer
    from agentlens.eval import registered_scorers
    from agentlens.review import score_finished

    known = registered_scorers()
    names = [n for n in settings.default_scorers if n in known]
    missing = [n for n in settings.default_scorers if n not in known]
    if missing:
        err_console.print(
            f"note: not available yet, skipped: {', '.join(missing)}", markup=False, style="dim"
        )

    result = score_finished(
        [store.get_trace(run_id) for run_id in run_ids],
        scorers=names,
        settings=settings,
        store=store,
    )
    for i, (done, scenario) in enumerate(zip(result.runs, _SCENARIOS, strict=True), 1):
        trace, run_id = done.trace, done.trace.id
        scores = sorted(done.scores, key=lambda s: s.scorer)
        out_console.print()
        title = Text(f"{i}. {scenario.title}", style="bold")
        title.append(f"  ({scenario.expect})", style="dim")
        out_console.print(title)
        out_console.print(Text(f"   run {run_id}", style="cyan"))
        calls = " → ".join(f"{s.name or s.kind}" for s in trace.steps if s.kind != "system")
        out_console.print(Text(f"   steps: {calls}", style="dim"))
        out_console.print(
            Text("   answer: ", style="dim").append_text(render_answer(trace, scores))
        )
        for score in scores:
            print_score(score, trace, indent="   ")

    out_console.print()
    counts = result.counts
    scored = counts.flagged + counts.passed
    if not names or scored == 0:
        out_console.print(
            Text("hallucination rate: pending (no scorer is available yet)", style="bold")
        )
    else:
        low, high = wilson_interval(counts.flagged, scored)
        line = Text("hallucination rate: ", style="bold")
        line.append(
            f"{counts.flagged}/{scored} runs flagged = {counts.flagged / scored:.0%}",
            style="bold red",
        )
        line.append(f"  (95% Wilson interval {low:.0%}–{high:.0%}; {scored} runs is a tiny sample)")
        out_console.print(line)
        modes = [(m, k) for m, k in counts.by_mode.items() if k]
        if modes:
            modes_text = ", ".join(f"{m} {k}/{scored}" for m, k in modes)
            out_console.print(Text(f"  by failure mode: {modes_text}", style="dim"))
        apart = counts.unverifiable + counts.errors
        if apart:
            out_console.print(
                Text(
                    f"  {apart} run(s) unverifiable or errored, counted apart (never as passes)",
                    style="dim",
                )
            )

    db_flag = f"--db {state.db} " if state.db else ""
    out_console.print()
    out_console.print(Text("next:", style="bold"))
    for example, what in (
        (f"agentlens {db_flag}runs", "list the stored runs and their verdicts"),
        (f"agentlens {db_flag}show {run_ids[1]}", "one run: steps, answer, findings in place"),
        (f"agentlens {db_flag}score --since 1d", "score runs again (e.g. after changing config)"),
        (f"agentlens {db_flag}rate --since 1d", "the hallucination rate with error bars"),
    ):
        line = Text(f"  {example}", style="cyan")
        line.append(f"   # {what}", style="dim")
        out_console.print(line)
