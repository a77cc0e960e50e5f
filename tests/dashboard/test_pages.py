"""The dashboard in-process: headers, escaping, sign-in, CSRF, and project isolation on every
route (the browser tests in test_browser.py drive the same pages in Chromium)."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from dashboard_data import XSS, fabricated
from markupsafe import escape

from agentlens.dashboard import CSP
from agentlens.review import review_pending
from agentlens.server._keys import create_key, revoke_key

PAGES = [
    "/runs",
    "/runs?flagged=1&since=all",
    "/runs/run-flagged-1",
    "/runs/run-loop-1",
    "/review",
    "/content/blog_post/post-run-flagged-1",
    "/trends",
    "/trends?since=all&mode=fabricated_grounding",
]


def _csrf(text: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', text)
    assert match, "no CSRF field in the page"
    return html.unescape(match.group(1))


def _sign_in(client: Any, key: str, nxt: str = "/runs") -> Any:
    form = client.get("/login")
    return client.post("/login", data={"key": key, "csrf": _csrf(form.text), "next": nxt})


@pytest.mark.parametrize("path", PAGES)
def test_every_page_has_the_security_headers(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-security-policy"] == CSP
    assert "default-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    assert "unsafe-inline" not in CSP
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    # no inline script or style for the policy to forbid
    assert re.search(r"<script(?![^>]*\ssrc=)", response.text) is None
    assert "<style" not in response.text and " style=" not in response.text


def test_static_assets_are_served_locally(client: Any) -> None:
    for name in ("dashboard.css", "dashboard.js", "favicon.svg"):
        assert client.get(f"/static/{name}").status_code == 200
    page = client.get("/runs").text
    assert re.findall(r'(?:src|href)="(https?:)?//', page) == []


def test_static_assets_are_revalidated_so_an_upgrade_is_seen_at_once(client: Any) -> None:
    # they carried no Cache-Control: a browser could keep running last version's script and
    # stylesheet against the new pages for days (heuristic freshness, 10% of the file's age)
    for name, kind in (("dashboard.css", "text/css"), ("dashboard.js", "text/javascript")):
        response = client.get(f"/static/{name}")
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-type"].startswith(kind)
        again = client.get(f"/static/{name}", headers={"If-None-Match": response.headers["etag"]})
        assert again.status_code == 304 and again.headers["cache-control"] == "no-cache"


def test_home_redirects_to_the_runs(client: Any) -> None:
    response = client.get("/")
    assert response.status_code == 303 and response.headers["location"] == "/runs"


def test_a_head_request_is_answered_as_a_get(client: Any) -> None:
    # uptime checks and link checkers send HEAD: every page answered 405, in JSON
    for path in PAGES:
        response = client.head(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.headers["content-security-policy"] == CSP
        assert response.content == b""
    assert client.head("/").status_code == 303
    assert client.head("/runs/no-such-run").status_code == 404


@pytest.mark.parametrize("index", range(len(XSS)))
def test_trace_content_is_escaped(client: Any, index: int) -> None:
    payload = XSS[index]
    for path in (f"/runs/xss-{index}", "/runs", "/review", "/trends?since=all"):
        text = client.get(path).text
        assert payload not in text, path
        if path.startswith("/runs/"):
            assert str(escape(payload)) in text
    assert 'href="javascript:' not in client.get(f"/runs/xss-{index}").text


def test_content_links_are_escaped_path_segments(client: Any) -> None:
    text = client.get("/runs/xss-2").text
    hrefs = re.findall(r'class="content-link"|href="(/content/[^"]*)"', text)
    links = [h for h in hrefs if h]
    assert links and all("/" not in h[len("/content/") :].replace("/", "", 1) for h in links)
    assert "/content/url/javascript%3Aalert%28%27link%27%29" in text


def test_a_content_page_lists_the_runs_that_produced_it(client: Any, store: Any) -> None:
    store.put_traces([fabricated(f"made-{i}", minutes_ago=10 + i, links={"ticket": "T-9"})
                      for i in range(3)])  # fmt: skip
    text = client.get("/content/ticket/T-9").text
    produced = text.split('id="content-produced"', 1)[1]
    found = re.findall(r'href="/runs/(made-\d)"', produced)
    assert found == ["made-0", "made-1", "made-2"]  # newest first
    assert "No stored run links this item" in client.get("/content/ticket/T-10").text


def test_ids_holding_a_slash_have_their_pages(client: Any, store: Any) -> None:
    # the importer takes such ids ("team/run 1", a URL as a link id); the pages' links encode
    # the "/" as %2F, which the router decoded and then matched against no route (a 404 in JSON)
    store.put_traces([fabricated("team/run 1?x#y", links={"url": "https://blog.example/p/1"})])
    runs = client.get("/runs").text
    href = "/runs/team%2Frun%201%3Fx%23y"
    assert f'href="{href}"' in runs
    page = client.get(href)
    assert page.status_code == 200, page.text[:300]
    assert "Run <code" in page.text and "team/run 1?x#y</code>" in page.text
    item = "/content/url/https%3A%2F%2Fblog.example%2Fp%2F1"
    assert f'href="{item}"' in page.text
    content = client.get(item)
    assert content.status_code == 200
    assert 'href="/runs/team%2Frun%201%3Fx%23y"' in content.text
    # a run id with a "/" that does not exist is the page's 404, and /runs/ is the runs
    missing = client.get("/runs/no/such")
    assert missing.status_code == 404 and "no run with id &#39;no/such&#39;" in missing.text
    assert client.get("/runs/").headers["location"] == "/runs"


def test_a_failure_mode_filter_shows_flagged_only_checked(client: Any) -> None:
    # a failure mode lists flagged runs only: the form says so rather than an unchecked box
    box = re.compile(r'<input type="checkbox" name="flagged"[^>]*>')
    assert "checked" in box.search(client.get("/runs?mode=repeated_tool_call").text).group(0)
    assert "checked" not in box.search(client.get("/runs").text).group(0)


def test_bad_filters_are_a_clear_error(client: Any) -> None:
    response = client.get("/runs?since=forever")
    assert response.status_code == 400
    assert "since: &#39;forever&#39; is not one of 1h, 24h, 7d, 30d, 90d, all" in response.text
    assert client.get("/runs?mode=nonsense").status_code == 400
    assert client.get("/runs?cursor=zzz").status_code == 400
    assert client.get("/runs/no-such-run").status_code == 404


@pytest.mark.parametrize("cursor", [f"{10**30}.x", f"-{10**30}.x", f"{2**63}.x", "\u00b2.x"])
def test_a_cursor_out_of_range_is_a_clear_error(client: Any, cursor: str) -> None:
    # a sort key past SQLite's 64-bit integers was an OverflowError, a 500 in JSON; a digit
    # int() does not read (superscript two) a ValueError
    response = client.get(f"/runs?cursor={cursor}")
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert "cursor: not a cursor this page made" in response.text
    assert client.get(f"/runs?cursor={2**63 - 1}.x").status_code == 200


def test_a_number_int_cannot_read_is_not_an_internal_error(client: Any) -> None:
    # "²" is a digit to str.isdigit but not to int: the queue's position and a verdict's
    # finding number were a ValueError, a 500
    review = client.get("/review?at=\u00b2")
    assert review.status_code == 200 and 'data-at="0"' in review.text
    form = {"run_id": "run-flagged-1", "finding": "\u00b2", "verdict": "confirmed"}
    response = client.post("/review/verdict", data={**form, "csrf": _csrf(review.text)})
    assert response.status_code == 400 and "is not a finding number" in response.text


def test_runs_pagination_by_key(client: Any, store: Any) -> None:
    store.put_traces([fabricated(f"page-{i:03d}", minutes_ago=100 + i) for i in range(60)])
    first = client.get("/runs?since=all")
    ids = re.findall(r'data-run="([^"]+)"', first.text)
    assert len(ids) == 50
    older = re.search(r'href="([^"]+)" id="older"', first.text)
    assert older
    second = client.get(html.unescape(older.group(1)))
    more = re.findall(r'data-run="([^"]+)"', second.text)
    assert len(ids) + len(more) == store.count_runs() and not set(ids) & set(more)


# -- sign-in, sessions, CSRF ----------------------------------------------------------------------


def test_once_a_key_exists_every_page_needs_a_session(client: Any, store: Any) -> None:
    create_key(store, "default")
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=")
    response = client.post("/review/verdict", data={"run_id": "run-flagged-1"})
    assert response.status_code == 403


def test_the_session_cookie_holds_no_key_and_ends_with_the_key(client: Any, store: Any) -> None:
    created = create_key(store, "default")
    response = _sign_in(client, created.key, "/runs/run-flagged-1")
    assert response.status_code == 303 and response.headers["location"] == "/runs/run-flagged-1"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    secret = created.key.split("_", 2)[2]  # al_<id>_<secret>, and the secret may hold "_"
    assert created.key not in cookie and secret not in cookie
    assert client.get("/runs/run-flagged-1").status_code == 200
    # a forged signature is refused
    token = client.cookies["agentlens_session"]
    client.cookies.clear()
    client.cookies.set("agentlens_session", token[:-4] + "0000")
    assert client.get("/runs").status_code == 303
    client.cookies.clear()
    client.cookies.set("agentlens_session", token)
    assert client.get("/runs").status_code == 200
    revoke_key(store, created.id)
    assert client.get("/runs").status_code == 303


def test_a_wrong_key_is_refused(client: Any, store: Any) -> None:
    create_key(store, "default")
    response = _sign_in(client, "al_000000000000_" + "a" * 43)
    assert response.status_code == 401
    assert "invalid or revoked API key" in response.text
    assert "agentlens_session" not in client.cookies


def test_login_needs_its_csrf_token(client: Any, store: Any) -> None:
    created = create_key(store, "default")
    client.get("/login")
    response = client.post("/login", data={"key": created.key, "csrf": "forged"})
    assert response.status_code == 403
    client.cookies.clear()
    assert client.post("/login", data={"key": created.key, "csrf": "x"}).status_code == 403


def test_logout_needs_its_csrf_token_and_ends_the_session(client: Any, store: Any) -> None:
    created = create_key(store, "default")
    _sign_in(client, created.key)
    page = client.get("/runs").text
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    assert client.get("/runs").status_code == 200
    response = client.post("/logout", data={"csrf": _csrf(page)})
    assert response.status_code == 303
    token_gone = client.cookies.get("agentlens_session")
    assert not token_gone
    assert client.get("/runs").status_code == 303


def test_a_verdict_without_its_csrf_token_is_refused(client: Any, store: Any) -> None:
    page = client.get("/review").text
    form = {"run_id": "run-flagged-1", "finding": "1", "verdict": "confirmed"}
    assert client.post("/review/verdict", data=form).status_code == 403
    assert client.post("/review/verdict", data={**form, "csrf": "forged"}).status_code == 403
    other_site = client.post(
        "/review/verdict", data={**form, "csrf": _csrf(page)},
        headers={"Origin": "https://evil.example"},
    )  # fmt: skip
    assert other_site.status_code == 403
    assert store.get_verdicts("run-flagged-1") == []
    done = client.post("/review/verdict", data={**form, "csrf": _csrf(page), "note": "ok"})
    assert done.status_code == 303
    assert [(v.verdict, v.note) for v in store.get_verdicts("run-flagged-1")] == [
        ("confirmed", "ok")
    ]


def test_a_verdict_on_a_clean_run_is_a_clear_error(client: Any) -> None:
    page = client.get("/review").text
    form = {"run_id": "run-clean-1", "verdict": "confirmed", "csrf": _csrf(page)}
    response = client.post("/review/verdict", data=form)
    assert response.status_code == 409 and "not flagged" in response.text
    response = client.post("/review/verdict", data={**form, "verdict": "maybe"})
    assert response.status_code == 400


def test_sign_in_goes_back_to_a_run_whose_id_holds_reserved_characters(
    client: Any, store: Any
) -> None:
    # the page asked for went into next= decoded ("/runs/team/run 1?x#y"), so after sign-in
    # the browser asked for run "team/run 1" with a query string and a fragment: a 404
    store.put_traces([fabricated("team/run 1?x#y")])
    created = create_key(store, "default")
    href = "/runs/team%2Frun%201%3Fx%23y"
    asked = client.get(href + "?since=7d")
    assert asked.status_code == 303
    nxt = parse_qs(urlsplit(asked.headers["location"]).query)["next"][0]
    assert nxt == href + "?since=7d"
    response = _sign_in(client, created.key, nxt)
    assert response.headers["location"] == href + "?since=7d"
    page = client.get(response.headers["location"])
    assert page.status_code == 200 and "team/run 1?x#y</code>" in page.text


def test_next_never_leaves_the_site(client: Any, store: Any) -> None:
    created = create_key(store, "default")
    for target in ("https://evil.example/", "//evil.example", "/\\evil.example"):
        response = _sign_in(client, created.key, target)
        assert response.headers["location"] == "/runs"


# -- projects -------------------------------------------------------------------------------------


def test_projects_are_isolated_on_every_route(client: Any, store: Any) -> None:
    default_key = create_key(store, "default").key
    _sign_in(client, default_key)
    for path in ("/runs?since=all", "/runs?flagged=1&since=all", "/review", "/trends?since=all"):
        text = client.get(path).text
        assert "other-flagged" not in text, path
    assert client.get("/runs/other-flagged").status_code == 404
    assert "run-flagged-1" in client.get("/runs?since=all").text
    content = client.get("/content/blog_post/post-other-flagged").text
    assert "not flagged" in content and 'href="/runs/other-flagged"' not in content
    page = client.get("/review").text
    refused = client.post(
        "/review/verdict",
        data={"run_id": "other-flagged", "verdict": "confirmed", "csrf": _csrf(page)},
    )
    assert refused.status_code == 404
    assert store.get_verdicts("other-flagged") == []
    # the other project's key sees its run and not the default project's
    client.cookies.clear()
    _sign_in(client, create_key(store, "other").key)
    assert client.get("/runs/other-flagged").status_code == 200
    assert client.get("/runs/run-flagged-1").status_code == 404
    assert "run-flagged-1" not in client.get("/review").text
    assert "hallucination suspected" in client.get("/content/blog_post/post-other-flagged").text


def test_a_remote_client_without_a_key_must_sign_in(app: Any) -> None:
    from starlette.testclient import TestClient

    remote = TestClient(app, client=("203.0.113.9", 5000), follow_redirects=False)
    assert remote.get("/runs").status_code == 303


def test_day_windows_start_at_a_utc_midnight() -> None:
    from datetime import UTC, datetime, timedelta

    from agentlens.dashboard._pages import window_start

    now = datetime(2026, 12, 1, 15, 30, tzinfo=UTC)
    assert window_start("1h", now) == now - timedelta(hours=1)
    assert window_start("24h", now) == now - timedelta(hours=24)
    assert window_start("7d", now) == datetime(2026, 11, 24, tzinfo=UTC)
    assert window_start("all", now) is None


def test_trends_compare_two_windows_and_draw_each_mode(client: Any) -> None:
    text = client.get("/trends?since=30d&compare=7d").text
    verdict = re.search(r'<p id="trend-verdict">(.*?)</p>', text, re.S)
    assert verdict and "two-proportion test" in verdict.group(1)
    assert "significant" in verdict.group(1) or "within noise" in verdict.group(1)
    titles = re.findall(r"<h2>Rate per day: ([^<]+)</h2>", text)
    assert titles == ["every failure mode", "fabricated_grounding", "repeated_tool_call"]
    bands = re.findall(r'<polygon points="([^"]+)" class="band">', text)
    assert len(bands) == 3 and len(bands[0].split()) >= 2 * 8  # 13 old days, some of them today
    # the flagged runs of the current window, one click away
    assert 'href="/runs/run-flagged-1" class="flagged-id"' in text
    assert 'href="/runs/old-08-0"' not in text  # a flagged run of the baseline window
    one = client.get("/trends?mode=repeated_tool_call").text
    assert re.findall(r"<h2>Rate per day: ([^<]+)</h2>", one) == ["repeated_tool_call"]


@pytest.mark.parametrize(
    "query", ["since=30d&mode=repeated_tool_call", "since=30d&agent=support", "since=all"]
)
def test_a_trends_count_links_to_the_runs_it_counts(client: Any, query: str) -> None:
    # the per-release links dropped the page's role and failure mode (v2's one repeated call
    # linked to both of v2's flagged runs), the per-role rows had no link, and a chart's dots
    # and "all N" left the role out
    text = client.get(f"/trends?{query}").text
    rows = []
    for table in ("by-agent", "by-release"):
        body = text.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
        rows += re.findall(
            r'<td class="text"><a href="([^"]+)">[^<]*</a></td><td class="num">[\d,]+</td>'
            r'<td class="num">([\d,]+)</td>',
            body,
        )
    assert len(rows) >= 3, "every named role and release links to its runs"
    for href, flagged in rows:
        listed = client.get(html.unescape(href)).text
        assert len(re.findall(r'<tr class="run flagged"', listed)) == int(flagged), href
    asked = dict(p.split("=") for p in query.split("&"))
    for href in re.findall(r'href="(/runs\?[^"]+)"', text):
        params = parse_qs(urlsplit(html.unescape(href)).query)
        if "mode" in asked:
            assert params.get("mode") == [asked["mode"]], href
        if "agent" in asked and "release" in params:
            assert params.get("agent") == [asked["agent"]], href


def test_the_review_queue_says_when_more_runs_wait_than_it_shows(client: Any, store: Any) -> None:
    # with more than 100 runs waiting the heading counted the findings shown as all there were,
    # and a role with nothing open said every flagged finding had a verdict
    store.put_traces([fabricated(f"wait-{i:03d}", minutes_ago=300 - i) for i in range(110)])
    review_pending(store)
    text = client.get("/review").text
    assert text.count('class="queue-item"') == 100
    heading = re.search(r"<h1>(.*?)</h1>", text, re.S)
    assert heading and "100 findings awaiting a verdict" in heading.group(1)
    assert "more flagged runs wait after these" in heading.group(1)
    nobody = client.get("/review?agent=nobody").text
    assert "every flagged finding has a verdict" not in nobody
    assert "Nothing to review for agent nobody: no flagged finding" in nobody
    few = client.get("/review?agent=billing").text
    assert "more flagged runs wait" not in few and few.count('class="queue-item"') == 1


def test_metadata_is_shown_as_the_text_it_is(client: Any, store: Any) -> None:
    # tojson escapes < > & ' for a script, so inside <pre> the page showed O\u0027Brien
    run = fabricated("meta-1")
    run.metadata = {"owner": "O'Brien & <co>", "release": "v1", "ünï": "😀"}
    store.put_traces([run])
    text = client.get("/runs/meta-1").text
    shown = re.search(r'<pre class="json" id="metadata">(.*?)</pre>', text, re.S)
    assert shown, "no metadata block"
    assert "\\u00" not in shown.group(1)
    assert html.unescape(shown.group(1)) == (
        '{\n  "owner": "O\'Brien & <co>",\n  "release": "v1",\n  "ünï": "😀"\n}'
    )
    assert "<co>" not in shown.group(1)  # still escaped: text, never markup


def test_a_run_without_an_answer_says_why(client: Any, store: Any) -> None:
    # a run still running (or one that recorded no answer) showed an empty answer box, and a
    # clean badge with nothing to say it was the verdict on the steps so far
    running = fabricated("live-1", order="ORD-1234")
    running.status, running.output, running.ended_at = "running", None, None
    silent = fabricated("silent-1", order="ORD-1234")
    silent.output = None
    store.put_traces([running, silent])
    review_pending(store)
    live = client.get("/runs/live-1").text
    assert 'id="answer"' not in live
    assert "No answer yet: the run is still running." in live
    assert "so far: the run is still running" in live
    quiet = client.get("/runs/silent-1").text
    assert 'id="answer"' not in quiet and "The run recorded no answer." in quiet
    assert "so far" not in quiet
    assert 'id="answer"' in client.get("/runs/run-flagged-1").text


def test_a_superseded_score_is_marked_and_listed_after_the_current_ones(
    client: Any, store: Any
) -> None:
    # after a scorer's new version re-scored a run, its old and new scores were two alike rows
    # in the scores table: nothing said which one the flags and findings come from
    from datetime import UTC, datetime, timedelta

    from agentlens.model import Verdict

    [old] = [s for s in store.get_scores("run-flagged-1") if s.scorer == "no_fabricated_refs"]
    store.put_scores([
        old.model_copy(update={"version": "0-old", "verdict": Verdict.PASSED, "passed": True,
                               "detail": "the old verdict",
                               "scored_at": datetime.now(UTC) - timedelta(days=3)})
    ])  # fmt: skip
    text = client.get("/runs/run-flagged-1").text
    table = text.split('<section class="scores">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(
        r"<tr( class=\"superseded\")?><td>([^<]+)</td><td><code>([^<]+)</code>", table
    )
    assert rows[-1] == (' class="superseded"', "no_fabricated_refs", "0-old")
    assert all(not marked for marked, _, _ in rows[:-1])
    assert f"superseded by {old.version}" in table.split("0-old", 1)[1]


def test_key_hints_are_shown_only_where_the_keys_work(client: Any) -> None:
    # the run page's verdict forms said "Confirm (c)" and "note (n)", keys that only the
    # review queue's script answers
    run = client.get("/runs/run-flagged-1").text
    assert "Confirm</button>" in run and "False positive</button>" in run
    assert "(c)" not in run and "(f)" not in run and 'placeholder="note"' in run
    queue = client.get("/review").text
    assert "Confirm (c)</button>" in queue and 'placeholder="note (n)"' in queue
