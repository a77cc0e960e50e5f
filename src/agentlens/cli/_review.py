"""``agentlens review ...`` (queue, verdict, precision, deliveries, run) and ``agentlens content``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlens.cli._app import app, fail, out_console, state
from agentlens.cli._util import (
    AgentOpt,
    Column,
    command,
    command_store,
    format_time,
    iso,
    preview,
    print_table,
    time_window,
    visible,
    write_json_lines,
)

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.store import RunSummary

__all__ = ["content", "review_app", "summary_json"]

review_app = typer.Typer(
    name="review",
    help="The review pipeline: the queue of flagged runs, verdicts, precision, webhooks.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(review_app, name="review")

JsonOpt = Annotated[bool, typer.Option("--json", help="JSON Lines, one object per row.")]


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """The review fields of a run summary, as ``agentlens runs --json`` carries them."""
    return {
        "hallucination_detected": summary.hallucination_detected,
        "hallucination_reason": summary.hallucination_reason,
        "failure_modes": list(summary.failure_modes),
        "flag_state": summary.flag_state,
        "review_pending": summary.review_pending,
        "reviewed_at": iso(summary.reviewed_at),
    }


# ----------------------------------------------------------------------------- queue


@command(review_app, "queue")
def queue(
    agent: AgentOpt = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, metavar="N", help="At most N runs; 0 for all.")
    ] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Flagged runs with a finding no human has judged yet, oldest first."""
    with command_store() as store:
        rows = store.review_queue(agent=agent, limit=limit or None)
    if as_json:
        write_json_lines(
            {
                "id": r.id,
                "agent": r.agent,
                "name": r.name,
                "started_at": iso(r.started_at),
                **summary_json(r),
            }
            for r in rows
        )
        return
    if not rows:
        out_console.print("the review queue is empty", markup=False)
        return
    from rich.text import Text

    print_table(
        _QUEUE_COLUMNS,
        [
            [
                visible(r.id, lines=False),
                visible(r.agent or "", lines=False),
                format_time(r.started_at),
                ", ".join(r.failure_modes),
                Text(visible(r.hallucination_reason or "", lines=False), style="red"),
            ]
            for r in rows
        ],
    )


_QUEUE_COLUMNS = (
    Column("id", key=True),
    Column("agent", min=8, drop=2, grow=2, max=20),
    Column("started", drop=1),
    Column("modes", min=12, grow=1),
    Column("reason", min=20, drop=3, grow=3),
)
"""The review queue's columns: the run id (whole), the failure modes and the reason first; on a
narrow terminal the start, then the agent, then the reason are left out."""


# ----------------------------------------------------------------------------- verdict


@command(review_app, "verdict")
def verdict(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The flagged run.")],
    value: Annotated[str, typer.Argument(metavar="confirmed|false_positive", help="Your verdict.")],
    finding: Annotated[
        int | None,
        typer.Option(
            "--finding",
            min=1,
            metavar="N",
            help="Only finding N (as `agentlens show` numbers them); default: all.",
        ),
    ] = None,
    note: Annotated[
        str | None, typer.Option("--note", metavar="TEXT", help="Why, for the next reader.")
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", metavar="NAME", help="Who gives it (default: login).")
    ] = None,
) -> None:
    """Record a human verdict on a flagged run, or on one of its findings."""
    from agentlens.review import set_verdict

    if value not in ("confirmed", "false_positive"):
        raise fail(f"the verdict must be confirmed or false_positive, got {value!r}")
    with command_store() as store:
        records = set_verdict(run_id, value, finding=finding, note=note, by=by, db=store)
        flags = store.get_flags(run_id)
    what = f"finding {finding}" if finding is not None else f"{len(records)} finding(s)"
    out_console.print(f"{value} on {what} of run {run_id}", markup=False)
    if flags is not None and value == "false_positive":
        out_console.print("content flags of this run re-derived", markup=False)


# ----------------------------------------------------------------------------- precision


