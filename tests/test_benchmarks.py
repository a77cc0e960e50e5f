"""The grounding benchmark still runs, end to end, on a small store (its figures are in
docs/performance.md; these tests only keep the scripts from rotting, they time nothing)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
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
    assert found["postgres_big"]["runs"] == found["sqlite_big"]["runs"] == 3000
    assert found["postgres_big"]["flagged"] == found["sqlite_big"]["flagged"] == 90


def test_bench_postgres_ab_times_two_codes_on_one_schema(pg_url: str) -> None:
    """``--ab``: both sides (here this code twice) read the same schema and list the same ids."""
    import json
    from datetime import UTC, datetime, timedelta

    from agentlens.eval import get_scorer
    from agentlens.model import Score, ScoreResult, Trace
    from agentlens.store import open_store

    version = get_scorer("no_fabricated_refs").version  # the version the rate counts
    store = open_store(pg_url)
    start = datetime.now(UTC) - timedelta(days=2)
    try:
        store.put_traces([Trace(id=f"r{i}", started_at=start + timedelta(hours=i), output="a")
                          for i in range(30)])  # fmt: skip
        store.put_scores([Score.of(ScoreResult(passed=i % 3 != 0), run_id=f"r{i}",
                                   scorer="no_fabricated_refs", version=version)
                          for i in range(30)])  # fmt: skip
    finally:
        store.close()
    base, schema = pg_url.split("?schema=")
    src = str(BENCHMARKS.parent / "src")
    out = _run(str(BENCHMARKS / "bench_postgres.py"), "--ab", schema, "--baseline-src", src,
               "--rounds", "1", "--repeat", "2", "--pg", base)  # fmt: skip
    found = json.loads(out)
    assert found["same_flagged_ids"] is True
    assert set(found["rounds"]) == {"before", "after"}
    for side in found["rounds"].values():
        assert side[0]["rate"]["cpu_ms"] > 0
        assert (side[0]["runs"], side[0]["flagged"]) == (30, 10)


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
    timed = re.findall(
        r"^\s+[\d.]+ ms +[\d.]+ CPU +(?:[\d.]+ ms +[\d.]+ CPU|—)  (.+?)  \(", out, re.M
    )
    assert "GET /api/rate, 7d (globex key)" in timed and "page /trends" in timed
    assert "GET /api/review/queue (globex key)" in timed
    assert re.search(r"GET /api/runs \(newest 50\)  \(50 runs\)", out)
    # the rates and the pages that read them are timed again counting the runs from `runs`
    assert re.search(r"CPU +[\d.]+ ms +[\d.]+ CPU  page /trends  \(", out)
    assert "slowest:" in out


def test_bench_run_rollup_times_put_traces_with_and_without_the_triggers() -> None:
    out = _run(
        str(BENCHMARKS / "bench_run_rollup.py"), "--runs", "200", "--batch", "50", "--reps", "1"
    )
    for step in ("insert", "replace", "delete"):
        assert re.search(rf"^{step} +[\d.]+ ms +[\d.]+ ms +[\d.]+ ms +[\d.]+ ms +-?[\d.]+%$",
                         out, re.M), step  # fmt: skip


@pytest.mark.data
def test_tau_bench_grounding_lists_what_differs_from_another_tree(
    data_dir: Callable[[str], Path],
) -> None:
    folder = data_dir("tau_bench").parent
    out = _run(str(BENCHMARKS / "tau_bench_grounding.py"), str(folder), "--sample", "0",
               "--before", str(ROOT))  # fmt: skip
    flags = re.search(r"^before/after: (\d+) flags before, (\d+) after$", out, re.M)
    assert flags is not None and flags.group(1) == flags.group(2) and int(flags.group(1)) > 0
    assert "newly flagged (0):\nno longer flagged (0):\n" in out  # the same tree: nothing moved
    computed = re.search(r"computed amounts before: (\d+); still grounded after: (\d+) "
                         r"\(derivation shown changed for 0\); no longer grounded: 0", out)  # fmt: skip
    assert computed is not None and computed.group(1) == computed.group(2) != "0"


@pytest.mark.data
def test_tau_bench_grounding_scores_another_data_set(data_dir: Callable[[str], Path]) -> None:
    folder = data_dir("claude_code").parent
    out = _run(str(BENCHMARKS / "tau_bench_grounding.py"), str(folder), "--set", "claude-code",
               "--sample", "0", "--scorer", "parametric_leakage", "--before", str(ROOT))  # fmt: skip
    runs = re.search(r"^claude-code: (\d+) runs, (\d+) assistant turns checked$", out, re.M)
    assert runs is not None and int(runs.group(1)) > 0 and int(runs.group(2)) > 0
    assert "config: none;" in out and "no_fabricated_refs:" not in out
    names = re.search(r"^parametric_leakage: .*name \d+/(\d+)", out, re.M)
    assert names is not None and int(names.group(1)) > 0
    assert "newly flagged (0):\nno longer flagged (0):\n" in out


@pytest.mark.data
def test_tau_bench_grounding_refuses_a_tree_without_agentlens(
    data_dir: Callable[[str], Path], tmp_path: Path
) -> None:
    folder = data_dir("tau_bench").parent
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "tau_bench_grounding.py"), str(folder), "--before",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == f"{tmp_path}: no src/agentlens in it\n" and proc.stdout == ""


def test_bench_dashboard_pages_times_every_page_beside_the_api() -> None:
    out = _run(str(BENCHMARKS / "bench_dashboard_pages.py"), "--runs", "30", "--repeat", "1")
    assert "store: sqlite:///" in out and "(30 runs)" in out
    rows = re.findall(
        r"^(/\S+)\s+(\d+\.\d)\s+(\d+\.\d)\s+(\d+\.\d\s+\d+\.\d|—)\s+(\d+\.\d|—)\s+(ok|OVER)"
        r"  \(load [\d.]+\)$",
        out,
        re.M,
    )
    pages = {r[0].split("?")[0] for r in rows}
    assert {"/runs", "/review", "/trends"} <= pages
    assert any(p.startswith("/runs/bench-") for p in pages)
    assert any(p.startswith("/content/ticket/") for p in pages)
    assert re.search(r"^\d+ page\(s\) over the target; before: ", out, re.M)


def test_bench_score_e2e_times_the_command_beside_the_naive_check(tmp_path: Path) -> None:
    out = _run(
        str(BENCHMARKS / "bench_score_e2e.py"),
        "--runs",
        "30",
        "--rounds",
        "2",
        "--variants",
        "naive,grounding,defaults",
        "--cache",
        str(tmp_path / "cache"),
        "--baseline-src",
        str(ROOT / "src"),
    )
    rows = dict(re.findall(r"^\s*([\w@-]+)\s+\d+\.\d\s+\d+\.\d\s+(\d+\.\d\dx)", out, re.M))
    assert set(rows) == {"naive", "grounding", "defaults", "grounding@base", "defaults@base"}
    assert rows["naive"] == "1.00x"
    assert re.search(r"^\s*grounding .*<= 2x: (met|NOT met)$", out, re.M)
    assert re.search(r"^\s*defaults .*<= 3x: (met|NOT met)$", out, re.M)
    assert "naive flagged runs: [30]" in out  # $1,834.20 is never a substring of JSON's 1834.2
    # the stored scores: the same digest in both rounds, and for the same code run as a baseline
    results = dict(re.findall(r"^([\w@-]+): flagged (.*) \(same in every round\)$", out, re.M))
    assert set(results) == set(rows) - {"naive"}
    assert results["grounding"] == results["grounding@base"]
    assert results["defaults"] == results["defaults@base"]
    flagged = re.search(r'"no_fabricated_refs": (\d+)', results["grounding"])
    assert flagged is not None and 0 < int(flagged.group(1)) < 30
    assert results["grounding"].split(" digest ")[1] != results["defaults"].split(" digest ")[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_bench_score_e2e_counts_instructions_the_same_for_the_same_code(tmp_path: Path) -> None:
    out = _run(
        str(BENCHMARKS / "bench_score_e2e.py"),
        "--runs",
        "5",
        "--variants",
        "naive,grounding",
        "--cache",
        str(tmp_path / "cache"),
        "--baseline-src",
        str(ROOT / "src"),
        "--instructions",
    )
    rows = dict(re.findall(r"^\s*([\w@-]+)\s+(\d+\.\d{3})\s+(?:\d+\.\d\dx)", out, re.M))
    assert set(rows) == {"naive", "grounding", "grounding@base"}
    # a process of Python and its imports alone is most of a billion instructions
    assert 0.3 < float(rows["naive"]) < float(rows["grounding"])
    # the same code counted as this code and as a baseline: the same count, to 0.1%
    assert abs(float(rows["grounding"]) / float(rows["grounding@base"]) - 1) < 0.001
    results = dict(re.findall(r"^([\w@-]+): flagged (.*)$", out, re.M))
    assert results["grounding"] == results["grounding@base"]


def test_bench_put_scores_writes_the_same_tables_as_its_baseline(tmp_path: Path) -> None:
    out = _run(
        str(BENCHMARKS / "bench_put_scores.py"),
        "--runs",
        "30",
        "--rounds",
        "2",
        "--scorers",
        "2",
        "--cache",
        str(tmp_path / "cache"),
        "--baseline-src",
        str(ROOT / "src"),
    )
    assert re.search(r"^30 runs, 60 scores, 200 runs per put_scores; medians$", out, re.M)
    digests = dict(re.findall(r"^\s*(this code|baseline): .* per score, digest (\w+)$", out, re.M))
    assert set(digests) == {"this code", "baseline"}
    assert digests["this code"] == digests["baseline"]  # one digest each: the same every round


def test_bench_startup_times_each_variant_beside_the_baseline() -> None:
    src = str(ROOT / "src")
    out = _run(
        str(BENCHMARKS / "bench_startup.py"),
        "--rounds",
        "1",
        "--variants",
        "python,help,score",
        "--baseline-src",
        src,
    )
    rows = re.findall(r"^(\S+)\s+(\d+\.\d{3}) +\(", out, re.M)
    assert [name for name, _ in rows] == ["python", "help", "score", "help@base", "score@base"]
    assert all(float(cpu) > 0 for _, cpu in rows)
