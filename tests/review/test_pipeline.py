"""review_pending: score pending runs, derive flags, content flags, callbacks, the queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from review_factories import fabricated

from agentlens.config import Settings
from agentlens.errors import ConfigError
from agentlens.review import (
    FlaggedRun,
    content_flags,
    on_flagged,
    review_pending,
    review_settings,
    review_stats,
)
from agentlens.store import RunFilter, TraceStore


def test_a_fabricated_id_is_flagged_with_its_reason_and_its_content(store: TraceStore) -> None:
    got: list[FlaggedRun] = []
    on_flagged(got.append)
    store.put_traces(
        [fabricated("r1"), fabricated("r2", order="ORD-1234", links={"blog_post": "9"})]
    )
    assert review_pending(store, settings=Settings()) == 2
    flags = store.get_flags("r1")
    assert flags is not None and flags.hallucination_detected
    assert flags.reason == "fabricated_grounding: ORD-9999 is not in the evidence"
    assert [r.id for r in store.list_runs(RunFilter(flagged=True))] == ["r1"]
    clean = store.get_flags("r2")
    assert clean is not None and not clean.hallucination_detected
    flag = content_flags("blog_post", "123", db=store)
    assert flag.hallucination_suspected and flag.runs[0].run_id == "r1"
    assert not content_flags("blog_post", "9", db=store).hallucination_suspected
    assert [(r.run_id, r.reason, r.links) for r in got] == [
        ("r1", "fabricated_grounding: ORD-9999 is not in the evidence", {"blog_post": "123"})
    ]
    assert got[0].failure_modes == ("fabricated_grounding",)
    assert store.pending_review() == []
    assert review_pending(store, settings=Settings()) == 0  # nothing left: no second callback
    assert len(got) == 1


def test_a_replaced_run_is_reviewed_again_and_clears_its_content(store: TraceStore) -> None:
    store.put_traces([fabricated("r1")])
    review_pending(store, settings=Settings())
    assert content_flags("blog_post", "123", db=store).hallucination_suspected
    store.put_traces([fabricated("r1", order="ORD-1234")])  # the answer was fixed
    assert review_pending(store, settings=Settings()) == 1
    assert not content_flags("blog_post", "123", db=store).hallucination_suspected


def test_runs_already_scored_are_not_scored_again(store: TraceStore) -> None:
    from agentlens.eval import score_runs

    store.put_traces([fabricated("r1")])
    score_runs(store, ["no_fabricated_refs"], settings=Settings())
    flags = store.get_flags("r1")
    assert flags is not None and flags.hallucination_detected  # `agentlens score` derives flags
    before = {(s.scorer, s.scored_at) for s in store.get_scores("r1")}
    review_pending(store, settings=Settings())
    after = {(s.scorer, s.scored_at) for s in store.get_scores("r1")}
    assert before <= after  # the existing score was kept, the others added


def test_role_scorers_and_options_come_from_config(
    store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    settings = settings_from(
        """
