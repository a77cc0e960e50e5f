"""Score stored runs in batch: incremental, resumable, optionally in parallel processes.

:func:`score_runs` re-scores history from the stored evidence, without re-running the agent:

- **Incremental.** A run is scored by a scorer only when the store has no result of that scorer at
  its *current* version for the run's agent role (``resolve_scorer(name, agent,
  settings).stored_version``: the declared version, plus a hash of the options configured for
  the role). Bumping a scorer's version, or changing its options, re-scores history; running the
  same batch twice scores nothing the second time. ``rescore=True`` scores every selected run.
- **Resumable.** Runs are taken from the store in chunks and each chunk's scores are written
  (atomically) as soon as it is done, so an interrupted batch loses at most the chunks in flight:
  running it again continues where it stopped.
- **Parallel.** With ``workers > 1`` the traces are scored in that many processes (``spawn``
  start method): each worker opens the store by its URL and reads the traces of the chunks it is
  given; the parent alone writes scores (one writer).
- **Flat memory.** Run ids stream from the store chunk by chunk; at most ``2 * workers`` chunks are
  in flight.

A scorer that raises gives an ``error`` score for that run; the batch goes on.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import importlib
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from agentlens.config import Settings
from agentlens.errors import ConfigError, ScorerError, UnreadableRunError
from agentlens.eval._evidence import Evidence
from agentlens.eval._history import StepHistory
from agentlens.eval._registry import get_scorer, resolve_scorer
from agentlens.eval._scorer import Scorer
from agentlens.model import Score, ScoreResult, Trace
from agentlens.model._score import ScoreRow, dump_exactly
from agentlens.store import RunFilter

__all__ = ["ScoreSummary", "ScoringInterrupted", "score_runs"]

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: runs examined so far, of the runs selected."""

ScoresFn = Callable[[list[Score]], None]
"""``on_scores(batch)``: called with each batch of new scores, right after it is stored."""

RowsFn = Callable[[list[ScoreRow]], None]
"""``on_rows(batch)``: each batch of new scores in their stored form, right after it is stored."""


@dataclass
class ScoreSummary:
    """What a batch did."""

    selected: int = 0
    """Runs the selection matched when the batch started."""
    examined: int = 0
    """Runs looked at so far."""
    scored_runs: int = 0
    """Runs that got at least one new score."""
    scores_written: int = 0
    """New scores stored."""
    skipped: int = 0
    """Runs every selected scorer had already scored at its current version."""
    verdicts: Counter[str] = field(default_factory=Counter)
    """New scores by verdict."""
    elapsed: float = 0.0
    """Wall time in seconds."""
    interrupted: bool = False
    """True when the batch stopped early (run it again to continue)."""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """``(run id, reason)`` of every selected run the store could not read back: left out,
    the batch went on (``agentlens delete RUN_ID`` removes such a run)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the summary."""
        return {
            "selected": self.selected,
            "examined": self.examined,
            "scored_runs": self.scored_runs,
            "scores_written": self.scores_written,
            "skipped": self.skipped,
            "verdicts": dict(sorted(self.verdicts.items())),
            "elapsed": round(self.elapsed, 3),
            "interrupted": self.interrupted,
            "unreadable": [run_id for run_id, _ in self.unreadable],
        }


class ScoringInterrupted(KeyboardInterrupt):
    """Ctrl-C (or another KeyboardInterrupt) stopped a batch; ``summary`` says how far it got.

    Everything in ``summary.scores_written`` is stored: running the batch again continues.
    """

    def __init__(self, summary: ScoreSummary) -> None:
        super().__init__(f"interrupted after {summary.examined} of {summary.selected} runs")
        self.summary = summary


# A unit of work: each run id with the names of the scorers it still needs.
_Job = list[tuple[str, list[str]]]

_M = TypeVar("_M")
"""What :func:`_score_traces` makes of each score."""


