"""The backlog gauges of /metrics: exact while counting is quick, never a wait when it is slow."""

from __future__ import annotations

import threading

from agentlens.server._backlog import MAX_REUSE_S, SLOW_S, CachedCount


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Counter:
    """Counts the backlog; each count "takes" ``took`` seconds of the fake clock, and can be
    held until released (a slow count running in its thread)."""

    def __init__(self, clock: Clock, took: float) -> None:
        self.clock, self.took, self.calls = clock, took, 0
        self.release = threading.Event()
        self.release.set()
        self.done = threading.Event()

    def __call__(self) -> int:
        self.calls += 1
        self.release.wait(5)
        self.clock.now += self.took
        self.done.set()
        return self.calls


def test_a_quick_count_is_made_again_once_it_is_stale() -> None:
    clock = Clock()
    counter = Counter(clock, took=0.001)
    gauges = CachedCount(counter, clock=clock)
    assert gauges.get()[0] == 1
    assert gauges.get()[0] == 1  # reused: younger than 20x its 1 ms
    clock.now += 0.05
    value, age = gauges.get()
    assert (value, age) == (2, 0.0)  # quick: recounted before answering


def test_a_slow_count_is_refreshed_in_the_background_and_the_old_value_served() -> None:
    clock = Clock()
    counter = Counter(clock, took=SLOW_S * 4)
    gauges = CachedCount(counter, clock=clock)
    assert gauges.get()[0] == 1  # the first scrape waits
    clock.now += 10  # reused for 20 x 1 s = 20 s
    assert gauges.get() == (1, 10)
    clock.now += 15
    counter.release.clear()
    counter.done.clear()
    value, age = gauges.get()  # stale: served at once, a recount starts
    assert (value, age) == (1, 25)
    assert gauges.get()[0] == 1  # one recount at a time
    counter.release.set()
    assert counter.done.wait(5)
    for _ in range(100):
        if gauges.get()[0] == 2:
            break
        threading.Event().wait(0.01)
    assert gauges.get()[0] == 2
    assert counter.calls == 2


def test_a_failed_count_raises_on_the_first_scrape_and_is_retried() -> None:
    clock = Clock()
    calls = []

    def count() -> tuple[int, int]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("store down")
        return (7, 1)

    gauges = CachedCount(count, clock=clock)
    try:
        gauges.get()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the first count's error was swallowed")
    assert gauges.get()[0] == (7, 1)


def test_no_count_is_reused_past_the_cap() -> None:
    clock = Clock()
    counter = Counter(clock, took=MAX_REUSE_S)  # 20x would be 100 minutes
    gauges = CachedCount(counter, clock=clock)
    assert gauges.get()[0] == 1
    clock.now += MAX_REUSE_S * 0.9
    assert gauges.get()[0] == 1
    clock.now += MAX_REUSE_S * 0.2
    counter.done.clear()
    assert gauges.get()[0] == 1  # stale: served, and a recount starts
    assert counter.done.wait(5)
    for _ in range(100):
        if counter.calls == 2:
            break
        threading.Event().wait(0.01)
    assert counter.calls == 2
