"""The dashboard in a real browser (Debian's Chromium through Playwright) against the server on
a real socket: every page, the filters, a run's claims and their evidence, a verdict from the
keyboard, sign-in and out, another project's run, and hostile trace content."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from dashboard_data import NOW, XSS

from agentlens.model import Step, Trace
from agentlens.server._keys import create_key

pytestmark = pytest.mark.e2e


def _clean(watch: Any, *, pages_answered: tuple[int, ...] = ()) -> None:
    """No dialog, no console error, no uncaught exception; except the browser's note on a
    page (not an asset) answered with one of the statuses in ``pages_answered``."""
    expected = [
        e
        for e in watch.console_errors
        if any(f"status of {s} " in e for s in pages_answered) and "/static/" not in e
    ]
    assert [p for p in watch.problems() if p not in expected] == []


def test_each_page_loads(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    for path, heading, name in [
        ("/runs", "Runs", "runs"),
        ("/runs/run-flagged-1", "Run run-flagged-1", "run"),
        ("/runs/run-loop-1", "Run run-loop-1", "run-loop"),
        ("/review", "Review queue", "review"),
        ("/content/blog_post/post-run-flagged-1", "blog_post post-run-flagged-1", "content"),
        ("/trends", "Trends", "trends"),
    ]:
        response = tab.goto(live.url + path)
        assert response.status == 200, path
        assert tab.locator("h1").inner_text().startswith(heading), path
        assert "/static/dashboard.css" in tab.content()
        shot(tab, name)
    # the stylesheet and the script were loaded and applied (no CSP violation on them)
    assert tab.evaluate("getComputedStyle(document.querySelector('header.top')).display") == "flex"
    _clean(watch)


def test_runs_table_filters_are_kept_in_the_url(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    tab.goto(live.url + "/runs")
    all_rows = tab.locator("#runs tr.run").count()
    assert all_rows == 12  # local use (no key yet): every project's runs
    # the per-role summary: sorted by rate, highest first, with an interval
    rates = tab.locator("#roles td.rate").all_inner_texts()
    assert rates and all("[" in r for r in rates if r != "—")
    tab.check("#f-flagged")
    tab.fill("#f-agent", "billing")
    tab.click("#apply")
    tab.wait_for_url(re.compile(r".*agent=billing.*"))
    assert "flagged=1" in tab.url
    assert tab.locator("#runs tr.run").all(), "expected a flagged billing run"
    ids = [r.get_attribute("data-run") for r in tab.locator("#runs tr.run").all()]
    assert ids == ["run-flagged-2"]
    shot(tab, "filtered")
    # the same URL opened fresh shows the same view (a view can be shared)
    shared = tab.url
    tab.goto(shared)
    assert [r.get_attribute("data-run") for r in tab.locator("#runs tr.run").all()] == ids
    assert tab.locator("#f-flagged").is_checked()
    tab.select_option("#f-mode", "repeated_tool_call")
    tab.fill("#f-agent", "")
    tab.click("#apply")
    tab.wait_for_url(re.compile(r".*mode=repeated_tool_call.*"))
    assert [r.get_attribute("data-run") for r in tab.locator("#runs tr.run").all()] == [
        "run-loop-1"
    ]
    # the badge names the failure mode and gives the reason on hover
    badge = tab.locator("#runs tr.run .badge.warn")
    assert "repeated_tool_call" in badge.inner_text()
    assert "search called 5 times" in (badge.get_attribute("title") or "")
    _clean(watch)


def test_open_a_run_and_click_a_claim_to_see_its_evidence(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    tab.goto(live.url + "/runs")
    tab.click("#runs tr.run[data-run='run-flagged-1'] a.run-link")
    tab.wait_for_url(re.compile(r".*/runs/run-flagged-1$"))
    claim = tab.locator("#answer a.claim")
    assert claim.inner_text() == "ORD-1243"
    evidence = tab.locator("#step-s1 mark.evidence")
    assert evidence.inner_text() == "ORD-1234"
    assert "shown" not in (evidence.get_attribute("class") or "")
    tab.set_viewport_size({"width": 1280, "height": 400})
    tab.evaluate("window.scrollTo(0, 0)")
    claim.click()
    why = tab.locator("#why-1")
    assert "active" in (why.get_attribute("class") or "")
    assert "not in the evidence" in why.inner_text()
    assert "ORD-1234" in why.locator(".closest").inner_text()
    assert "shown" in (evidence.get_attribute("class") or "")
    box = evidence.bounding_box()
    assert box is not None and 0 <= box["y"] <= 400, "the evidence was scrolled into view"
    assert tab.url.endswith("#why-1")
    shot(tab, "claim-evidence")
    _clean(watch)


def test_loop_findings_mark_the_repeated_steps(live: Any, page: Any) -> None:
    tab, watch = page
    tab.goto(live.url + "/runs/run-loop-1")
    repeated = [el.get_attribute("id") for el in tab.locator("li.step.repeated").all()]
    assert repeated == ["step-t1", "step-t2", "step-t3", "step-t4"]
    assert "4 steps, 440 tokens, $0.0040" in tab.locator("li.finding.loop .waste").inner_text()
    assert tab.locator("#step-t4 .badge.truncated").count() == 1
    # long outputs are collapsed
    assert tab.locator("#step-t1 details").get_attribute("open") is None
    _clean(watch)


def _precision(tab: Any, scorer: str) -> str:
    row = tab.locator(f"#precision tr[data-by='scorer'][data-key='{scorer}']")
    return "—" if row.count() == 0 else row.locator(".precision-value").inner_text()


def test_verdicts_from_the_keyboard_change_the_precision(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    tab.goto(live.url + "/trends")
    assert _precision(tab, "no_fabricated_refs") == "—"
    tab.goto(live.url + "/review")
    items = tab.locator("li.queue-item")
    before = items.count()
    assert before >= 3
    shot(tab, "queue")
    tab.keyboard.press("j")
    tab.keyboard.press("k")
    tab.keyboard.press("j")
    selected = tab.locator("li.queue-item.selected")
    assert selected.get_attribute("data-index") == "1"
    run_id = selected.get_attribute("data-run")
    tab.keyboard.press("n")
    tab.keyboard.type("checked against the order system")
    tab.keyboard.press("Escape")
    with tab.expect_navigation():
        tab.keyboard.press("c")
    assert tab.locator("li.queue-item").count() == before - 1
    assert tab.locator(f"li.queue-item[data-run='{run_id}']").count() == 0
    verdicts = live.store.get_verdicts(run_id)
    assert [(v.verdict, v.note) for v in verdicts] == [
        ("confirmed", "checked against the order system")
    ]
    tab.goto(live.url + "/trends")
    assert _precision(tab, "no_fabricated_refs").startswith("100.0%")
    # the selection stays where it was; f marks the next one a false positive
    tab.goto(live.url + "/review?at=1")
    assert tab.locator("li.queue-item.selected").get_attribute("data-index") == "1"
    second = tab.locator("li.queue-item.selected").get_attribute("data-run")
    with tab.expect_navigation():
        tab.keyboard.press("f")
    [given] = live.store.get_verdicts(second)
    assert given.verdict == "false_positive"
    tab.goto(live.url + "/trends")
    expected = "50.0%" if given.scorer == "no_fabricated_refs" else "0.0%"
    assert _precision(tab, given.scorer).startswith(expected)
    # e opens the evidence of the selected finding
    tab.goto(live.url + "/review")
    target = tab.locator("li.queue-item.selected").get_attribute("data-run")
    with tab.expect_navigation():
        tab.keyboard.press("e")
    assert f"/runs/{target}" in tab.url and tab.url.endswith("#why-1")
    assert "active" in (tab.locator("#why-1").get_attribute("class") or "")
    _clean(watch)


def test_log_in_and_out_and_another_projects_run_is_denied(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    key = create_key(live.store, "default").key
    tab.goto(live.url + "/runs/run-flagged-1")
    tab.wait_for_url(re.compile(r".*/login\?next=.*"))
    shot(tab, "login")
    tab.fill("#key", "al_000000000000_" + "x" * 43)
    tab.click("#sign-in")
    assert "invalid or revoked API key" in tab.locator("#error").inner_text()
    tab.fill("#key", key)
    tab.click("#sign-in")
    tab.wait_for_url(re.compile(r".*/runs/run-flagged-1$"))
    assert tab.locator("#project").inner_text() == "default"
    cookies = {c["name"]: c for c in tab.context.cookies()}
    session = cookies["agentlens_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert key.split("_", 2)[2] not in session["value"]  # the secret may hold "_"
    assert tab.evaluate("document.cookie") == ""  # HttpOnly: invisible to scripts
    response = tab.goto(live.url + "/runs/other-flagged")
    assert response.status == 404
    assert "no run with id" in tab.locator("#error").inner_text()
    tab.goto(live.url + "/runs")
    assert tab.locator("#runs tr.run[data-run='other-flagged']").count() == 0
    tab.click("#logout")
    tab.wait_for_url(re.compile(r".*/login$"))
    tab.goto(live.url + "/runs")
    tab.wait_for_url(re.compile(r".*/login\?next=.*"))
    # the old session cookie, replayed, is refused after logout
    tab.context.add_cookies([session])
    tab.goto(live.url + "/runs")
    tab.wait_for_url(re.compile(r".*/login\?next=.*"))
    _clean(watch, pages_answered=(401, 404))


def _assert_inert(tab: Any) -> None:
    """Nothing a trace carried became markup: one script (ours), no handlers, no
    ``javascript:`` URL, no frame; every payload is shown as text."""
    found = tab.evaluate(
        """() => {
        const all = Array.from(document.querySelectorAll('*'));
        const handlers = [];
        for (const el of all) {
          for (const a of el.getAttributeNames()) {
            if (a.toLowerCase().startsWith('on')) handlers.push(el.tagName + ' ' + a);
          }
        }
        const urls = [];
        for (const el of document.querySelectorAll('[href], [src], [action], [formaction]')) {
          for (const a of ['href', 'src', 'action', 'formaction']) {
            const v = el.getAttribute(a);
            if (v !== null && /^\\s*(javascript|data|vbscript):/i.test(v)) urls.push(v);
          }
        }
        return {
          scripts: Array.from(document.scripts).map(s => s.getAttribute('src')),
          handlers, urls,
          frames: document.querySelectorAll('iframe, object, embed').length,
          imgs: document.querySelectorAll('main img').length,
        };
    }"""
    )
    assert found == {
        "scripts": ["/static/dashboard.js"], "handlers": [], "urls": [], "frames": 0, "imgs": 0,
    }  # fmt: skip


def test_hostile_trace_content_never_executes(live: Any, page: Any, shot: Any) -> None:
    tab, watch = page
    paths = ["/runs", "/runs?flagged=1", "/review", "/trends", "/trends?since=all"]
    paths += [f"/runs/xss-{i}" for i in range(len(XSS))]
    paths += ["/content/url/javascript:alert('link')"]
    for path in paths:
        tab.goto(live.url + path)
        _assert_inert(tab)
    for i, payload in enumerate(XSS):
        tab.goto(f"{live.url}/runs/xss-{i}")
        text = tab.locator("main").inner_text()
        assert payload in text, f"payload {i} is not shown as text"
        assert tab.locator("#agent").inner_text() == f"agent {payload}"
        # the link kind and id are shown as text and linked only as escaped path segments
        for link in tab.locator("a.content-link").all():
            assert (link.get_attribute("href") or "").startswith("/content/")
        tab.locator("a.claim").first.click()
        _assert_inert(tab)
        if i == 0:
            shot(tab, "xss-run")
    # open every content page a hostile link produced
    tab.goto(f"{live.url}/runs/xss-1")
    hrefs = [a.get_attribute("href") for a in tab.locator("a.content-link").all()]
    assert hrefs
    for href in hrefs:
        response = tab.goto(live.url + href)
        assert response.status == 200
        assert "hallucination suspected" in tab.locator("#content-state").inner_text()
        _assert_inert(tab)
    tab.goto(live.url + "/runs")
    shot(tab, "xss-runs")
    assert watch.dialogs == []
    _clean(watch)


def _overflow(tab: Any) -> list[str]:
    """What sticks out past the window's right edge (the page would scroll sideways): the
    page's extra width and the first elements that stick out, empty when nothing does."""
    found: list[str] = tab.evaluate(
        """() => {
        const extra = document.documentElement.scrollWidth - window.innerWidth;
        if (extra <= 0) return [];
        const out = Array.from(document.querySelectorAll('body *'))
          .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
          .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.className);
        return [extra + 'px wider', ...out];
    }"""
    )
    return found


