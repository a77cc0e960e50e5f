"""``agentlens migrate --from URL --to URL``: copy a store into another, losslessly and resumably.

What is copied: every run (its stored JSON, so it reads back equal) and every score of it (all
scorers, all versions); the destination's rollups, flags and indexes follow from its own write
paths. Runs go oldest first in batches, each batch one transaction of the destination (runs, then
their scores). After each batch the position (the last run copied, in the store order) is written
to a checkpoint file beside the working directory (``.agentlens-migrate-<hash>.json``, one per
pair of URLs); run the same command again after an interruption and it goes on from there. The
checkpoint is removed once the copy is complete. Copying again over a complete copy changes
nothing: a run identical to the stored one is left as it is, with its scores.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from agentlens.cli._app import app, err_console, out_console
from agentlens.cli._util import command

__all__ = ["copy_store", "migrate"]

_BATCH = 200


def checkpoint_path(source: str, target: str, folder: Path | None = None) -> Path:
    """The checkpoint file of copying ``source`` into ``target`` (one per pair of URLs)."""
    digest = hashlib.sha256(f"{source}\n{target}".encode()).hexdigest()[:16]
    return (folder or Path.cwd()) / f".agentlens-migrate-{digest}.json"


def copy_store(
    source: Any,
    target: Any,
    *,
    checkpoint: Path | None = None,
    progress: Any = None,
    batch_size: int = _BATCH,
    stop_after: int | None = None,
) -> tuple[int, int]:
    """Copy every run and score of ``source`` into ``target``; return ``(runs, scores)`` copied.

    ``checkpoint``: where the position is kept, and resumed from when it exists: the number of
    runs already copied in the source's order (oldest first) and the id of the last one; when
    the source no longer has that run at that place, the copy starts over (safe: copying a run
    again changes nothing). ``progress``: called with ``(done, total)`` after each batch.
    ``stop_after``: stop after about that many runs (to test resuming).
    """
    from agentlens.store import RunFilter

    skip, last_id = 0, None
    if checkpoint is not None and checkpoint.exists():
        try:
            saved = json.loads(checkpoint.read_text())
            skip, last_id = int(saved["done"]), str(saved["last"])
        except (ValueError, KeyError, TypeError):
            skip, last_id = 0, None
    if skip and not _still_at(source, skip, last_id):
        skip, last_id = 0, None
    total = source.count_runs()
    done, runs, scores = skip, 0, 0
    batch: list[str] = []

    def flush() -> None:
        nonlocal runs, scores, done, batch
        traces = list(source.query_traces(RunFilter(run_ids=batch), newest_first=False))
        found = [s for t in traces for s in source.get_scores(t.id)]
        target.put_traces(traces)
        if found:
            target.put_scores(found)
        runs += len(traces)
        scores += len(found)
        done += len(batch)
        if checkpoint is not None:
            tmp = checkpoint.with_suffix(".tmp")
            tmp.write_text(json.dumps({"done": done, "last": batch[-1]}))
            os.replace(tmp, checkpoint)
        batch = []
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(done, total)
    position = 0
    for summary in source.list_runs(newest_first=False):
        position += 1
        if position <= skip:
            continue
        batch.append(summary.id)
        if len(batch) >= batch_size:
            flush()
            if stop_after is not None and runs >= stop_after:
                return runs, scores
    if batch:
        flush()
    if checkpoint is not None and checkpoint.exists():
        checkpoint.unlink()
    return runs, scores


def _still_at(source: Any, position: int, run_id: str | None) -> bool:
    """True when the ``position``-th run of ``source`` (oldest first, from 1) is ``run_id``."""
    for i, summary in enumerate(source.list_runs(newest_first=False, limit=position), 1):
        if i == position:
            return bool(summary.id == run_id)
    return False


@contextmanager
def _bar(enabled: bool) -> Iterator[Any]:
    if not enabled or not err_console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("copying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs, ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("copy", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@command(app)
def migrate(
    source: Annotated[
        str,
        typer.Option(
            "--from", help="The store to copy (a store URL or a SQLite path).", metavar="URL"
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--to", help="The store to copy into (created and migrated if new).", metavar="URL"
        ),
    ],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Copy every run and score from one store into another (SQLite to PostgreSQL and back).

    Lossless: each run reads back equal from the copy. Resumable: run the same command again
    after an interruption and it goes on after the last batch copied. Copying into a store that
    already holds some of the runs leaves identical runs as they are.
    """
    from agentlens.errors import ConfigError
    from agentlens.store import normalize_url, open_store

    src, dst = normalize_url(source), normalize_url(target)
    if src == dst:
        raise ConfigError("--from and --to name the same store")
    checkpoint = checkpoint_path(src, dst)
    resumed = checkpoint.exists()
    with (
        closing(open_store(src)) as from_store,
        closing(open_store(dst)) as to_store,
        _bar(not quiet) as progress,
    ):
        runs, scores = copy_store(from_store, to_store, checkpoint=checkpoint, progress=progress)
    how = " (resumed)" if resumed else ""
    out_console.print(
        f"copied {runs} runs and {scores} scores{how} from {_label(src)} to {_label(dst)}",
        markup=False,
    )


def _label(url: str) -> str:
    if url.split("://", 1)[0].lower().startswith("postgres"):
        from agentlens.store._postgres import parse_pg_url

        return parse_pg_url(url).label
    return url