def score_runs(
    store: Any,
    scorers: Sequence[str | Scorer] | None = None,
    where: RunFilter | None = None,
    *,
    rescore: bool = False,
    workers: int = 1,
    settings: Settings | None = None,
    progress: ProgressFn | None = None,
    on_scores: ScoresFn | None = None,
    chunk_size: int = 200,
    on_rows: RowsFn | None = None,
) -> ScoreSummary:
    """Score the stored runs that ``where`` selects with ``scorers``, and store the results.

    Args:
        store: an open :class:`~agentlens.store.TraceStore`.
        scorers: scorer names or :class:`Scorer` objects; default: the configured default set.
        where: which runs (default: all).
        rescore: score every selected run again, even when a result at the current version exists.
        workers: processes to score in (1: in this process).
        settings: per-agent scorer options and evidence kinds (default: :func:`load_settings`).
        progress: called with ``(runs examined, runs selected)`` after each chunk.
        on_scores: called with each batch of new scores once it is stored.
        on_rows: called with each batch of new scores once it is stored, in their stored form
            (:class:`~agentlens.model.ScoreRow`: run, scorer, version, verdict, detail...; the
            score itself in ``score`` for every row when ``on_scores`` is given, otherwise only
            for the scores that did not pass or have findings and no detail). What a caller
            that shows a summary needs: ``on_scores`` keeps every score of a chunk until it is
            stored, and with workers costs the parent a parse of each score they send.
        chunk_size: runs per chunk (the unit of writing and of work handed to a worker).

    Returns:
        A :class:`ScoreSummary`.

    Raises:
        ScorerError: an unknown scorer name (the message lists the known ones).
        ConfigError: ``workers`` below 1, or ``workers > 1`` with an in-memory store.
        ScoringInterrupted: the batch was interrupted; what was done is stored.
    """
    cfg = _settings(settings)
    bases = _bases(scorers, cfg)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be at least 1, got {chunk_size}")
    url = str(getattr(store, "url", ""))
    if workers > 1 and (":memory:" in url or not url):
        raise ConfigError("--workers needs a store on disk; an in-memory store cannot be shared")
    where = where or RunFilter()
    summary = ScoreSummary(selected=store.count_runs(where))
    started = time.perf_counter()
    resolver = _Resolver(bases, cfg, StepHistory(store))
    resolver.check()  # every (scorer, role) resolved now: a bad option stops before any run
    jobs = _jobs(store, where, resolver, rescore=rescore, chunk_size=chunk_size, summary=summary)

    # how the store writes scores in their stored form; a store without it is given the scores
    put_rows = getattr(store, "_put_score_rows", None)

    def record(
        rows: list[ScoreRow], runs_in_job: int, unreadable: list[tuple[str, str]] | None = None
    ) -> None:
        if unreadable:
            summary.unreadable.extend(unreadable)
        if rows:
            if put_rows is not None:
                put_rows(rows)
            else:
                store.put_scores(_scores_of(rows))
            summary.scores_written += len(rows)
            summary.scored_runs += len({r.run_id for r in rows})
            summary.verdicts.update(r.verdict for r in rows)
            if on_scores is not None:
                on_scores(_scores_of(rows))
            if on_rows is not None:
                on_rows(rows)
        summary.examined += runs_in_job
        summary.elapsed = time.perf_counter() - started
        if progress is not None:
            progress(summary.examined, summary.selected)

    try:
        with _few_collections():
            # every score is kept (or, from a worker, read back) only when the caller wants them
            keep_all = on_scores is not None or put_rows is None
            if workers == 1:
                made = _row_maker(keep_all)
                # a scorer that gives a row without its score does so when no score is kept
                as_made = None if keep_all else _as_made
                for job, runs_in_job in jobs:
                    unreadable: list[tuple[str, str]] = []
                    rows = (
                        _score_job(store, job, resolver, unreadable, made, as_made) if job else []
                    )
                    record(rows, runs_in_job, unreadable)
                    del rows
                    _between_chunks()
            else:
                _run_parallel(url, bases, cfg, jobs, resolver, workers, record, keep_all)
    except KeyboardInterrupt as exc:
        summary.interrupted = True
        summary.elapsed = time.perf_counter() - started
        raise ScoringInterrupted(summary) from exc
    summary.elapsed = time.perf_counter() - started
    return summary