@pytest.mark.parametrize("width", [1280, 375])
def test_long_text_and_a_phone_screen_never_widen_the_page(
    live: Any, page: Any, shot: Any, width: int
) -> None:
    # an unbroken name, agent role, model name or claim stretched the runs table and the run's
    # facts to thousands of pixels; on a phone every page scrolled sideways
    from agentlens.review import review_pending

    word = "N" * 300
    live.store.put_traces([
        Trace(id="wide-" + "w" * 80, agent="role-" + "r" * 120, name=word, output="See ORD-" + "9" * 200,
              started_at=NOW - timedelta(minutes=2), ended_at=NOW - timedelta(minutes=1),
              links={"ticket": "T-" + "t" * 150}, metadata={"release": "v" + "9" * 100},
              steps=[Step(id="s1", kind="tool", name="tool-" + "x" * 150, output={"id": "ORD-1"}),
                     Step(id="s2", kind="llm", name="chat", output="See ORD-" + "9" * 200,
                          attributes={"model": "m" * 200, "input_tokens": 1})])
    ])  # fmt: skip
    review_pending(live.store)
    tab, watch = page
    tab.set_viewport_size({"width": width, "height": 800})
    wide = "/runs/wide-" + "w" * 80
    for path in ["/runs", wide, "/review", "/trends", "/content/ticket/T-" + "t" * 150,
                 "/runs/run-loop-1", "/runs/xss-0"]:  # fmt: skip
        assert tab.goto(live.url + path).status == 200
        assert _overflow(tab) == [], path
        # the wide tables scroll inside their box, the page does not
        for table in tab.locator("main table").all():
            box = table.evaluate("t => t.parentElement.getBoundingClientRect().right")
            assert box <= width, path
    tab.goto(live.url + "/runs")
    # the start time is one line, the link to the run
    link = tab.locator("#runs a.run-link").first
    assert link.evaluate("a => a.getClientRects().length") == 1
    shot(tab, f"runs-{width}")
    tab.goto(live.url + wide)
    shot(tab, f"run-{width}")
    _clean(watch)


def test_back_from_the_evidence_returns_to_the_same_finding(live: Any, page: Any) -> None:
    # the queue's selection lived only in the script: j j e, then Back, reloaded the page (it is
    # no-store) with the first finding selected
    tab, watch = page
    tab.goto(live.url + "/review?agent=support")
    assert tab.locator("li.queue-item").count() >= 3
    tab.keyboard.press("j")
    tab.keyboard.press("j")
    chosen = tab.locator("li.queue-item.selected")
    assert chosen.get_attribute("data-index") == "2"
    run_id = chosen.get_attribute("data-run")
    with tab.expect_navigation():
        tab.keyboard.press("e")
    assert f"/runs/{run_id}" in tab.url
    tab.go_back()
    tab.wait_for_load_state()
    assert tab.locator("li.queue-item.selected").get_attribute("data-index") == "2"
    assert "agent=support" in tab.url  # the filter is kept
    tab.keyboard.press("k")
    tab.reload()
    assert tab.locator("li.queue-item.selected").get_attribute("data-index") == "1"
    _clean(watch)
