"""``agentlens migrate --from URL --to URL``: copy a store into another, losslessly and resumably.

What is copied: every run (its stored JSON, so it reads back equal) and every score of it (all
scorers, all versions); then, row for row, every other table
(:data:`agentlens.store._copy.COPY_TABLES`): the review state of each run (reviewed or pending,
its flags), the runs' failure modes, content flags, human verdicts, webhook deliveries, API keys,
and the server's staged OTLP spans. The destination's rate rollups and indexes follow from its
own write paths. Runs go oldest first in batches, each batch one transaction of the destination
(runs, then their scores); the other tables go in key order, a batch per transaction, as upserts.
After each batch the position (the last run copied, in the store order; then the table and the
last key copied) is written to a checkpoint file in the working directory
(``.agentlens-migrate-<hash>.json``, one per pair of URLs); run the same command again after an
interruption and it goes on from there (or starts over, when the source changed under it or the
target no longer holds the last run copied). The checkpoint is removed once the copy is complete.
Copying again over a complete copy changes nothing: a run identical to the stored one is left as
it is, with its scores, and a row copied again replaces itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from agentlens.cli._app import app, err_console, out_console, real_console
from agentlens.cli._util import command, report_unreadable
from agentlens.errors import UnreadableRunError

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
    on_resume: Callable[[], None] | None = None,
    on_unreadable: Callable[[Any], None] | None = None,
) -> tuple[int, int, int]:
    """Copy every run, score and other table of ``source`` into ``target``; return ``(runs,
    scores, rows)`` copied (``rows``: of the other tables).

    ``checkpoint``: where the position is kept, and resumed from when it exists: the number of
    runs already copied in the source's order (oldest first) and the id of the last one, then
    the table being copied and its last key; when the source no longer has that run at that
    place, the copy starts over (safe: copying a run again changes nothing). ``progress``:
    called with ``(done, total)`` runs after each batch of runs. ``stop_after``: stop after
    about that many runs (to test resuming). ``on_resume``: called when the copy goes on from
    the checkpoint. It starts over, too, when the target no longer holds the last run copied
    (it was deleted or replaced since): skipping what the checkpoint says was copied would
    leave those runs out. ``on_unreadable``: called with each stored run the source cannot read
    back (an :class:`~agentlens.errors.UnreadableRunError`), which is then left out with its
    scores; without it such a run stops the copy.
    """
    saved = _load(checkpoint)
    skip, last_id = int(saved.get("done", 0)), saved.get("last")
    if skip and (
        (saved.get("table") is None and not _still_at(source, skip, last_id))
        or not (_holds(target, last_id) or last_id in (saved.get("left_out") or ()))
    ):
        saved, skip, last_id = {}, 0, None
    if saved and on_resume is not None:
        on_resume()

    def save(**position: Any) -> None:
        saved.update(position)
        if checkpoint is not None:
            tmp = checkpoint.with_suffix(".tmp")
            tmp.write_text(json.dumps(saved))
            os.replace(tmp, checkpoint)

    runs = scores = 0
    if saved.get("table") is None:
        runs, scores = _copy_runs(
            source, target, skip, save, progress, batch_size, stop_after, on_unreadable,
            list(saved.get("left_out") or ()),
        )  # fmt: skip
        if stop_after is not None and runs >= stop_after:
            return runs, scores, 0
    # the review rows of the runs left out stay out too (kept in the checkpoint for a resume)
    left_out = frozenset(saved.get("left_out") or ())
    rows = _copy_tables(source, target, saved, save, batch_size, left_out)
    if checkpoint is not None and checkpoint.exists():
        checkpoint.unlink()
    return runs, scores, rows


def _load(checkpoint: Path | None) -> dict[str, Any]:
    if checkpoint is None or not checkpoint.exists():
        return {}
    try:
        saved = json.loads(checkpoint.read_text())
        int(saved["done"])
        return saved if isinstance(saved, dict) else {}
    except (ValueError, KeyError, TypeError):
        return {}


def _copy_runs(
    source: Any, target: Any, skip: int, save: Any, progress: Any, batch_size: int,
    stop_after: int | None = None, on_unreadable: Callable[[Any], None] | None = None,
    left_out: list[str] | None = None,
) -> tuple[int, int]:  # fmt: skip
    """The runs after the first ``skip`` (oldest first), with their scores; each run the source
    cannot read goes to ``on_unreadable`` (and its id to ``left_out``, saved in the checkpoint)
    when that is given."""
    from agentlens.store import RunFilter

    total = source.count_runs()
    done, runs, scores = skip, 0, 0
    batch: list[str] = []

    left_out = [] if left_out is None else left_out

    def unreadable(exc: Any) -> None:
        left_out.append(exc.run_id)
        assert on_unreadable is not None
        on_unreadable(exc)

    def flush() -> None:
        nonlocal runs, scores, done, batch
        where = RunFilter(run_ids=batch)
        if on_unreadable is None:
            traces = list(source.query_traces(where, newest_first=False))
        else:
            traces = list(source.query_traces(where, newest_first=False, on_unreadable=unreadable))
            if left_out:
                save(left_out=left_out)
        found = [s for t in traces for s in source.get_scores(t.id)]
        target.put_traces(traces)
        if found:
            target.put_scores(found)
        runs += len(traces)
        scores += len(found)
        done += len(batch)
        save(done=done, last=batch[-1])
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
    return runs, scores


def _copy_tables(
    source: Any,
    target: Any,
    saved: dict[str, Any],
    save: Any,
    batch_size: int,
    left_out: frozenset[str] = frozenset(),
) -> int:
    """Every table of :data:`COPY_TABLES`, from the one (and the key) ``saved`` names on;
    without the rows of the runs ``left_out`` (runs that could not be read)."""
    from agentlens.store._copy import COPY_TABLES

    names = [t.name for t in COPY_TABLES]
    start = names.index(saved["table"]) if saved.get("table") in names else 0
    after = saved.get("after") if saved.get("table") in names else None
    copied = 0
    for spec in COPY_TABLES[start:]:
        save(table=spec.name, after=after)
        while True:
            rows = source.table_rows(spec.name, after=after, limit=batch_size)
            if not rows:
                break
            kept = rows
            if left_out and "run_id" in spec.columns:
                at = spec.columns.index("run_id")
                kept = [r for r in rows if r[at] not in left_out]
            if kept:
                target.put_table_rows(spec.name, kept)
            copied += len(kept)
            after = [rows[-1][spec.columns.index(k)] for k in spec.key]
            save(table=spec.name, after=after)
        after = None
    return copied


def _holds(target: Any, run_id: str | None) -> bool:
    """True when ``target`` has the run ``run_id``."""
    from agentlens.store import RunFilter

    return run_id is not None and target.count_runs(RunFilter(run_ids=[run_id])) > 0


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
        console=real_console(err_console),
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
            "--from",
            help="The store to copy (a store URL or a SQLite path): it must exist, and is only read.",
            metavar="URL",
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--to", help="The store to copy into (created and migrated if new).", metavar="URL"
        ),
    ],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    skip_unreadable: Annotated[
        bool,
        typer.Option(
            "--skip-unreadable",
            help="Copy the rest when a stored run cannot be read back: each one is named and"
            " left out with its scores, and the command exits 1 (default: it stops the copy).",
        ),
    ] = False,
) -> None:
    """Copy a store into another (SQLite to PostgreSQL and back): runs, scores, review state,
    verdicts, webhook deliveries, content flags, API keys, staged spans.

    Lossless: each run reads back equal from the copy. Resumable: run the same command again
    after an interruption and it goes on after the last batch copied. Copying into a store that
    already holds some of the runs leaves identical runs as they are.
    """
    from agentlens.errors import ConfigError
    from agentlens.store import normalize_url, open_store

    src, dst = normalize_url(source), normalize_url(target)
    path, to_path = _sqlite_file(src), _sqlite_file(dst)
    if src == dst or (path is not None and to_path is not None and path == to_path):
        raise ConfigError("--from and --to name the same store")
    for flag, url in (("--from", src), ("--to", dst)):
        if _in_memory(url):
            raise ConfigError(
                f"{flag}: {url} is a store in memory: it starts empty and is gone when the"
                " command ends; name a file or a server"
            )
    if path is not None and not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ConfigError(f"--from: no agentlens store at {path} (the path {what})")
    checkpoint = checkpoint_path(src, dst)
    _check_writable(checkpoint)
    resumed = False
    unreadable: list[UnreadableRunError] = []

    def on_resume() -> None:
        nonlocal resumed
        resumed = True

    with (
        closing(open_store(src, read_only=True)) as from_store,  # a typo is not a new store
        closing(open_store(dst)) as to_store,
        _bar(not quiet) as progress,
    ):
        runs, scores, rows = copy_store(
            from_store,
            to_store,
            checkpoint=checkpoint,
            progress=progress,
            on_resume=on_resume,
            on_unreadable=unreadable.append if skip_unreadable else None,
        )
    how = " (resumed)" if resumed else ""
    out_console.print(
        f"copied {runs} runs and {scores} scores{how} from {_label(src)} to {_label(dst)},"
        f" and {rows} rows of review state, verdicts, deliveries, keys and staged spans",
        markup=False,
    )
    if unreadable:
        report_unreadable(unreadable, "copied")
        raise typer.Exit(1)


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite store URL, resolved (``a.db``, ``./a.db`` and a link to it are one
    file); ``None`` for another backend or a store in memory."""
    from agentlens.store import parse_store_url

    parsed = parse_store_url(url)
    if parsed.backend != "sqlite" or parsed.sqlite_path is None:
        return None
    return Path(os.path.realpath(parsed.sqlite_path))


def _in_memory(url: str) -> bool:
    """True for a SQLite store in memory (``sqlite://``, ``sqlite:///:memory:``)."""
    from agentlens.store import parse_store_url

    parsed = parse_store_url(url)
    return parsed.backend == "sqlite" and parsed.sqlite_path is None


def _check_writable(checkpoint: Path) -> None:
    """Refuse, before anything is copied, a checkpoint that cannot be written (else the copy
    stops after its first batch, with a part of the runs in the target)."""
    from agentlens.errors import ConfigError

    probe = checkpoint.with_suffix(".tmp")
    try:
        probe.write_text("{}")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"cannot write the checkpoint {checkpoint} ({exc.strerror or exc}); run"
            " agentlens migrate from a writable folder (it keeps its position there)"
        ) from None


def _label(url: str) -> str:
    if url.split("://", 1)[0].lower().startswith("postgres"):
        from agentlens.store._postgres import parse_pg_url

        return parse_pg_url(url).label
    return url
