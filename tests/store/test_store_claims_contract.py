"""Review claims (``claim_review``): several workers share the review queue; every backend."""

from __future__ import annotations

import time

from store_factories import make_trace

from agentlens.store import TraceStore


def test_workers_claim_disjoint_runs_oldest_first(store: TraceStore) -> None:
    for i in range(10):
        store.put_traces([make_trace(i)])
    a = store.claim_review("a", limit=4)
    b = store.claim_review("b", limit=4)
    assert [p.run_id for p in a] == [f"r{i:05d}" for i in range(4)]
    assert [p.run_id for p in b] == [f"r{i:05d}" for i in range(4, 8)]
    c = store.claim_review("c", limit=10)
    assert [p.run_id for p in c] == ["r00008", "r00009"]
    assert store.claim_review("d") == []
    # claims do not hide runs from the queue itself, or from the lag
    assert len(store.pending_review()) == 10 and store.review_lag().pending == 10
    assert store.mark_reviewed(a + b + c) == 10
    assert store.claim_review("a") == [] and store.pending_review() == []


def test_an_expired_lease_is_claimed_again(store: TraceStore) -> None:
    store.put_traces([make_trace(i) for i in range(3)])
    dead = store.claim_review("dead", limit=2, lease_s=0.2)
    assert len(dead) == 2
    assert [p.run_id for p in store.claim_review("alive", limit=5)] == ["r00002"]
    time.sleep(0.3)
    again = store.claim_review("alive", limit=5)
    assert [p.run_id for p in again] == [p.run_id for p in dead]
    assert store.mark_reviewed(again) == 2


def test_a_run_replaced_while_claimed_is_pending_again_unclaimed(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    (claimed,) = store.claim_review("a", lease_s=600)
    store.put_traces([make_trace(1, output="changed")])
    (fresh,) = store.claim_review("b", lease_s=600)
    assert fresh.run_id == claimed.run_id and fresh.stored_at != claimed.stored_at
    assert store.mark_reviewed([claimed]) == 0  # the old version: the new one stays pending
    assert store.mark_reviewed([fresh]) == 1
    assert store.pending_review() == []


def test_an_identical_rewrite_keeps_the_claim(store: TraceStore) -> None:
    store.put_traces([make_trace(1)])
    (claimed,) = store.claim_review("a", lease_s=600)
    store.put_traces([make_trace(1)])  # identical: nothing changes
    assert store.claim_review("b") == []
    assert store.mark_reviewed([claimed]) == 1
