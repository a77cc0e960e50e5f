"""The JSON API in-process: runs, rate, health, metrics, and one error shape everywhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _server_api import Api

from agentlens.eval import get_scorer
from agentlens.model import FailureMode, Finding, Score, Verdict

REFS_VERSION = get_scorer("no_fabricated_refs").version
"""The current version: the rate counts scores of the current versions only."""


def run(i: int, **fields: Any) -> dict[str, Any]:
    start = datetime(2026, 11, 30, 10, tzinfo=UTC) + timedelta(minutes=i)
    return {
        "id": f"run-{i:03d}",
        "agent": "support",
        "started_at": start.isoformat(),
        "input": "q",
        "output": f"answer {i}",
        "steps": [{"id": "s1", "kind": "tool", "name": "t", "output": {"x": i}}],
        **fields,
    }


def flag(api: Api, run_id: str) -> None:
    api.store.put_scores([
        Score(run_id=run_id, scorer="no_fabricated_refs", version=REFS_VERSION, passed=False, value=1.0,
              detail="ungrounded: ORD-1", verdict=Verdict.FLAGGED,
              findings=[Finding(failure_mode=FailureMode.FABRICATED_GROUNDING, text="ORD-1")])
    ])  # fmt: skip


def test_post_and_get_runs(api: Api) -> None:
    r = api.post("/api/runs", json=[run(i) for i in range(5)])
    assert r.status_code == 200, r.text
    assert r.json() == {"stored": 5, "ids": [f"run-{i:03d}" for i in range(5)], "rejected": []}
    r = api.post("/api/runs", json=run(9, agent="writer", links={"blog_post": "123"}))
    assert r.json()["stored"] == 1
    page = api.get("/api/runs").json()
    assert [x["id"] for x in page["runs"]][:2] == ["run-009", "run-004"]
    assert page["next"] is None
    first = page["runs"][0]
    assert set(first) >= {"hallucination_detected", "hallucination_reason", "failure_modes"}
    assert first["hallucination_detected"] is False and first["flag_state"] is None  # not scored
    assert [x["id"] for x in api.get("/api/runs", params={"agent": "writer"}).json()["runs"]] == [
        "run-009"
    ]
    linked = api.get("/api/runs", params={"link": "blog_post:123"}).json()["runs"]
    assert [x["id"] for x in linked] == ["run-009"]


def test_cursor_pagination_visits_every_run_once(api: Api) -> None:
    api.post("/api/runs", json=[run(i) for i in range(23)])
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params: dict[str, Any] = {"limit": 5}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/api/runs", params=params).json()
        seen.extend(x["id"] for x in page["runs"])
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == [f"run-{i:03d}" for i in reversed(range(23))]


def test_a_cursor_past_64_bits_is_a_clear_error(api: Api) -> None:
    import base64

    api.post("/api/runs", json=[run(i) for i in range(3)])
    for time in (2**63, -(2**63) - 1, 10**30):
        raw = json.dumps([time, "run-001"]).encode()
        cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        r = api.get("/api/runs", params={"cursor": cursor})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == "cursor: not a cursor this server returned"


def test_a_run_whose_id_holds_a_slash_is_reached_by_its_escaped_id(api: Api) -> None:
    api.post("/api/runs", json=[run(1, id="team/run 1?#%")])
    flag(api, "team/run 1?#%")
    escaped = "team%2Frun%201%3F%23%25"
    detail = api.get(f"/api/runs/{escaped}")
    assert detail.status_code == 200, detail.text
    assert detail.json()["run"]["id"] == "team/run 1?#%"
    verdict = api.post(f"/api/runs/{escaped}/verdict", json={"verdict": "confirmed"})
    assert verdict.status_code == 200, verdict.text
    assert api.get("/api/runs/team%2Fnope").status_code == 404
    # a content item is often a URL: its id holds slashes too
    url = "https%3A%2F%2Fblog.example%2Fposts%2F7"
    assert api.get(f"/api/content/url/{url}").json()["item_id"] == "https://blog.example/posts/7"


def test_flagged_and_failure_mode_filters_and_run_detail(api: Api) -> None:
    api.post("/api/runs", json=[run(i) for i in range(3)])
    flag(api, "run-001")
    flagged = api.get("/api/runs", params={"flagged": "true"}).json()["runs"]
    assert [x["id"] for x in flagged] == ["run-001"]
    assert flagged[0]["hallucination_detected"] is True
    assert flagged[0]["failure_modes"] == ["fabricated_grounding"]
    assert "ORD-1" in flagged[0]["hallucination_reason"]
    others = api.get("/api/runs", params={"flagged": "false"}).json()["runs"]
    assert {x["id"] for x in others} == {"run-000", "run-002"}
    by_mode = api.get("/api/runs", params={"failure_mode": "fabricated_grounding"}).json()
    assert [x["id"] for x in by_mode["runs"]] == ["run-001"]
    detail = api.get("/api/runs/run-001").json()
    assert detail["run"]["id"] == "run-001"
    assert detail["run"]["steps"][0]["output"] == {"x": 1}
    assert detail["scores"][0]["findings"][0]["text"] == "ORD-1"
    assert detail["flags"]["hallucination_detected"] is True


def test_partly_bad_batch_stores_the_good_runs(api: Api) -> None:
    r = api.post("/api/runs", json=[run(1), {"steps": "no"}, 7, run(2)])
    body = r.json()
    assert r.status_code == 200
    assert body["stored"] == 2
    assert [x["index"] for x in body["rejected"]] == [1, 2]
    r = api.post("/api/runs", json=[{"steps": "no"}])
    assert r.status_code == 400 and "steps" in r.json()["error"]["message"]


def test_rate_is_what_agentlens_rate_json_prints(api: Api, db_url: str) -> None:
    from typer.testing import CliRunner

    from agentlens.cli import app

    api.post("/api/runs", json=[run(i) for i in range(4)])
    flag(api, "run-002")
    for rid in ("run-000", "run-001", "run-003"):
        api.store.put_scores([Score(run_id=rid, scorer="no_fabricated_refs", version=REFS_VERSION,
                                    passed=True, value=0.0, detail="ok")])  # fmt: skip
    served = api.get("/api/rate", params={"since": "all"}).json()
    printed = json.loads(
        CliRunner().invoke(app, ["--db", db_url, "rate", "--since", "all", "--json"]).stdout
    )
    assert served == printed
    assert served["flagged"] == 1
    by_agent = api.get("/api/rate", params={"since": "all", "by": "agent"}).json()
    printed = json.loads(CliRunner().invoke(
        app, ["--db", db_url, "rate", "--since", "all", "--by", "agent", "--json"]).stdout)  # fmt: skip
    assert by_agent == printed
    assert api.get("/api/rate", params={"by": "nonsense"}).status_code == 400


def test_health_and_metrics(api: Api) -> None:
    assert api.get("/healthz").json()["status"] == "ok"
    api.post("/api/runs", json=[run(1)])
    text = api.get("/metrics").text
    assert "# TYPE agentlens_runs_stored_total counter" in text
    assert "agentlens_runs_stored_total 1" in text
    for name in ("spans_received_total", "review_lag_seconds", "review_queue_depth",
                 "spans_rejected_total", "writer_queue_depth", "backlog_age_seconds"):  # fmt: skip
        assert f"agentlens_{name} " in text


def test_openapi_document(api: Api) -> None:
    doc = api.get("/openapi.json").json()
    for path in ("/v1/traces", "/api/runs", "/api/runs/{run_id}", "/api/rate", "/healthz",
                 "/metrics"):  # fmt: skip
        assert path in doc["paths"]


def _routes(api: Api) -> list[tuple[str, str]]:
    doc = api.get("/openapi.json").json()
    return [(m.upper(), p) for p, ops in doc["paths"].items() for m in ops]


def _assert_shape(r: Any) -> None:
    body = r.json()
    assert set(body) == {"error"}, (r.request.url, body)
    assert set(body["error"]) == {"code", "message"}
    assert isinstance(body["error"]["code"], str) and body["error"]["message"]


def test_every_error_has_the_one_shape(api: Api) -> None:
    """Every route, driven into errors: no key from a remote client (401), then bad
    parameters and bodies (400/404/409), unknown routes and methods."""
    bad_params = {"limit": "-1", "since": "yesterday-ish", "cursor": "%%%", "by": "x",
                  "flagged": "maybe", "failure_mode": "nope", "link": "no-colon"}  # fmt: skip
    remote = api.as_(client="10.1.2.3")
    routes = _routes(api)
    assert len(routes) >= 11
    for method, path in routes:
        url = (
            path.replace("{run_id}", "missing").replace("{kind}", "post").replace("{item_id}", "1")
        )
        r = remote.request(method, url)
        if path == "/healthz":
            assert r.status_code == 200
            continue
        assert r.status_code == 401, (method, path)
        _assert_shape(r)
        if method == "GET":
            r = api.get(url, params=bad_params)
        else:
            r = api.post(url, content=b"{bad", headers={"Content-Type": "application/json"})
        if r.status_code >= 400:
            _assert_shape(r)
        elif path not in ("/metrics", "/api/content/{kind}/{item_id}"):  # they take no input
            raise AssertionError(f"{method} {path} accepted bad input: {r.status_code}")
    for r in (
        api.get("/no/such/route"),
        api.request("DELETE", "/api/runs"),
        api.as_(key="al_000000000000_" + "x" * 43).get("/api/runs"),
        api.post("/api/runs/missing/verdict", json={"verdict": "confirmed"}),
        api.post("/api/runs", json=[]),
    ):
        assert r.status_code >= 400
        _assert_shape(r)


@pytest.mark.parametrize("since", ["7d", "36h", "2026-11-01T00:00:00Z", "all"])
def test_rate_windows(api: Api, since: str) -> None:
    assert api.get("/api/rate", params={"since": since}).status_code == 200


@pytest.mark.parametrize("since", ["3000000d", "0d", "7 parsecs"])
def test_a_window_parameter_is_read_as_the_cli_reads_since(api: Api, since: str) -> None:
    """``since``/``until`` go through the one parser of the CLI's ``--since``: the same
    values are refused, with the same reason."""
    from agentlens.errors import ConfigError
    from agentlens.model._time import parse_since

    with pytest.raises(ConfigError) as refused:
        parse_since(since, "since", datetime.now(UTC))
    r = api.get("/api/runs", params={"since": since})
    assert r.status_code == 400
    assert str(refused.value) in r.text
    assert api.get("/api/runs", params={"since": "1h30m", "until": "2 m"}).status_code == 200