@contextmanager
def _few_collections() -> Iterator[None]:
    """No automatic cyclic garbage collection while a batch is scored; one collection after
    each chunk instead (:func:`_between_chunks`), and the collector as it was afterwards.

    A chunk of traces and their scores is hundreds of thousands of objects, nearly all free of
    cycles and freed by reference counting. With the default thresholds the collector walked
    them (and everything imported) again and again: about a fifth of ``agentlens score``'s CPU
    time; with the young generation collected every 50,000 allocations instead of 700, still
    about a seventh (the chunk's objects live long enough to be walked in the older
    generations too). So the objects alive when the batch starts are frozen (left out of
    collections) unless the program froze some itself, automatic collection is off, and the
    cycles a chunk made are collected once it is written, when its objects are gone: memory
    stays bounded by one chunk's cycles.
    """
    enabled = gc.isenabled()
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if freeze:
            gc.unfreeze()


_FULL_EVERY = 10
"""Chunks between full collections; the chunks in between collect the young generations."""

_chunks_done = 0


def _between_chunks() -> None:
    """The collection after each chunk (see :func:`_few_collections`): of the young generations,
    where a chunk's cycles are, and of every generation every :data:`_FULL_EVERY` chunks. Each
    is cheap, since what is alive between chunks is small and what the batch started with is
    frozen; a full one costs a few milliseconds all the same (0.22 s over the 100 chunks of
    20,000 runs), and finds nothing the young ones missed but cycles that outlived a chunk."""
    global _chunks_done
    _chunks_done += 1
    if _chunks_done % _FULL_EVERY:
        gc.collect(1)
    else:
        gc.collect()


def _settings(settings: Settings | None) -> Settings:
    if settings is not None:
        return settings
    from agentlens.config import load_settings

    return load_settings()


def _bases(scorers: Sequence[str | Scorer] | None, cfg: Settings) -> list[Scorer]:
    names: Sequence[str | Scorer] = scorers if scorers else cfg.default_scorers
    if not names:
        raise ScorerError("no scorers selected and no default_scorers configured")
    bases = [get_scorer(s) if isinstance(s, str) else s for s in names]
    seen: set[str] = set()
    unique = []
    for b in bases:
        if b.name not in seen:
            seen.add(b.name)
            unique.append(b)
    return unique


class _Resolver:
    """Scorers with each agent role's options bound, cached per (scorer, agent), and the stored
    history the batch's scorers learn from (one per batch, or per worker process)."""

    def __init__(
        self, bases: Sequence[Scorer], settings: Settings, history: StepHistory | None = None
    ) -> None:
        self.bases = {b.name: b for b in bases}
        self.settings = settings
        self.history = history
        self._cache: dict[tuple[str, str | None], Scorer] = {}

    def get(self, name: str, agent: str | None) -> Scorer:
        key = (name, agent)
        found = self._cache.get(key)
        if found is None:
            found = resolve_scorer(self.bases[name], agent, self.settings)
            self._cache[key] = found
        return found

    def check(self) -> None:
        """Resolve every scorer for the default role and every configured one.

        Raises:
            ConfigError: a bad option (naming the file and key when it came from a file).
            ScorerError: an unknown option.
        """
        for agent in (None, *self.settings.agents):
            self.all_for(agent)

    def all_for(self, agent: str | None) -> list[Scorer]:
        return [self.get(name, agent) for name in self.bases]


