"""``agentlens delete``: remove runs (with their scores) by id, or every run a filter selects."""

from __future__ import annotations

from typing import Annotated

import typer

from agentlens.cli._app import app, err_console, fail, out_console
from agentlens.cli._util import (
    AgentOpt,
    FromOpt,
    SinceOpt,
    ToOpt,
    command,
    command_store,
    time_window,
)

__all__ = ["delete"]


@command(app)
def delete(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Ids of the runs to delete.", metavar="[RUN_ID]...", show_default=False
        ),
    ] = None,
    agent: AgentOpt = None,
    since: SinceOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Delete what a filter selects without asking first."),
    ] = False,
) -> None:
    """Delete runs and their scores: by id, or every run a filter (--agent, --since, --from,
    --to) selects, after a confirmation (--yes skips it).

    Runs named by id are deleted without a prompt; an id that is not stored is reported and the
    command exits 1. A stored run that cannot be read back can be deleted like any other.
    """
    has_filter = any(v is not None for v in (agent, since, start, end))
    if run_ids and has_filter:
        raise fail("give run ids or a filter (--agent, --since, --from, --to), not both")
    if not run_ids and not has_filter:
        raise fail(
            "name the runs to delete: agentlens delete RUN_ID..., or select them with "
            "--agent, --since, --from or --to"
        )
    from agentlens.store import RunFilter

    window = time_window(since, start, end)
    with command_store() as store:
        if run_ids:
            wanted = list(dict.fromkeys(run_ids))
            found = {r.id for r in store.list_runs(RunFilter(run_ids=wanted))}
            missing = [r for r in wanted if r not in found]
            deleted = store.delete_runs([r for r in wanted if r in found])
        else:
            where = RunFilter(start=window.start, end=window.end, agent=agent)
            ids = [r.id for r in store.list_runs(where, newest_first=False)]
            missing = []
            if not ids:
                out_console.print("no runs match; nothing deleted", markup=False)
                return
            if not yes and not _confirm(len(ids), agent, since, start, end):
                err_console.print("\nnothing deleted (--yes deletes without asking)", markup=False)
                raise typer.Exit(1)
            deleted = store.delete_runs(ids)
    out_console.print(
        f"deleted {deleted:,} run{'' if deleted == 1 else 's'} and {'its' if deleted == 1 else 'their'} scores",
        markup=False,
    )
    for run_id in missing:
        err_console.print(f"no run with id {run_id!r}", markup=False)
    if missing:
        raise typer.Exit(1)


def _confirm(
    count: int, agent: str | None, since: str | None, start: str | None, end: str | None
) -> bool:
    """Ask before deleting what a filter selected; ``False`` (nothing deleted) on no or EOF."""
    parts = [
        f"{flag} {value}"
        for flag, value in (
            ("--agent", agent),
            ("--since", since),
            ("--from", start),
            ("--to", end),
        )
        if value is not None
    ]
    question = (
        f"delete {count:,} run{'' if count == 1 else 's'} ({' '.join(parts)}) and their scores?"
    )
    try:
        return typer.confirm(question, default=False, err=True)
    except (typer.Abort, EOFError):
        return False
