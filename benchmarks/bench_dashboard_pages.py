"""The dashboard's pages over a big store: server time per page (target: under 300 ms each with
1,000,000 runs), beside the JSON API route that serves the same data (the baseline, timed in the
same run on the same store).

The store: ``--db PATH``, an existing store (e.g. the million-run fill of
``benchmarks/bench_dashboard.py --fill-only``), or ``--runs N`` to build a small one here through
``put_traces`` and the review pipeline (minutes per few thousand runs on a loaded machine; for
trying the script, not for the 1M figure). The pages are requested in-process through the ASGI
app (Starlette's test client), so a figure is the route's whole server time: store queries,
rendering, no socket. With ``--project NAME`` (or when the store already has keys) the pages
are read as a key of that project, signed in through the login form.

Usage: ``python benchmarks/bench_dashboard_pages.py (--db PATH | --runs N) [--repeat K]
[--project NAME]``.
"""

from __future__ import annotations

import argparse
import html
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from bench_dashboard import old_reads  # noqa: E402  (the baseline's switches, one place)

TARGET_S = 0.300


def _build(path: Path, runs: int) -> str:
    """A store of ``runs`` runs over the last 10 days, a fifth of them citing an order id their
    tool did not return (flagged), reviewed."""
    from datetime import UTC, datetime, timedelta

    from agentlens.model import Step, Trace
    from agentlens.review import review_pending
    from agentlens.store import open_store

    url = f"sqlite:///{path}"
    store = open_store(url)
    now = datetime.now(UTC)
    traces = []
    for i in range(runs):
        at = now - timedelta(minutes=i * 14_400 / max(runs, 1))
        order = "ORD-1243" if i % 5 == 0 else "ORD-1234"
        traces.append(
            Trace(
                id=f"bench-{i:07d}", agent=("support", "billing", "research")[i % 3],
                started_at=at, ended_at=at + timedelta(seconds=20), input="where is my order?",
                output=f"Your order {order} ships soon.", metadata={"release": f"v{i % 4}"},
                links={"ticket": f"T-{i}"},
                steps=[Step(id="s1", kind="tool", name="get_order", input={"id": "ORD-1234"},
                            output={"order": "ORD-1234"})],
            )
        )  # fmt: skip
    store.put_traces(traces)
    review_pending(store)
    store.close()
    return url


def _client(url: str, project: str | None) -> tuple[Any, Any, Any]:
    from starlette.testclient import TestClient

    from agentlens.server import create_app
    from agentlens.server._keys import create_key
    from agentlens.store import open_store

    store = open_store(url)
    app = create_app(store, review=False)
    client = TestClient(app, follow_redirects=False)
    api_headers: dict[str, str] = {}
    if project or store.count_active_api_keys():
        key = create_key(store, project or "default").key
        form = client.get("/login").text
        csrf = html.unescape(re.search(r'name="csrf" value="([^"]+)"', form).group(1))  # type: ignore[union-attr]
        client.post("/login", data={"key": key, "csrf": csrf, "next": "/runs"})
        api_headers = {"Authorization": f"Bearer {key}"}
    return client, api_headers, store


