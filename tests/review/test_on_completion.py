"""End to end: the real capture SDK writes to a real SQLite file, review runs in the background
on completion, and a real HTTP receiver on a loopback socket gets the signed webhook."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from review_factories import Receiver

import agentlens
from agentlens.model import ScoreResult
from agentlens.review import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    FlaggedRun,
    content_flags,
    on_flagged,
    precision,
    set_verdict,
    verify_signature,
)
from agentlens.store import RunFilter, open_store

SECRET = "e2e-secret"


@agentlens.tool
def get_order(order_id: str) -> dict[str, str]:
    return {"order": order_id, "ships": "2026-03-04"}


def _agent(order_cited: str) -> str:
    with agentlens.run(
        agent="support", input="where is ORD-1234?", links={"blog_post": "123"}
    ) as run:
        order = get_order("ORD-1234")
        run.output = f"Your order {order_cited} ships on {order['ships']}."
    return run.id


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "agentlens.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("AGENTLENS_CONFIG", str(path))


@pytest.mark.usefixtures("fresh_capture")
def test_a_fabricated_id_is_flagged_in_the_background_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    receiver.fail_first = 3  # the receiver fails three times, then accepts
    _config(
        tmp_path,
        monkeypatch,
        f"""
[review]
webhook = "{receiver.url}"
webhook_secret = "{SECRET}"
webhook_backoff = 0.05
base_url = "https://lens.example"
""",
    )
    url = f"sqlite:///{tmp_path / 'agentlens.db'}"
    agentlens.configure(db=url, flush_interval=0.05)
    fired: list[FlaggedRun] = []
    on_flagged(fired.append)

    bad = _agent("ORD-9999")
    good = _agent("ORD-1234")

    store = open_store(url)
    try:
        assert _wait(lambda: len(store.pending_review()) == 0 and store.count_runs() == 2)
        assert _wait(lambda: len(receiver.accepted) == 1)
        flags = store.get_flags(bad)
        assert flags is not None and flags.hallucination_detected
        assert flags.reason == "fabricated_grounding: ORD-9999 is not in the evidence"
        good_flags = store.get_flags(good)
        assert good_flags is not None and not good_flags.hallucination_detected
        assert [r.id for r in store.list_runs(RunFilter(flagged=True))] == [bad]
        post = content_flags("blog_post", "123", db=store)
        assert post.hallucination_suspected and [r.run_id for r in post.runs] == [bad]

        assert [r.run_id for r in fired] == [bad]  # the callback fired once
        assert fired[0].url == f"https://lens.example/runs/{bad}"

        # one signed webhook, delivered once after three 500s, with one delivery id
        assert len(receiver.requests) == 4 and len(receiver.accepted) == 1
        assert len({r["headers"][DELIVERY_HEADER] for r in receiver.requests}) == 1
        accepted = receiver.accepted[0]
        assert verify_signature(accepted["body"], SECRET, accepted["headers"][SIGNATURE_HEADER])
        body = json.loads(accepted["body"])
        assert body["run_id"] == bad and body["links"] == {"blog_post": "123"}
        assert body["hallucination_reason"] == flags.reason

        # a false positive verdict clears the content flag and moves the precision figure
        assert precision(db=store) == []
        set_verdict(bad, "false_positive", note="the order was renamed", by="ana", db=store)
        assert not content_flags("blog_post", "123", db=store).hallucination_suspected
        (by_scorer, _) = precision(db=store)
        assert (by_scorer.key, by_scorer.confirmed, by_scorer.false_positive) == (
            "no_fabricated_refs",
            0,
            1,
        )
        assert by_scorer.precision == 0.0
        assert store.review_queue() == []
    finally:
        store.close()
    time.sleep(0.2)
    assert len(receiver.requests) == 4  # nothing was sent again


_slow_release = threading.Event()


@agentlens.scorer(name="test_slow_scorer", version="1")
def _slow(*, trace: agentlens.Trace) -> ScoreResult:
    _slow_release.wait(10)  # held until the test releases it: review is stuck meanwhile
    return ScoreResult(passed=False, detail="slow and unhappy")


@pytest.mark.usefixtures("fresh_capture")
def test_a_slow_scorer_and_a_hanging_webhook_do_not_delay_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    receiver.hang_s = 3.0
    _config(
        tmp_path,
        monkeypatch,
        f"""
[review]
scorers = ["test_slow_scorer", "no_fabricated_refs"]
webhook = "{receiver.url}"
webhook_timeout = 5
""",
    )
    url = f"sqlite:///{tmp_path / 'agentlens.db'}"
    agentlens.configure(db=url, flush_interval=0.01)
    _slow_release.clear()
    try:
        exits = []
        for i in range(20):
            with agentlens.run(agent="support", input=f"q{i}") as run:
                run.output = "ORD-9999"
                start = time.perf_counter()
            exits.append(time.perf_counter() - start)
            time.sleep(0.01)  # let capture's thread write and notify the stuck reviewer
        # generous: the block's exit only queues the run; review and the webhook are elsewhere
        assert max(exits) < 0.5, exits
    finally:
        _slow_release.set()
    store = open_store(url)
    try:
        assert _wait(lambda: store.count_runs(RunFilter(flagged=True)) == 20, timeout=60)
    finally:
        store.close()