@command(review_app, "precision")
def precision(
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only verdicts given in the last 30d, 12h... or since a date (default, or all:"
            " every verdict).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Each detector's measured precision: confirmed / (confirmed + false positive)."""
    from agentlens.review import precision as measure

    every = since is not None and since.strip().lower() == "all"  # as rate and gate take it
    lower = None if every else time_window(since, None, None).start
    with command_store() as store:
        rows = measure(since=lower, db=store)
    if as_json:
        write_json_lines(r.to_json() for r in rows)
        return
    if not rows:
        out_console.print("no verdicts yet (`agentlens review verdict RUN_ID ...`)", markup=False)
        return
    rows_shown = []
    for r in rows:
        low, high = r.interval
        rows_shown.append(
            [
                "mode" if r.by == "failure_mode" else r.by,  # as `rate --by mode` names it
                visible(r.key or "-", lines=False),
                str(r.confirmed),
                str(r.false_positive),
                "-" if r.precision is None else f"{r.precision:.1%}",
                f"{low:.1%} - {high:.1%}",
            ]
        )
    print_table(_PRECISION_COLUMNS, rows_shown)


_PRECISION_COLUMNS = (
    Column("by", min=6, grow=2),
    Column("name", min=8, grow=1),
    Column("confirmed", justify="right"),
    Column("false_positive", justify="right"),
    Column("precision", justify="right"),
    Column("95% interval", justify="right"),
)
"""``review precision``: the numbers are never cut; a long detector name is (``…``). ``by`` is
``scorer`` or ``mode`` (a failure mode; ``failure_mode`` in ``--json``)."""


# ----------------------------------------------------------------------------- deliveries


@command(review_app, "deliveries")
def deliveries(
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only pending, delivered or failed deliveries (default: all).",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, metavar="N", help="At most N; 0 for all.")
    ] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Webhook deliveries, newest first: failed ones are kept here, never dropped."""
    if status is not None and status not in ("pending", "delivered", "failed"):
        raise fail(f"--status must be pending, delivered or failed, got {status!r}")
    with command_store() as store:
        rows = store.list_deliveries(status=status, limit=limit or None)
    if as_json:
        write_json_lines(
            {
                "id": d.id,
                "run_id": d.run_id,
                "url": d.url,
                "status": d.status,
                "attempts": d.attempts,
                "last_error": d.last_error,
                "created_at": iso(d.created_at),
                "next_attempt_at": iso(d.next_attempt_at),
                "delivered_at": iso(d.delivered_at),
            }
            for d in rows
        )
        return
    if not rows:
        out_console.print("no webhook deliveries", markup=False)
        return
    from rich.text import Text

    cells: list[list[str | Text]] = []
    for d in rows:
        style = {"failed": "red", "pending": "yellow"}.get(d.status, "green")
        cells.append(
            [
                str(d.id),
                visible(d.run_id, lines=False),
                Text(d.status, style=style),
                str(d.attempts),
                format_time(d.created_at),
                visible(d.last_error or "", lines=False),
            ]
        )
    print_table(_DELIVERY_COLUMNS, cells)


_DELIVERY_COLUMNS = (
    Column("id", key=True),
    Column("run", key=True),
    Column("status"),
    Column("attempts", justify="right"),
    Column("created", drop=1),
    Column("last error", min=12, fold=True),
)
"""``review deliveries``: the ids whole, the last error folded onto more lines when long."""


# ----------------------------------------------------------------------------- run


@command(review_app, "run")
def run_review(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, metavar="N", help="At most N runs; 0 for all.")
    ] = 0,
) -> None:
    """Review the runs waiting for review now (and attempt the webhook deliveries due)."""
    from agentlens.review import review_pending_result

    settings = state.settings()
    with command_store() as store:
        result = review_pending_result(store, limit=limit or None, settings=settings)
        lag = store.review_lag()
    failed = (
        f" ({result.delivery_failures} attempt(s) failed: agentlens review deliveries)"
        if result.delivery_failures
        else ""
    )
    out_console.print(
        f"reviewed {result.reviewed} run(s): {result.flagged} flagged;"
        f" {result.delivered} webhook delivery(ies) sent{failed}; {lag.pending} still pending",
        markup=False,
    )


# ----------------------------------------------------------------------------- content


@command(app)
def content(
    kind: Annotated[
        str | None, typer.Argument(metavar="KIND", help="The content kind (a key of links).")
    ] = None,
    item_id: Annotated[
        str | None, typer.Argument(metavar="ID", help="The content item's id.")
    ] = None,
    flagged: Annotated[
        bool, typer.Option("--flagged", help="List every content item flagged now.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """The quality flags of a content item a run produced (from the runs' `links`)."""
    if flagged == (kind is not None):
        raise fail("give KIND ID, or --flagged")
    if kind is not None and item_id is None:
        raise fail("give the content item's ID after its KIND")
    with command_store() as store:
        items = (
            store.flagged_content() if flagged else [store.content_flags(kind or "", item_id or "")]
        )
    if as_json:
        write_json_lines(
            {
                "kind": c.kind,
                "id": c.item_id,
                "flags": c.flags,
                "hallucination_suspected": c.hallucination_suspected,
                "runs": [
                    {
                        "run_id": r.run_id,
                        "reason": r.reason,
                        "flagged_at": iso(r.flagged_at),
                        "dismissed": r.dismissed,
                    }
                    for r in c.runs
                ],
            }
            for c in items
        )
        return
    if flagged and not items:
        out_console.print("no content is flagged", markup=False)
        return
    from rich.text import Text

    for c in items:
        head = Text(f"{c.kind} {c.item_id}: ", style="bold")
        if c.hallucination_suspected:
            head.append("hallucination_suspected", style="bold red")
        else:
            head.append("no flags", style="green")
        out_console.print(head)
        for r in c.runs:
            line = Text(f"  run {r.run_id}", style="dim" if r.dismissed else "")
            line.append(f" ({'false positive' if r.dismissed else format_time(r.flagged_at)}): ")
            line.append(preview(r.reason or "", 160))
            out_console.print(line)