def _pairs(client: Any) -> list[tuple[str, str | None]]:
    """(page, the API route serving the same data) for each page measured."""
    first = client.get("/runs?since=7d").text
    flagged = client.get("/runs?since=7d&flagged=1").text
    ids = re.findall(r'data-run="([^"]+)"', first)
    fids = re.findall(r'data-run="([^"]+)"', flagged)
    older = re.search(r'href="([^"]+)" id="older"', first)
    pairs: list[tuple[str, str | None]] = [
        ("/runs", "/api/runs?since=7d&limit=50"),
        ("/runs?since=7d&flagged=1", "/api/runs?since=7d&flagged=true&limit=50"),
        ("/runs?since=30d&agent=support", "/api/runs?since=30d&agent=support&limit=50"),
        ("/runs?since=7d&mode=repeated_tool_call",
         "/api/runs?since=7d&failure_mode=repeated_tool_call&limit=50"),
        ("/runs?since=all&release=v3", None),
        ("/review", "/api/review/queue?limit=100"),
        ("/trends?since=7d", "/api/rate?since=7d&by=day"),
        ("/trends", "/api/rate?since=30d&by=day"),
    ]  # fmt: skip
    if older:
        pairs.insert(5, (html.unescape(older.group(1)), None))
    if ids:
        pairs.append((f"/runs/{ids[0]}", f"/api/runs/{ids[0]}"))
    if fids:
        pairs.append((f"/runs/{fids[0]}", f"/api/runs/{fids[0]}"))
        detail = client.get(f"/runs/{fids[0]}").text
        content = re.search(r'href="/content/([^"]+)/([^"]+)"', detail)
        if content:
            kind, item = content.groups()
            pairs.append((f"/content/{kind}/{item}", f"/api/content/{kind}/{item}"))
    return pairs


def _median(client: Any, path: str, repeat: int, headers: dict[str, str]) -> tuple[float, float]:
    """Median wall time and median CPU time of the process (the server's thread included), s."""
    times, cpus = [], []
    for i in range(repeat + 1):
        start, cpu = time.perf_counter(), time.process_time()
        response = client.get(path, headers=headers)
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
        if response.status_code != 200:
            raise SystemExit(f"{path}: HTTP {response.status_code}: {response.text[:200]}")
        if i:  # the first call warms the caches
            times.append(elapsed)
            cpus.append(used)
    return statistics.median(times), statistics.median(cpus)


def _before(store: Any, measure: Any) -> tuple[float, float] | None:
    """``measure()`` as the store read before the run-count rollup (:func:`old_reads`), on the
    same store in the same run: the baseline. ``None`` for a store without the switches
    (PostgreSQL)."""
    if not hasattr(store, "_runs_from_rollup"):
        return None
    old_reads(store, True)
    try:
        return measure()  # type: ignore[no-any-return]
    finally:
        old_reads(store, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--db", type=Path, help="an existing store")
    group.add_argument("--runs", type=int, help="build a store of this many runs here")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--project", default=None)
    args = parser.parse_args()
    if args.db is not None:
        if not args.db.exists():
            raise SystemExit(f"--db {args.db}: no such file")
        url = f"sqlite:///{args.db}"
    else:
        url = _build(
            Path(tempfile.mkdtemp(prefix="agentlens-bench-pages-")) / "pages.db", args.runs
        )
    client, api, store = _client(url, args.project)
    runs = store.count_runs()
    print(f"store: {url} ({runs:,} runs); machine: {os.cpu_count()} CPUs, "
          f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'page':<48} {'page ms':>8} {'CPU ms':>8} {'before':>9} {'its CPU':>8}"
          f" {'API ms':>8}  target 300 ms")  # fmt: skip
    misses = 0
    for page, baseline in _pairs(client):
        took, cpu = _median(client, page, args.repeat, {})
        old = _before(store, lambda p=page: _median(client, p, args.repeat, {}))
        base = _median(client, baseline, args.repeat, api)[0] if baseline else None
        mark = "ok" if took < TARGET_S else "OVER"
        misses += took >= TARGET_S
        shown = "—" if base is None else f"{base * 1000:8.1f}"
        before = "—" if old is None else f"{old[0] * 1000:8.1f} {old[1] * 1000:8.1f}"
        print(f"{page[:48]:<48} {took * 1000:8.1f} {cpu * 1000:8.1f} {before:>17} {shown:>8}"
              f"  {mark}  (load {os.getloadavg()[0]:.1f})")  # fmt: skip
    print(
        f"{misses} page(s) over the target; before: the same page with each rate group's runs"
        " counted from `runs` instead of the run-count rollup, a project's scorers looked up in"
        " `scores`, its runs page and review queue planned by SQLite alone"
    )
    store.close()


if __name__ == "__main__":
    main()