def _jobs(
    store: Any,
    where: RunFilter,
    resolver: _Resolver,
    *,
    rescore: bool,
    chunk_size: int,
    summary: ScoreSummary,
) -> Iterator[tuple[_Job, int]]:
    """Stream ``(job, runs examined)`` chunk by chunk: the runs that still need scoring.

    A store with ``run_keys`` and ``score_keys`` (both built-in backends) lists each chunk's
    runs as ``(id, agent)`` and reads which scores they hold in one statement; any other store
    is asked through :meth:`~agentlens.store.TraceStore.list_runs` and one
    :meth:`~agentlens.store.TraceStore.unscored_run_ids` per scorer. Both give the same jobs:
    each run that still needs a scorer, with those scorers in the batch's order.
    """
    run_keys = getattr(store, "run_keys", None)
    score_keys = getattr(store, "score_keys", None)
    if run_keys is not None and score_keys is not None:
        runs: Iterator[tuple[str, str | None]] = run_keys(where, newest_first=False)
    else:
        score_keys = None
        runs = ((r.id, r.agent) for r in store.list_runs(where, newest_first=False))
    while True:
        chunk = list(islice(runs, chunk_size))
        if not chunk:
            return
        need: dict[str, list[str]] = {}
        if rescore:
            for run_id, agent in chunk:
                need[run_id] = [s.name for s in resolver.all_for(agent)]
        elif score_keys is not None:
            stored: dict[str, set[tuple[str, str]]] = score_keys([run_id for run_id, _ in chunk])
            for run_id, agent in chunk:
                have = stored.get(run_id)
                if have is None:  # deleted since it was listed
                    continue
                names = [
                    s.name
                    for s in resolver.all_for(agent)
                    if (s.name, s.stored_version) not in have
                ]
                if names:
                    need[run_id] = names
        else:
            by_agent: dict[str | None, list[str]] = {}
            for run_id, agent in chunk:
                by_agent.setdefault(agent, []).append(run_id)
            for agent, ids in by_agent.items():
                for scorer in resolver.all_for(agent):
                    todo = store.unscored_run_ids(
                        scorer.name, scorer.stored_version, RunFilter(run_ids=ids)
                    )
                    for run_id in todo:
                        need.setdefault(run_id, []).append(scorer.name)
        job = [(run_id, need[run_id]) for run_id, _ in chunk if run_id in need]
        summary.skipped += len(chunk) - len(job)
        yield job, len(chunk)


def _load(
    store: Any, job: _Job, unreadable: list[tuple[str, str]]
) -> Iterator[tuple[Trace, list[str]]]:
    """The traces of a job's runs, each read when the one before it has been taken (see
    :func:`_score_traces`); a run the store cannot read is added to ``unreadable``."""
    wanted = dict(job)

    def skip(exc: UnreadableRunError) -> None:
        unreadable.append((exc.run_id, exc.reason))

    traces = store.query_traces(
        RunFilter(run_ids=list(wanted)), newest_first=False, on_unreadable=skip
    )
    for trace in traces:
        names = wanted.get(trace.id)
        if names is not None:
            yield trace, names
        del trace  # not kept while the next run is read


def _score_job(
    store: Any,
    job: _Job,
    resolver: _Resolver,
    unreadable: list[tuple[str, str]],
    made: Callable[[Score], _M],
    made_row: Callable[[ScoreRow], _M] | None = None,
) -> list[_M]:
    """Load a chunk's traces and score them (in this process)."""
    return _score_traces(_load(store, job, unreadable), resolver, made, made_row)


def _score_traces(
    items: Iterable[tuple[Trace, list[str]]],
    resolver: _Resolver,
    made: Callable[[Score], _M],
    made_row: Callable[[ScoreRow], _M] | None = None,
) -> list[_M]:
    """``made(score)`` of the score of each run by each of its scorers, in that order, run by
    run: a run's trace and evidence are dropped as soon as its scores are made, before the next
    run is read, and each score is handed to ``made`` as soon as it is made (what ``made`` does
    not keep of it is freed then: :func:`_row_maker`).

    With ``made_row``, a scorer that can give the stored row of a score without the score
    (:class:`~agentlens.eval._scorer.WithRow`: the grounding scorers, for a run that passed)
    is asked for it, and ``made_row(row)`` takes the place of ``made(score)``: for a caller
    that keeps only the scores something reads (:func:`_needs_score`), such a row is all it
    would keep anyway.

    A chunk's runs are never all in memory at once, so each run's objects are freed while they
    are still in the CPU's caches, and the next run is built in the memory they leave (freeing
    a whole chunk's traces and evidence at its end touched megabytes of cold memory: 4-5% of
    ``agentlens score``). A run that one of its scorers scores asynchronously is kept, with its
    evidence, until the chunk's other runs are scored, and those runs are then scored
    concurrently (:func:`_run_async`), each by all of its scorers."""
    scores: list[_M] = []
    waiting: list[tuple[int, Trace, Evidence, Scorer]] = []
    """The async runs' work, each with the number of scores before its own."""
    for trace, names in items:
        evidence = Evidence(
            trace, resolver.settings.for_agent(trace.agent).evidence, history=resolver.history
        )
        scorers = [resolver.get(name, trace.agent) for name in names]
        if any(s.is_async for s in scorers):
            waiting.extend((len(scores), trace, evidence, s) for s in scorers)
        else:
            for s in scorers:
                if made_row is None:
                    result = s.score(trace, evidence)
                else:
                    given = s._score_or_row(trace, evidence, s.stored_version)
                    if isinstance(given, ScoreRow):
                        scores.append(made_row(given))
                        continue
                    result = given
                scores.append(
                    made(Score.of(result, run_id=trace.id, scorer=s.name, version=s.stored_version))
                )
        del trace, evidence  # not kept while the next run is read
    if waiting:
        results = _run_async([(t, ev, s) for _, t, ev, s in waiting])
        # from the last: an insertion moves none of the places still to fill
        for (at, t, _, s), r in reversed(list(zip(waiting, results, strict=True))):
            scores.insert(
                at, made(Score.of(r, run_id=t.id, scorer=s.name, version=s.stored_version))
            )
    return scores


