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


def _client(url: str, project: str | None) -> tuple[Any, Any]:
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
    return client, api_headers


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


def _median(client: Any, path: str, repeat: int, headers: dict[str, str]) -> float:
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = client.get(path, headers=headers)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            raise SystemExit(f"{path}: HTTP {response.status_code}: {response.text[:200]}")
        if i:  # the first call warms the caches
            times.append(elapsed)
    return statistics.median(times)


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
    client, api = _client(url, args.project)
    from agentlens.store import open_store

    store = open_store(url)
    runs = store.count_runs()
    store.close()
    print(f"store: {url} ({runs:,} runs); machine: {os.cpu_count()} CPUs, "
          f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'page':<60} {'page ms':>9} {'API ms':>9}  target 300 ms")
    misses = 0
    for page, baseline in _pairs(client):
        took = _median(client, page, args.repeat, {})
        base = _median(client, baseline, args.repeat, api) if baseline else None
        mark = "ok" if took < TARGET_S else "OVER"
        misses += took >= TARGET_S
        shown = "—" if base is None else f"{base * 1000:9.1f}"
        print(f"{page[:60]:<60} {took * 1000:9.1f} {shown:>9}  {mark}")
    print(f"{misses} page(s) over the target")


if __name__ == "__main__":
    main()
