"""The grounding benchmark still runs, end to end, on a small store (its figures are in
docs/grounding.md; these tests only keep the scripts from rotting, they time nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ROOT = BENCHMARKS.parent


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=300
    )
    return proc.stdout


def test_bench_grounding_runs_every_pass_over_the_same_runs(tmp_path: Path) -> None:
    db = tmp_path / "bench.db"
    out = _run(str(BENCHMARKS / "bench_grounding.py"), "--runs", "60", "--db", str(db))
    passes = dict(re.findall(r"^\s*(\w+): 60 runs in .*flagged (.*)$", out, re.M))
    assert set(passes) == {"load", "naive", "naive_full", "naive_both", "refs", "grounding"}
    # the naive checks flag every run ($1,834.20 is never a substring of a JSON 1834.2) ...
    for name in ("naive", "naive_full", "naive_both"):
        assert passes[name] == "{'naive': 60}"
    # ... the scorers only the runs with a fabrication, and the same ones alone or together
    refs = re.search(r"'no_fabricated_refs': (\d+)", passes["refs"])
    both = re.search(r"'no_fabricated_refs': (\d+)", passes["grounding"])
    assert refs is not None and both is not None
    assert refs.group(1) == both.group(1)
    assert 0 < int(refs.group(1)) < 60
    for a, b in (("grounding", "naive"), ("grounding", "naive_both"), ("refs", "naive_full")):
        assert re.search(rf"^{a} / {b} time: \d+\.\d\dx", out, re.M)
    assert db.exists()  # --db keeps the store for ab_grounding.py


def test_ab_grounding_compares_two_trees_on_every_pass(tmp_path: Path) -> None:
    db = tmp_path / "bench.db"
    _run(str(BENCHMARKS / "bench_grounding.py"), "--runs", "20", "--db", str(db))
    out = _run(
        str(BENCHMARKS / "ab_grounding.py"),
        "--db",
        str(db),
        "--runs",
        "20",
        "--rounds",
        "1",
        str(ROOT),
        str(ROOT),
    )
    assert out.count(f"{ROOT}\n") == 2
    assert len(re.findall(r"^\s+naive_both: +[\d,]+ runs/s", out, re.M)) == 2
    assert len(re.findall(r"grounding / naive_both time: \d+\.\d\dx", out)) == 2


def test_bench_postgres_runs_on_a_small_store() -> None:
    import json

    from pg_support import PG_SERVER, require_postgres

    require_postgres()
    out = _run(
        str(BENCHMARKS / "bench_postgres.py"),
        "--runs",
        "40",
        "--big",
        "3000",
        "--repeat",
        "1",
        "--pg",
        PG_SERVER,
    )
    found = json.loads(out)
    # the same runs give the same rate on both backends; the bulk store holds what was asked
    assert found["sqlite"]["runs"] == found["postgres"]["runs"] == 40
    assert found["sqlite"]["flagged"] == found["postgres"]["flagged"] == 4
    assert found["postgres_big"]["runs"] == 3000
    assert found["postgres_big"]["flagged"] == 90


@pytest.mark.e2e
def test_bench_server_runs_end_to_end() -> None:
    """A few seconds of the server benchmark (its figures are in docs/server.md)."""
    out = _run(
        str(BENCHMARKS / "bench_server.py"), "--seconds", "3", "--clients", "1", "--sample", "1",
        "--runs-per-request", "5",
    )  # fmt: skip
    acked = re.search(r"^acknowledged: (\d+) spans", out, re.M)
    committed = re.search(r"^committed:\s+(\d+) spans", out, re.M)
    assert acked is not None and committed is not None
    assert int(acked.group(1)) > 0
    assert int(committed.group(1)) >= int(acked.group(1))  # nothing acknowledged is missing
    assert "baseline:" in out and "server RSS:" in out


def test_bench_review_measures_exit_throughput_and_lag() -> None:
    out = _run(
        str(BENCHMARKS / "bench_review.py"), "--runs", "40", "--exits", "20", "--rounds", "1"
    )
    assert re.search(r"on / off: median \d+\.\d\dx, p99 \d+\.\d\dx", out)
    assert re.search(r"throughput: reviewed 40 runs \(20 flagged\) at [\d,]+ runs/s", out)
    assert re.search(r"lag: 40 runs captured in .* all reviewed \d+\.\d\d s after", out)


def test_bench_dashboard_runs_every_route_and_page_on_a_small_store(tmp_path: Path) -> None:
    """The read-path benchmark on a small fill (its figures, at 1M runs, are in
    docs/server.md); every route and page it calls must answer 200, or it exits non-zero."""
    out = _run(
        str(BENCHMARKS / "bench_dashboard.py"), "--runs", "3000", "--db",
        str(tmp_path / "dash.db"), "--repeat", "1",
    )  # fmt: skip
    timed = re.findall(r"^\s+[\d.]+ ms  (.+?)  \(", out, re.M)
    assert "GET /api/rate, 7d (globex key)" in timed and "page /trends" in timed
    assert "GET /api/review/queue (globex key)" in timed
    assert re.search(r"GET /api/runs \(newest 50\)  \(50 runs\)", out)
    assert "slowest:" in out