[review]
scorers = ["no_fabricated_refs"]
[agents.planner.review]
scorers = ["excessive_steps"]
[agents.planner.scorers.excessive_steps]
max_steps = 0
"""
    )
    store.put_traces([fabricated("r1"), fabricated("r2", agent="planner", order="ORD-1234")])
    review_pending(store, settings=settings)
    assert {s.scorer for s in store.get_scores("r1")} == {"no_fabricated_refs"}
    assert {s.scorer for s in store.get_scores("r2")} == {"excessive_steps"}
    flags = store.get_flags("r2")
    assert flags is not None and flags.failure_modes == ("excessive_steps",)


def test_async_and_failing_callbacks(store: TraceStore, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    async def slow_ok(run: FlaggedRun) -> None:
        await asyncio.sleep(0)
        seen.append(run.run_id)

    def broken(run: FlaggedRun) -> None:
        raise RuntimeError("callback bug")

    on_flagged(broken)
    on_flagged(slow_ok)
    before = review_stats().callback_failures
    store.put_traces([fabricated("r1")])
    assert review_pending(store, settings=Settings()) == 1
    assert seen == ["r1"]
    assert review_stats().callback_failures == before + 1
    assert "callback bug" in caplog.text


def test_base_url_links_the_run(
    store: TraceStore, settings_from: Callable[[str], Settings]
) -> None:
    got: list[FlaggedRun] = []
    on_flagged(got.append)
    store.put_traces([fabricated("r1")])
    review_pending(store, settings=settings_from('[review]\nbase_url = "https://lens.example/"\n'))
    assert got[0].url == "https://lens.example/runs/r1"
    # an id that is no plain path segment is escaped, as the dashboard's own links are
    store.put_traces([fabricated("team/run 1?#%")])
    review_pending(store, settings=settings_from('[review]\nbase_url = "https://lens.example"\n'))
    assert got[1].url == "https://lens.example/runs/team%2Frun%201%3F%23%25"


def test_limit_bounds_a_round(store: TraceStore) -> None:
    store.put_traces([fabricated(f"r{i}") for i in range(5)])
    assert review_pending(store, settings=Settings(), limit=2, batch_size=1) == 2
    assert len(store.pending_review()) == 3


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[review]\nscorers = ["no_such_scorer"]\n', "review.scorers"),
        ('[review]\nwebhook = "ftp://example.com/hook"\n', "review.webhook"),
        ('[review]\nwebhook = "example.com/hook"\n', "review.webhook"),
        ('[review]\nscorers = ["faithful_synthesis"]\n', "review.scorers"),
        ('[review]\ncolour = "red"\n', "review"),
        ('[agents.a.review]\nscorers = ["nope"]\n', "agents.a.review.scorers"),
        ("[review]\nwebhook_attempts = 0\n", "review.webhook_attempts"),
    ],
)
def test_bad_review_config_is_a_config_error_naming_file_and_key(
    settings_from: Callable[[str], Settings], tmp_path: Path, toml: str, key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        review_settings(settings_from(toml))  # the loader or the review check refuses it
    message = str(info.value)
    assert str(tmp_path / "agentlens.toml") in message
    assert key in message


def test_a_judge_for_review_allows_judged_scorers(settings_from: Callable[[str], Settings]) -> None:
    review = review_settings(
        settings_from('[review]\njudge = "offline"\nscorers = ["faithful_synthesis"]\n')
    )
    assert review.scorers == ("faithful_synthesis",)
    assert review.judge == "offline"


def test_review_settings_come_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlens.config import load_settings

    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK", "https://hooks.example/agentlens")
    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK_SECRET", "from-env")
    monkeypatch.setenv("AGENTLENS_REVIEW_SCORERS", "no_fabricated_refs, excessive_steps")
    review = review_settings(load_settings(use_file=False))
    assert review.webhook == "https://hooks.example/agentlens"
    assert review.webhook_secret == "from-env"
    assert review.scorers == ("no_fabricated_refs", "excessive_steps")
    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK", "mailto:x@example.com")
    with pytest.raises(ConfigError, match=r"^AGENTLENS_REVIEW_WEBHOOK must be an http"):
        review_settings(load_settings(use_file=False))


def test_an_unreadable_run_does_not_block_the_queue(
    store: TraceStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    store.put_traces([fabricated("r1"), fabricated("r2")])
    conn = sqlite3.connect(tmp_path / "agentlens.db")
    conn.execute("UPDATE runs SET doc = '{broken' WHERE id = 'r1'")
    conn.commit()
    conn.close()
    assert review_pending(store, settings=Settings()) == 2
    assert store.pending_review() == []
    flags = store.get_flags("r2")
    assert flags is not None and flags.hallucination_detected
    assert "unreadable" in caplog.text


def test_reviewer_flush_says_whether_the_review_succeeded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agentlens.review import Reviewer
    from agentlens.store import open_store

    url = f"sqlite:///{tmp_path / 'flush.db'}"
    closed = open_store(url)
    closed.put_traces([fabricated("r1")])
    closed.close()  # every read of it now fails: the review round fails
    failing = Reviewer(closed, settings=Settings(), interval=60.0)
    try:
        assert failing.flush(20.0) is False
    finally:
        failing.shutdown(5.0)
    assert "review failed" in caplog.text
    live = open_store(url)
    working = Reviewer(live, settings=Settings(), interval=60.0)
    try:
        assert working.flush(30.0) is True
        assert live.pending_review() == []
    finally:
        working.shutdown(5.0)
        live.close()
    assert working.flush(1.0) is False  # shut down


def test_a_file_cannot_send_an_environment_secret_to_its_own_webhook(
    settings_from: Callable[[str], Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = '[review]\nwebhook = "https://hooks.example/from-file"\n'
    assert review_settings(settings_from(hook)).webhook == "https://hooks.example/from-file"
    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK_SECRET", "users-secret")
    with pytest.raises(ConfigError, match=r"agentlens\.toml: review\.webhook: a webhook set in a"):
        review_settings(settings_from(hook))
    monkeypatch.setenv("AGENTLENS_REVIEW_ALLOW_FILE_WEBHOOK", "1")  # the explicit opt-in
    assert review_settings(settings_from(hook)).webhook_secret == "users-secret"
    monkeypatch.delenv("AGENTLENS_REVIEW_ALLOW_FILE_WEBHOOK")
    monkeypatch.setenv("AGENTLENS_REVIEW_WEBHOOK", "https://hooks.example/mine")
    review = review_settings(settings_from(hook))  # the environment's URL and secret together
    assert (review.webhook, review.webhook_secret) == ("https://hooks.example/mine", "users-secret")
    monkeypatch.delenv("AGENTLENS_REVIEW_WEBHOOK")
    monkeypatch.delenv("AGENTLENS_REVIEW_WEBHOOK_SECRET")
    own = review_settings(settings_from(hook + 'webhook_secret = "the-files-own"\n'))
    assert own.webhook_secret == "the-files-own"  # the file's secret with the file's URL


def test_review_rows_are_checked_when_the_settings_load(
    settings_from: Callable[[str], Settings],
) -> None:
    with pytest.raises(ConfigError, match=r"agentlens\.toml: review\.webhook must be an http"):
        settings_from('[review]\nwebhook = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"review\.webhook_secret must be a non-empty string"):
        settings_from('[review]\nwebhook_secret = ""\n')
    with pytest.raises(ConfigError, match=r"review: unknown key 'allow_file_webhook'"):
        settings_from("[review]\nallow_file_webhook = true\n")  # a file cannot opt itself in
    defaults = settings_from("").review  # every review row with its default, in one place
    assert defaults["on_capture"] is True and defaults["webhook_attempts"] == 6
    assert review_settings(settings_from("")).scorers == (
        "no_fabricated_refs",
        "parametric_leakage",
        "repeated_tool_calls",
        "excessive_steps",
        "no_progress",
    )
