"""``POST /api/runs`` holds runs to the trace format's contract, with the importer's checks.

A number that overflows a float (``1e999``), NaN and Infinity, a blank run or step id, a status
other than ok/error/running, and a time given as a number or a digit string are refused: alone
in a body they are a 400 naming the field, and nothing is stored; in a batch that run is in
``rejected`` (naming the field) and the good runs are stored, as for any other invalid run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _server_api import Api


def run(**fields: Any) -> dict[str, Any]:
    return {
        "id": "run-1",
        "agent": "support",
        "started_at": "2026-11-30T10:00:00Z",
        "input": "q",
        "output": "a",
        "steps": [
            {"id": "s1", "kind": "user", "output": "hi"},
            {"id": "s2", "kind": "tool", "name": "t", "output": {"x": 1}},
            {"id": "s3", "kind": "llm", "output": "done", "started_at": "2026-11-30T10:00:01Z"},
        ],
        **fields,
    }


def with_step(index: int, **fields: Any) -> dict[str, Any]:
    body = run()
    body["steps"][index] = {**body["steps"][index], **fields}
    return body


NAN = "__NAN__"
INF = "__INF__"
BIG = "__BIG__"
_LITERALS = {f'"{NAN}"': "NaN", f'"{INF}"': "-Infinity", f'"{BIG}"': "1e999"}


def raw(value: Any) -> bytes:
    """``value`` as JSON, with the placeholders spelled as the literals ``json.dumps`` cannot
    write (``1e999``) or should not (``NaN``, ``-Infinity``)."""
    text = json.dumps(value)
    for placeholder, literal in _LITERALS.items():
        text = text.replace(placeholder, literal)
    return text.encode()


REFUSED = [
    pytest.param(with_step(2, output=BIG), "steps.2.output", "too large", id="overflow"),
    pytest.param(
        with_step(1, output={"x": 1, "score": BIG}), "steps.1.output.score", "too large",
        id="overflow-nested",
    ),
    pytest.param(with_step(1, output={"x": NAN}), "steps.1.output.x", "NaN", id="nan"),
    pytest.param(run(output=INF), "output", "Infinity", id="infinity"),
    pytest.param(run(id=""), "id", "run id must not be empty", id="empty-run-id"),
    pytest.param(run(id="  "), "id", "run id must not be empty or blank", id="blank-run-id"),
    pytest.param(with_step(0, id=" "), "steps.0.id", "step id must not", id="blank-step-id"),
    pytest.param(run(status="done"), "status", "'ok', 'error' or 'running'", id="status"),
    pytest.param(run(started_at=1764496800), "started_at", "ISO 8601", id="numeric-time"),
    pytest.param(run(ended_at="1764496800"), "ended_at", "ISO 8601", id="digit-string-time"),
    pytest.param(
        with_step(2, started_at=1764496801.5), "steps.2.started_at", "ISO 8601",
        id="numeric-step-time",
    ),
    # what no store can hold: the store refused the whole batch, answered 503 (retried)
    pytest.param(run(output="x\ud800y"), "output", "lone surrogate", id="surrogate"),
    pytest.param(
        with_step(1, output={"k\udc00": 1}), "steps.1.output.k\\udc00", "lone surrogate",
        id="surrogate-key",
    ),
    pytest.param(with_step(1, id="s1"), "steps.1.id", "is used twice", id="duplicate-step-id"),
]  # fmt: skip


def stored_ids(api: Api) -> list[str]:
    r = api.get("/api/runs")
    assert r.status_code == 200
    return [x["id"] for x in r.json()["runs"]]


def post(api: Api, body: Any) -> Any:
    return api.post("/api/runs", content=raw(body), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(("body", "field", "reason"), REFUSED)
def test_a_refused_value_is_a_400_naming_the_field(
    api: Api, body: dict[str, Any], field: str, reason: str
) -> None:
    r = post(api, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"no valid run in the body: [0] {field}: "), error
    assert reason in error["message"]
    assert stored_ids(api) == []


@pytest.mark.parametrize(("body", "field", "reason"), REFUSED)
def test_a_batch_with_a_refused_run_stores_only_the_good_runs(
    api: Api, body: dict[str, Any], field: str, reason: str
) -> None:
    good = run(id="run-good")
    r = post(api, [good, body])
    assert r.status_code == 200, r.text
    written = r.json()
    assert written["stored"] == 1 and written["ids"] == ["run-good"]
    [rejected] = written["rejected"]
    assert rejected["index"] == 1
    assert rejected["error"].startswith(f"{field}: ") and reason in rejected["error"]
    assert stored_ids(api) == ["run-good"]


def test_a_valid_run_still_stores(api: Api) -> None:
    body = run(status="error", ended_at="2026-11-30T10:00:05+00:00")
    body["steps"][1]["output"] = {"x": 1.5e300, "note": "NaN and Infinity in text", "n": 10**30}
    r = post(api, body)
    assert r.status_code == 200, r.text
    assert r.json() == {"stored": 1, "ids": ["run-1"], "rejected": []}
    stored = api.get("/api/runs/run-1").json()["run"]
    assert stored["status"] == "error"
    assert stored["steps"][1]["output"] == body["steps"][1]["output"]


def test_a_run_without_an_id_or_status_still_stores(api: Api) -> None:
    body = run()
    del body["id"]
    r = post(api, body)
    assert r.status_code == 200, r.text
    [run_id] = r.json()["ids"]
    assert run_id.strip()
    assert api.get(f"/api/runs/{run_id}").json()["run"]["status"] == "ok"


def test_a_value_nested_too_deeply_is_refused_not_a_503(api: Api) -> None:
    nested: Any = []
    for _ in range(250):
        nested = [nested]
    r = post(api, [run(id="run-good"), run(id="run-deep", output=nested)])
    assert r.status_code == 200, r.text
    [rejected] = r.json()["rejected"]
    assert rejected["index"] == 1 and rejected["error"].startswith("output.0.0.0")
    assert rejected["error"].endswith("nested more than 200 levels deep")
    assert stored_ids(api) == ["run-good"]
