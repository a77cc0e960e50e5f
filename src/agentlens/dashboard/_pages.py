"""The dashboard's routes: runs, one run, the review queue, a content item, trends, sign-in.

Every page reads through the store's indexed read API (the list of calls per page is in
docs/dashboard.md) and renders a template; every form that changes something is a POST with
the viewer's CSRF token, answered with a redirect.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from agentlens.dashboard import _trends
from agentlens.dashboard._access import (
    SESSION_COOKIE,
    Access,
    Viewer,
    anonymous_viewer,
    csrf_ok,
    set_cookie,
    viewer_of,
)
from agentlens.dashboard._render import HERE, page, query_url, secure
from agentlens.dashboard._views import (
    answer_segments,
    duration_s,
    finding_views,
    flatten,
    input_segments,
    step_tree,
    usage,
)
from agentlens.errors import AgentlensError, RunNotFoundError, StoreError
from agentlens.model import FailureMode
from agentlens.store import RunFilter
from agentlens.store._flags import current_scores

__all__ = ["WINDOWS", "mount_dashboard", "window_start"]

WINDOWS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
    "all": None,
}
"""The time windows the filters offer."""
PAGE_SIZE = 50
QUEUE_SIZE = 100
MAX_FORM = 64 << 10
MODES = [str(m) for m in FailureMode]


class _Problem(Exception):
    """A request the page cannot answer: rendered as an error page with this status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def mount_dashboard(app: FastAPI, access: Access) -> None:
    """Add the dashboard's pages to ``app`` (paths ``/``, ``/runs``, ``/review``, ``/content``,
    ``/trends``, ``/login``, ``/logout`` and ``/static``)."""
    from agentlens.config import load_settings

    settings = load_settings()
    router = APIRouter(include_in_schema=False)
    pages = _Pages(access, settings)

    def get(path: str, render: Callable[[Request, Viewer], Response]) -> None:
        def endpoint(request: Request) -> Response:
            return pages.guarded(request, render)

        # HEAD as GET (uptime checks, link checkers): the server sends the headers only
        router.add_api_route(path, endpoint, methods=["GET", "HEAD"])

    get("/runs", pages.runs)
    # ids may hold a "/" (the pages link them as %2F, which reaches the router decoded): the
    # run id and a content item's id are the rest of the path
    get("/runs/{run_id:path}", pages.run)
    get("/review", pages.review)
    get("/content/{kind}/{item_id:path}", pages.content)
    get("/trends", pages.trends)

    @router.api_route("/", methods=["GET", "HEAD"])
    def home() -> Response:
        return secure(RedirectResponse("/runs", status_code=303))

    @router.get("/login")
    def login_form(request: Request) -> Response:
        return pages.login_form(request)

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        return await run_in_threadpool(pages.login, request, form)

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        form = await _form(request)
        return await run_in_threadpool(pages.logout, request, form)

    @router.post("/review/verdict")
    async def verdict(request: Request) -> Response:
        form = await _form(request)
        return await run_in_threadpool(pages.verdict, request, form)

    app.include_router(router)
    app.mount("/static", _Assets(directory=HERE / "static"), name="dashboard-static")


