"""API keys and projects: key handling, loopback-only without keys, two projects isolated."""

from __future__ import annotations

import json

import pytest
from _server_api import Api, wait_until
from typer.testing import CliRunner

from _otlp_fixtures import GENAI_TRACE, genai_spans, request
from agentlens.cli import app as cli_app
from agentlens.errors import ConfigError
from agentlens.model import Score, Verdict
from agentlens.server._keys import KeyChecker, create_key, revoke_key
from agentlens.server._serve import check_bind


def test_keys_cli_create_list_revoke(db_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(cli_app, ["--db", db_url, "keys", "create", "--project", "acme"])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("al_") and " " not in key
    listed = runner.invoke(cli_app, ["--db", db_url, "keys", "list", "--json"])
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["project"] == "acme" and row["revoked_at"] is None
    assert key not in listed.stdout  # never shown again
    # the store keeps a slow hash, not the key
    from agentlens.store import open_store

    store = open_store(db_url)
    try:
        record = store.get_api_key(row["id"])
        assert key.split("_", 2)[2].encode() not in record.hash  # the secret may hold "_"
        assert len(record.hash) == 32 and len(record.salt) == 16
    finally:
        store.close()
    assert runner.invoke(cli_app, ["--db", db_url, "keys", "revoke", row["id"]]).exit_code == 0
    again = runner.invoke(cli_app, ["--db", db_url, "keys", "revoke", row["id"]])
    assert again.exit_code == 2 and "no active key" in again.output
    bad = runner.invoke(cli_app, ["--db", db_url, "keys", "create", "--project", "a b"])
    assert bad.exit_code == 2 and "invalid project name" in bad.output


def test_key_checker(api: Api) -> None:
    created = create_key(api.store, "acme")
    checker = KeyChecker(api.store, cache_s=0.0)
    assert checker.project_of(created.key) == "acme"
    assert checker.project_of(created.key[:-1] + ("A" if created.key[-1] != "A" else "B")) is None
    assert checker.project_of("al_nothing") is None
    assert revoke_key(api.store, created.key)
    assert checker.project_of(created.key) is None


def test_without_keys_only_loopback_clients(api: Api) -> None:
    assert api.get("/api/runs").status_code == 200
    remote = api.as_(client="192.0.2.7").get("/api/runs")
    assert remote.status_code == 401
    assert "loopback" in remote.json()["error"]["message"]
    create_key(api.store, "acme")
    wait_until(lambda: api.get("/api/runs").status_code == 401)  # a key now exists


def test_refuses_to_bind_beyond_loopback_without_a_key(api: Api) -> None:
    check_bind(api.store, "127.0.0.1")
    with pytest.raises(ConfigError, match="no API key exists"):
        check_bind(api.store, "0.0.0.0")
    create_key(api.store, "acme")
    check_bind(api.store, "0.0.0.0")


def test_serve_cli_refuses_non_loopback_without_key(db_url: str) -> None:
    result = CliRunner().invoke(cli_app, ["--db", db_url, "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to listen on 0.0.0.0" in result.output


def _walk(api: Api, own: str, other: str) -> list[tuple[str, int, str]]:
    """Every route, as one project's key, aimed at the other project's run."""
    out = []
    for method, path in [
        ("GET", f"/api/runs/{other}"),
        ("GET", "/api/runs"),
        ("GET", "/api/rate?since=all"),
        ("POST", "/api/runs/write"),
        ("GET", "/metrics"),
    ]:
        if method == "GET":
            r = api.get(path)
        else:
            r = api.post("/api/runs", json={"id": other, "output": "overwrite"})
        out.append((path, r.status_code, r.text))
    return out


def test_two_projects_cannot_see_each_other(api: Api) -> None:
    key_a = create_key(api.store, "alpha").key
    key_b = create_key(api.store, "beta").key
    a, b = api.as_(key=key_a), api.as_(key=key_b)
    assert (
        a.post(
            "/api/runs", json={"id": "ra", "output": "A", "started_at": "2026-11-30T10:00:00Z"}
        ).json()["stored"]
        == 1
    )
    assert (
        b.post(
            "/api/runs", json={"id": "rb", "output": "B", "started_at": "2026-11-30T10:00:00Z"}
        ).json()["stored"]
        == 1
    )
    # OTLP too: the trace lands in the key's project
    r = a.post("/v1/traces", content=json.dumps(request(genai_spans())),
               headers={"Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 200
    wait_until(lambda: api.store.run_projects([GENAI_TRACE]).get(GENAI_TRACE) == "alpha")
    # the same trace id sent with the other key does not overwrite alpha's run
    b.post("/v1/traces", content=json.dumps(request(genai_spans(answer="hijack"))),
           headers={"Content-Type": "application/json"})  # fmt: skip
    wait_until(lambda: api.store.read(lambda c: c.execute(
        "SELECT count(*) FROM otlp_traces WHERE project = 'beta' AND built_seq >= max_seq"
    ).fetchone()[0]))  # fmt: skip
    assert api.store.get_trace(GENAI_TRACE).output != "hijack"
    for rid in ("ra", "rb"):
        api.store.put_scores([Score(run_id=rid, scorer="s", version="1", passed=False,
                                    value=1.0, detail="x", verdict=Verdict.FLAGGED)])  # fmt: skip
    assert [x["id"] for x in a.get("/api/runs").json()["runs"]] == ["ra", GENAI_TRACE]
    assert [x["id"] for x in b.get("/api/runs").json()["runs"]] == ["rb"]
    assert b.get("/api/runs", params={"project": "alpha"}).json()["runs"] == []
    assert a.get("/api/rate", params={"since": "all"}).json()["flagged"] == 1
    walked = dict((path, (status, text)) for path, status, text in _walk(b, "rb", "ra"))
    assert walked["/api/runs/ra"][0] == 404
    assert "ra" not in [x["id"] for x in json.loads(walked["/api/runs"][1])["runs"]]
    assert json.loads(walked["/api/rate?since=all"][1])["flagged"] == 1  # beta's own run only
    assert walked["/api/runs"][0] == 200
    assert api.store.get_trace("ra").output == "A"
    assert api.store.get_trace("ra").project == "alpha"
    # a key cannot write into another project by naming it
    r = b.post("/api/runs", json={"id": "rx", "project": "alpha"})
    assert r.status_code == 400 and "not this key's project" in r.json()["error"]["message"]


def test_writing_over_another_projects_run_id_is_refused(api: Api) -> None:
    a = api.as_(key=create_key(api.store, "alpha").key)
    b = api.as_(key=create_key(api.store, "beta").key)
    a.post("/api/runs", json={"id": "ra", "output": "A"})
    r = b.post("/api/runs", json={"id": "ra", "output": "overwrite"})
    assert r.json()["stored"] == 0
    assert "another project" in r.json()["rejected"][0]["error"]
    assert api.store.get_trace("ra").output == "A"