_ASYNC_CONCURRENCY = 16
"""How many (run, scorer) pairs an async batch scores at once (judges bound their own calls)."""


def _run_async(work: list[tuple[Trace, Evidence, Scorer]]) -> list[ScoreResult]:
    import asyncio  # (with ssl and sockets: about 20 ms, for async scorers only)

    async def main() -> list[ScoreResult]:
        gate = asyncio.Semaphore(_ASYNC_CONCURRENCY)

        async def one(t: Trace, ev: Evidence, s: Scorer) -> ScoreResult:
            async with gate:
                return await s.ascore(t, ev)

        return list(await asyncio.gather(*(one(t, ev, s) for t, ev, s in work)))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    # Called from inside an event loop: run the batch's own loop in a helper thread.
    with cf.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


# ---------------------------------------------------------------- parallel scoring


def _origin_module(scorer: Scorer) -> str | None:
    """The module that defines a scorer's factory (importing it registers the scorer)."""
    module = getattr(scorer.factory, "__module__", None)
    if not module or module in ("__main__", "__mp_main__"):
        return None  # the spawn start method re-imports the main module itself
    return str(module)


_worker: dict[str, Any] = {}


def _init_worker(
    url: str,
    specs: list[tuple[str, dict[str, Any], str | None]],
    settings: Settings,
    path: list[str],
) -> None:
    """Runs once in each worker process: open the store, rebuild the scorers. Ctrl-C is the
    parent's to handle (it stops the pool); the worker process lives for the batch, so its
    collector is set for it once: no automatic collection, one after each chunk (see
    :func:`_few_collections`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()
    for entry in path:
        if entry not in sys.path:
            sys.path.append(entry)
    from agentlens.store import open_store

    bases = []
    for name, options, module in specs:
        if module is not None:
            importlib.import_module(module)
        base = get_scorer(name)
        bases.append(base.with_options(**options) if options else base)
    _worker["store"] = open_store(url)
    _worker["resolver"] = _Resolver(bases, settings, StepHistory(_worker["store"]))
    gc.freeze()  # what the worker imported and built stays out of every collection


def _work(job: _Job) -> tuple[list[ScoreRow], list[bool], list[tuple[str, str]]]:
    """Score one chunk in a worker; the scores go back to the parent as rows (:class:`ScoreRow`,
    without the score: its JSON, what the store writes anyway, is in the row), whether the
    parent may store each row as it came (:func:`dump_exactly`: the JSON is the score's as
    the parent would read it back), and the runs that could not be read."""
    unreadable: list[tuple[str, str]] = []
    sent = _score_traces(
        _load(_worker["store"], job, unreadable), _worker["resolver"], _sent, _sent_row
    )
    _between_chunks()
    return [row for row, _ in sent], [same for _, same in sent], unreadable


def _sent(score: Score) -> tuple[ScoreRow, bool]:
    """What a worker sends of a score: its row without it, and whether its JSON is vouched for."""
    doc, same = dump_exactly(score)
    return ScoreRow.of(score, doc, keep=False), same


def _sent_row(row: ScoreRow) -> tuple[ScoreRow, bool]:
    """What a worker sends of a row a scorer gave without its score: the row, vouched for (its
    JSON is written from values of their fields' types: see
    :func:`~agentlens.model._score.passed_row`)."""
    return row, True


def _as_made(row: ScoreRow) -> ScoreRow:
    """:func:`_row_maker`'s row for a row a scorer gave without its score: the row itself (a
    passed score with a detail, which nothing reads: :func:`_needs_score`)."""
    return row


def _needs_score(row: ScoreRow) -> bool:
    """Whether anything reads the score of a row it stores: the findings of a score that did not
    pass (the review derives the run's flags from them) or of one without a detail (the
    command's table shows its first findings instead)."""
    return row.verdict != "passed" or (not row.detail and row.finding_count > 0)


def _row_maker(keep_all: bool) -> Callable[[Score], ScoreRow]:
    """The row of each score made in this process, with the score kept in it when ``keep_all``
    (the caller wants every score) or :func:`_needs_score`. Made as each score is made, so that
    a score not kept is freed while its objects are still in the CPU's caches (freeing a
    chunk's scores at its end touched cold memory: about 3% of ``agentlens score``)."""
    if keep_all:
        return ScoreRow.of

    def made(score: Score) -> ScoreRow:
        row = ScoreRow.of(score, keep=False)
        return row._replace(score=score) if _needs_score(row) else row

    return made


def _scores_of(rows: list[ScoreRow]) -> list[Score]:
    """The score of each row: the one it holds, else read back from its JSON."""
    return [Score.model_validate_json(r.doc) if r.score is None else r.score for r in rows]


def _received(rows: list[ScoreRow], vouched: list[bool], parse_all: bool) -> list[ScoreRow]:
    """A worker's rows as the parent stores them. A row whose JSON the worker vouched for is
    stored as it came; its score is read back from that JSON only when ``parse_all`` (the
    caller wants every score) or :func:`_needs_score`. Any other row is read back and written
    again from what was read, as one process would store that score."""
    out = []
    for row, same in zip(rows, vouched, strict=True):
        if not same:
            row = ScoreRow.of(Score.model_validate_json(row.doc))
        elif parse_all or _needs_score(row):
            row = row._replace(score=Score.model_validate_json(row.doc))
        out.append(row)
    return out


def _run_parallel(
    url: str,
    bases: list[Scorer],
    cfg: Settings,
    jobs: Iterator[tuple[_Job, int]],
    resolver: _Resolver,
    workers: int,
    record: Callable[[list[ScoreRow], int, list[tuple[str, str]]], None],
    parse_all: bool,
) -> None:
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    specs = [(b.name, dict(b.options), _origin_module(b)) for b in bases]
    context = multiprocessing.get_context("spawn")
    pool = cf.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(url, specs, cfg, list(sys.path)),
    )
    # In submission order: chunks are stored and reported in the order of the runs, whatever
    # worker finishes first (at most 2 * workers in flight, so the others keep working).
    in_flight: deque[
        tuple[cf.Future[tuple[list[ScoreRow], list[bool], list[tuple[str, str]]]] | None, int]
    ]
    in_flight = deque()
    try:

        def drain(block_until: int) -> None:
            while len(in_flight) > block_until:
                fut, runs_in_job = in_flight.popleft()
                if fut is None:  # a chunk with nothing left to score
                    record([], runs_in_job, [])
                    continue
                sent, vouched, unreadable = fut.result()
                for scorer, version in dict.fromkeys((r.scorer, r.version) for r in sent):
                    _check_version(scorer, version, resolver)  # in order: the same error first
                rows = _received(sent, vouched, parse_all)
                del sent
                record(rows, runs_in_job, [(r, why) for r, why in unreadable])
                del rows
                _between_chunks()

        for job, runs_in_job in jobs:
            in_flight.append((pool.submit(_work, job) if job else None, runs_in_job))
            drain(2 * workers - 1)
        drain(0)
    except BrokenProcessPool:
        pool.shutdown(wait=True, cancel_futures=True)
        raise ScorerError(
            "a scoring worker process died (out of memory, or killed); the scores of the "
            "chunks before it are stored: run the same command again to continue"
        ) from None
    except BaseException:
        for fut, _ in in_flight:
            if fut is not None:
                fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _check_version(scorer: str, version: str, resolver: _Resolver) -> None:
    known = {s.stored_version for (name, _), s in resolver._cache.items() if name == scorer}
    if known and version not in known:
        raise ScorerError(
            f"scorer {scorer!r} has version {version} in a worker process but "
            f"{', '.join(sorted(known))} here; define it in an importable module, not inline"
        )
