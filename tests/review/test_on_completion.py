"""End to end: the real capture SDK writes to a real SQLite file, review runs in the background
on completion, and a real HTTP receiver on a loopback socket gets the signed webhook."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


_IMPLICIT_AGENT = """
import json, sys, threading, time
import agentlens
from agentlens.store import open_store

@agentlens.tool
def get_order(order_id):
    return {"order": order_id, "ships": "2026-03-04"}

started = time.monotonic()
with agentlens.run(agent="support", input="where is ORD-1234?", links={"blog_post": "123"}) as run:
    order = get_order("ORD-1234")
    run.output = "Your order ORD-9999 ships on " + order["ships"] + "."
exit_s = time.monotonic() - started
store = open_store(sys.argv[1])
flags = None
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:  # poll: the review happens in the background
    if store.count_runs() and not store.pending_review():
        flags = store.get_flags(run.id)
        break
    time.sleep(0.05)
agentlens.flush(10)
from agentlens.review import content_flags
post = content_flags("blog_post", "123", db=store)
print(json.dumps({
    "exit_s": exit_s,
    "stored": store.count_runs(),
    "pending": len(store.pending_review()),
    "flagged": flags is not None and flags.hallucination_detected,
    "reason": flags.reason if flags is not None else None,
    "post_flagged": post.hallucination_suspected,
    "threads": sorted(t.name for t in threading.enumerate()),
}))
"""


def _implicit_run(tmp_path: Path, config: str, wait_s: float) -> tuple[dict[str, Any], str]:
    """Run the agent above in a new interpreter with only AGENTLENS_DB (and an explicit, possibly
    empty, configuration file) set; return what it printed and its stderr."""
    import os
    import subprocess
    import sys

    (tmp_path / "agentlens.toml").write_text(config, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'implicit.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLENS_")}
    env |= {
        "AGENTLENS_DB": url,
        "AGENTLENS_CONFIG": str(tmp_path / "agentlens.toml"),
        "PYTHONPATH": str(Path(agentlens.__file__).parents[1]),
    }
    out = subprocess.run(
        [sys.executable, "-c", _IMPLICIT_AGENT, url, str(wait_s)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=wait_s + 120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_with_only_agentlens_db_set_runs_are_reviewed_in_the_background(tmp_path: Path) -> None:
    got, _ = _implicit_run(tmp_path, "", wait_s=60.0)
    assert got["stored"] == 1 and got["pending"] == 0
    assert got["flagged"] is True
    assert got["reason"] == "fabricated_grounding: ORD-9999 is not in the evidence"
    assert got["post_flagged"] is True
    assert "agentlens-reviewer" in got["threads"]  # reviewed off the agent's thread
    assert got["exit_s"] < 2.0  # generous: the block's exit only queues the run


def test_with_only_agentlens_db_bad_review_settings_never_reach_the_agent(
    tmp_path: Path,
) -> None:
    got, stderr = _implicit_run(tmp_path, '[review]\nscorers = ["nope"]\n', wait_s=3.0)
    assert got["stored"] == 1 and got["pending"] == 1  # stored, left pending for later
    assert got["flagged"] is False and "agentlens-reviewer" not in got["threads"]
    assert "review on capture is off" in stderr and "review.scorers" in stderr