class _Assets(StaticFiles):
    """The script, stylesheet and icon, revalidated on every load (``no-cache``: a 304 while
    they are unchanged), so that after an upgrade no browser runs the old script against the
    new pages."""

    def file_response(
        self, full_path: Any, stat_result: Any, scope: Any, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form (the first value of each field); at most 64 KiB."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


def _back(target: str | None, default: str) -> str:
    """A redirect target from a form: a path on this site only."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


def _redirect(url: str) -> Response:
    return secure(RedirectResponse(url, status_code=303))


class _Pages:
    def __init__(self, access: Access, settings: Any) -> None:
        self.access = access
        self.store = access.store
        self.settings = settings

    # -- plumbing -------------------------------------------------------------------------------

    def guarded(self, request: Request, render: Callable[[Request, Viewer], Response]) -> Response:
        viewer = viewer_of(request, self.access)
        if viewer is None:
            # the path as the browser sent it: an id's %2F, %3F or %23 decoded would send the
            # browser elsewhere after sign-in
            raw = request.scope.get("raw_path")
            path = raw.decode("latin-1") if raw else request.url.path
            here = path + (f"?{request.url.query}" if request.url.query else "")
            return _redirect(query_url("/login", next=here))
        try:
            return render(request, viewer)
        except _Problem as problem:
            return self.problem(request, viewer, problem.status, problem.message)

    def problem(self, request: Request, viewer: Viewer | None, status: int, message: str) -> Any:
        return page(request, "error.html", viewer, status=status, message=message)

    def _choice(self, request: Request, name: str, choices: Any, default: str | None) -> Any:
        value = request.query_params.get(name) or default
        if value is not None and value not in choices:
            raise _Problem(400, f"{name}: {value!r} is not one of {', '.join(choices)}")
        return value

    def _window(self, request: Request, default: str) -> tuple[str, datetime | None]:
        name = self._choice(request, "since", WINDOWS, default)
        return name, window_start(name, datetime.now(UTC))

    # -- sign in and out ------------------------------------------------------------------------

    def login_form(
        self, request: Request, *, error: str | None = None, nxt: str | None = None
    ) -> Response:
        if error is None and self.access.local(request):
            return _redirect("/runs")
        viewer = anonymous_viewer(request)
        nxt = _back(nxt or request.query_params.get("next"), "/runs")
        return page(
            request, "login.html", viewer, status=401 if error else 200, error=error, next=nxt,
            signed_out=True,
        )  # fmt: skip

    def login(self, request: Request, form: dict[str, str]) -> Response:
        viewer = anonymous_viewer(request)
        if viewer.new_csrf_cookie or not csrf_ok(request, viewer, form.get("csrf")):
            return self.problem(request, None, 403, "the form expired: reload the page and retry")
        token = self.access.keys.open_session(form.get("key", "").strip())
        if token is None:
            return self.login_form(
                request, error="invalid or revoked API key", nxt=form.get("next")
            )
        response = _redirect(_back(form.get("next"), "/runs"))
        set_cookie(response, request, SESSION_COOKIE, token)
        return response

    def logout(self, request: Request, form: dict[str, str]) -> Response:
        viewer = viewer_of(request, self.access)
        if viewer is None or not csrf_ok(request, viewer, form.get("csrf")):
            return self.problem(request, None, 403, "the form expired: reload the page and retry")
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            self.access.keys.close_session(token)
        response = _redirect("/login")
        set_cookie(response, request, SESSION_COOKIE, None)
        return response

    # -- runs -----------------------------------------------------------------------------------

    def runs(self, request: Request, viewer: Viewer) -> Response:
        from agentlens.analytics import rate_breakdown
        from agentlens.store._server import list_runs_page

        window, start = self._window(request, "7d")
        q = request.query_params
        mode = self._choice(request, "mode", MODES, None)
        agent = q.get("agent") or None
        release = q.get("release") or None
        flagged = q.get("flagged") == "1"
        where = RunFilter(
            start=start, agent=agent, project=viewer.project, release=release,
            flagged=True if flagged or mode else None, failure_mode=mode,
        )  # fmt: skip
        rows, nxt = list_runs_page(
            self.store, where, before=_cursor(q.get("cursor")), limit=PAGE_SIZE
        )
        ids = [r.id for r in rows]
        traces = {t.id: t for t in self.store.query_traces(RunFilter(run_ids=ids))} if ids else {}
        costs = {rid: usage(t) for rid, t in traces.items()}
        roles = rate_breakdown(
            "agent", start=start, store=self.access.view(viewer.project), settings=self.settings,
            flagged_ids=False,
        ).groups  # fmt: skip
        roles.sort(key=lambda g: (g.rate is None, -(g.rate or 0), -g.flagged, g.key or ""))
        filters = {"since": window, "agent": agent, "release": release,
                   "flagged": "1" if flagged else None, "mode": mode}  # fmt: skip
        older = query_url("/runs", **filters, cursor=f"{nxt[0]}.{nxt[1]}") if nxt else None
        return page(
            request, "runs.html", viewer, rows=rows, costs=costs, roles=roles, filters=filters,
            windows=list(WINDOWS), modes=MODES, duration_s=duration_s, next_url=older,
            paged=bool(q.get("cursor")), top_mode=_top_mode,
        )  # fmt: skip

    def run(self, request: Request, viewer: Viewer) -> Response:
        run_id = request.path_params["run_id"]
        if not run_id:  # /runs/
            return _redirect("/runs")
        trace = self._owned(viewer, run_id)
        scores = self.store.get_scores(run_id)
        flags = self.store.get_flags(run_id)
        findings = finding_views(flags, scores)
        answer = answer_segments(trace, findings)
        steps = flatten(step_tree(trace, findings))
        verdicts = {v.finding_key: v for v in self.store.get_verdicts(run_id) if v.live}
        keys = {f.n: f.key for f in (flags.findings if flags else ())}
        links = [
            (kind, item, self._content_state(viewer, kind, item)[1])
            for kind, item in sorted(trace.links.items())
        ]
        # the current score of each scorer (what the flags and findings come from) first, then
        # the ones a later score of their scorer superseded, each with the version that did
        current = current_scores(scores)
        latest = {s.scorer: s.version for s in current}
        kept = {id(s) for s in current}
        score_rows = [(s, None) for s in current] + [
            (s, latest[s.scorer]) for s in reversed(scores) if id(s) not in kept
        ]
        return page(
            request, "run.html", viewer, trace=trace, flags=flags, findings=findings,
            answer=answer, steps=steps, inputs=input_segments(trace, findings), scores=score_rows, links=links, usage=usage(trace),
            verdict_of=lambda n: verdicts.get(keys.get(n, "")), duration_s=duration_s,
        )  # fmt: skip

    def _owned(self, viewer: Viewer, run_id: str) -> Any:
        try:
            trace = self.store.get_trace(run_id)
        except RunNotFoundError:
            trace = None
        if trace is None or not viewer.owns(trace.project):
            raise _Problem(404, f"no run with id {run_id!r}")
        return trace

    def _content_state(self, viewer: Viewer, kind: str, item_id: str) -> tuple[list[Any], bool]:
        """The flagged runs behind a content item that the viewer may see, and whether the item
        is suspected for them."""
        found = self.store.content_flags(kind, item_id)
        runs = list(found.runs)
        if viewer.project is not None and runs:
            owners = self.store.run_projects([r.run_id for r in runs])
            runs = [r for r in runs if owners.get(r.run_id) == viewer.project]
        return runs, any(not r.dismissed for r in runs)

    # -- content --------------------------------------------------------------------------------

    def content(self, request: Request, viewer: Viewer) -> Response:
        from agentlens.store._server import list_runs_page

        kind = request.path_params["kind"]
        item_id = request.path_params["item_id"]
        runs, suspected = self._content_state(viewer, kind, item_id)
        ids = [r.run_id for r in runs]
        summaries = (
            {s.id: s for s in self.store.list_runs(RunFilter(run_ids=ids, project=viewer.project))}
            if ids
            else {}
        )
        # every run that produced the item, newest first (the run_links table's key)
        produced, more = list_runs_page(
            self.store, RunFilter(project=viewer.project), before=None, limit=PAGE_SIZE,
            link=(kind, item_id),
        )  # fmt: skip
        return page(
            request, "content.html", viewer, kind=kind, item_id=item_id, runs=runs,
            suspected=suspected, summaries=summaries, produced=produced, more=more is not None,
        )  # fmt: skip

    # -- review ---------------------------------------------------------------------------------

    def review(self, request: Request, viewer: Viewer) -> Response:
        from agentlens.review import precision, review_queue

        agent = request.query_params.get("agent") or None
        # one more than is shown, to say whether more runs wait after these
        queue = review_queue(
            agent=agent, limit=QUEUE_SIZE + 1, project=viewer.project, db=self.store
        )
        more = len(queue) > QUEUE_SIZE
        items = []
        for run in queue[:QUEUE_SIZE]:
            flags = self.store.get_flags(run.id)
            judged = {v.finding_key for v in self.store.get_verdicts(run.id) if v.live}
            for f in flags.findings if flags else ():
                if f.key not in judged:
                    items.append((run, f))
        at = request.query_params.get("at", "0")
        return page(
            request, "review.html", viewer, items=items, agent=agent, more=more, shown=QUEUE_SIZE,
            at=int(at) if _digits(at) else 0,
            precision=precision(db=self.access.view(viewer.project)),
        )  # fmt: skip

    def verdict(self, request: Request, form: dict[str, str]) -> Response:
        from agentlens.review import set_verdict

        viewer = viewer_of(request, self.access)
        if viewer is None or not csrf_ok(request, viewer, form.get("csrf")):
            return self.problem(request, viewer, 403, "the form expired: reload the page and retry")
        run_id = form.get("run_id", "")
        finding = form.get("finding", "")
        choice = form.get("verdict", "")
        try:
            self._owned(viewer, run_id)
            if choice not in ("confirmed", "false_positive"):
                raise _Problem(400, "verdict: choose confirmed or false_positive")
            if finding and not _digits(finding):
                raise _Problem(400, f"finding: {finding!r} is not a finding number")
            set_verdict(
                run_id, choice, finding=int(finding) if finding else None,
                note=form.get("note", "").strip() or None,
                by=f"key:{viewer.key_id}" if viewer.key_id else None, db=self.store,
            )  # fmt: skip
        except _Problem as problem:
            return self.problem(request, viewer, problem.status, problem.message)
        except StoreError as exc:
            return self.problem(request, viewer, 409, str(exc))
        return _redirect(_back(form.get("next"), "/review"))

    # -- trends ---------------------------------------------------------------------------------

    def trends(self, request: Request, viewer: Viewer) -> Response:
        from agentlens.review import precision

        window, start = self._window(request, "30d")
        compare = self._choice(request, "compare", _trends.COMPARE, "7d")
        mode = self._choice(request, "mode", MODES, None)
        agent = request.query_params.get("agent") or None
        view = self.access.view(viewer.project)
        try:
            report = _trends.build(
                view, self.settings, start=start, compare=_trends.COMPARE[compare], mode=mode,
                agent=agent,
            )  # fmt: skip
        except AgentlensError as exc:
            raise _Problem(400, str(exc)) from None
        return page(
            request, "trends.html", viewer, report=report, windows=list(WINDOWS),
            filters={"since": window, "compare": compare, "mode": mode, "agent": agent},
            compares=list(_trends.COMPARE), modes=MODES, precision=precision(db=view),
        )  # fmt: skip


def window_start(name: str, now: datetime) -> datetime | None:
    """Where window ``name`` starts: ``1h`` and ``24h`` back from ``now``; the day windows at a
    UTC midnight (``7d``: the 7 days before today, and today), so that a rate over them is
    read from the whole-day rollup; ``all``: open."""
    length = WINDOWS[name]
    if length is None:
        return None
    if length < timedelta(days=2):
        return now - length
    return now.replace(hour=0, minute=0, second=0, microsecond=0) - length


def _cursor(text: str | None) -> tuple[int, str] | None:
    """The key cursor ``SORT_AT.ID`` of the next-page link (``None``: the first page)."""
    if not text:
        return None
    head, _, run_id = text.partition(".")
    # a sort key is a 64-bit integer: a longer one would overflow the store's column
    if not run_id or not _digits(head.removeprefix("-")) or not -(2**63) <= int(head) < 2**63:
        raise _Problem(400, "cursor: not a cursor this page made")
    return int(head), run_id


def _digits(text: str) -> bool:
    """True when ``text`` is a number ``int`` reads: ASCII digits (``str.isdigit`` also takes
    "²", which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def _top_mode(by_mode: dict[str, int]) -> str | None:
    """The failure mode with the most flagged runs."""
    best = max(by_mode.items(), key=lambda kv: kv[1], default=None)
    return best[0] if best and best[1] > 0 else None
