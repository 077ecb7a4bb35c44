"""The page's routes: a Starlette app whose handlers render Jinja2 templates (DESIGN.md §20).

Request path: browser → :class:`tools.ui.security.Guard` (Host, cookie,
Origin; headers) → a route here (the CSRF token of a POST) → a function of
:mod:`tools.ui.hub_calls` run with ``trio.to_thread.run_sync`` on a fresh blocking
:class:`~tools.client.blocking.HubClient` (``client_name`` ``amux-ui``, the
environment's Hub and identity, as the CLI) → the Hub.  On cancellation (the
browser went away, shutdown) the worker thread finishes its Hub call and its
result is dropped; a write it made stays made, as with a CLI killed after
sending.  GET never changes anything; every change is a POST form with the
CSRF token and, for a document, its ``expected_revision`` (compare-and-swap).
A :class:`~protocol.errors.HubError` is shown with its code and message on
the page it came from, keeping what the user typed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import trio
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted, plural
from amux_memory.tools.ui import hub_calls
from amux_memory.tools.ui.render import diff_rows, highlight, render_markdown
from amux_memory.tools.ui.security import CSRF_FIELD, SESSION_KEY, Guard, check_csrf

T = TypeVar("T")

NAV: ContextVar[dict[str, Any] | None] = ContextVar("amux_ui_nav", default=None)
"""The navigation's review state of the request being served (``{review, pending}`` once known, DESIGN.md §21):
:class:`NavState` sets a fresh dict for each ``GET``/``HEAD`` (None for a ``POST``: its answer is a redirect),
the first Hub call of the page view fills it on the same connection (:meth:`UiApp.hub`), the template reads it."""


class NavState:
    """ASGI middleware giving each page view its own :data:`NAV` holder (reset when the answer is sent)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        token = NAV.set({} if scope.get("method") in ("GET", "HEAD") else None)
        try:
            await self.app(scope, receive, send)
        finally:
            NAV.reset(token)

RESTART_HINT = ("press \u201cRestart the Hub\u201d below (what 'amux hub restart' does; a Hub run by its "
                "systemd user service is restarted through systemd)")
"""What the settings page says to do to apply a change while a Hub runs for its home (:mod:`tools.ui.restart`)."""


LINT_SUMMARY_ROWS = 3
"""Lint findings the overview lists (the rest are on ``/lint``)."""

PAGE_HINTS = {
    ErrorCode.DESTRUCTIVE_REWRITE.value: "this save would cut most of the document (the rewrite guard). If that "
    "is meant, tick \u201callow a large cut\u201d below and save again; your text is still in the editor.",
    ErrorCode.CONFLICT.value: "the document changed since this page was loaded (or it already exists). On the "
    "edit page the version now stored is shown below and your text is kept; elsewhere, reload and try again.",
}
REVIEW_CONFLICT_HINT = ("the document changed since the agent read it (or since this page was loaded): nothing "
                        "was written. The version now stored is shown below, and the text you approved is kept in "
                        "the editor; merge it there and approve the edited text (that replaces the stored version).")
"""A ``conflict`` on the proposal page (DESIGN.md §21), shown instead of :data:`PAGE_HINTS`' edit-page wording."""

DECIDED_AS = {"approve": "approved", "reject": "rejected"}
"""A ``review_decide`` decision → the query flag of the Review page it leads to."""

REVIEW_RULES = {"off": "off (applied at once)", "agents": "agents' writes are proposals a maintainer decides",
                "all": "every write but a maintainer's is a proposal"}
"""A team's review rule (DESIGN.md §7.8) as its pages say it."""
"""What to do in the page's own terms, shown before the Hub's message (which names CLI flags and commands)
for these error codes."""


def form_text(text: str) -> str:
    """``text`` as a browser submits it from a ``<textarea>``: every line break as CRLF (HTML's form
    encoding), so a digest of what the page showed compares with what comes back."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def templates() -> Environment:
    """The Jinja2 environment: the package's templates, autoescape on for every file (a field the Hub
    left out of an answer, such as a version's ``gone``, renders as empty)."""
    env = Environment(loader=PackageLoader("amux_memory.tools.ui", "templates"),
                      autoescape=select_autoescape(default=True))
    env.globals["page_hints"] = PAGE_HINTS
    env.filters["markdown"] = render_markdown
    env.filters["highlight"] = highlight
    env.filters["quotepath"] = lambda path: quote(str(path), safe="/")
    env.filters["docurl"] = lambda path: "/doc/" + quote(str(path), safe="/")
    env.filters["short"] = lambda rev: str(rev)[:12]
    env.filters["sha256"] = lambda text: hashlib.sha256(form_text(str(text)).encode("utf-8")).hexdigest()
    env.filters["inert"] = inert
    env.filters["age"] = age
    env.filters["counted"] = lambda count, word: counted(int(count), word)  # {{ n | counted("byte") }}: "1 byte"
    env.filters["noun"] = lambda count, word: plural(int(count), word)  # {{ n | noun("byte") }}: "byte" for 1
    env.filters["team"] = team_of
    env.globals["review_rules"] = REVIEW_RULES
    return env


def unconfirmed(fields: dict[str, str], what: str) -> HubError | None:
    """The refusal of a form whose confirmation box (``confirm``) is not ticked (``what``: the action and its
    object, as the message says it), else None."""
    if fields.get("confirm") == "on":
        return None
    return HubError(ErrorCode.BAD_REQUEST, f"tick the confirmation box to {what} (nothing was changed)",
                    {"field": "confirm"})


def undecided(fields: dict[str, str]) -> HubError | None:
    """The refusal of a review form whose ``decision`` is neither of :data:`DECIDED_AS`, else None."""
    if fields.get("decision", "") in DECIDED_AS:
        return None
    return HubError(ErrorCode.BAD_REQUEST, "decision must be approve or reject (nothing was changed)",
                    {"field": "decision"})


def team_of(path: Any) -> str:
    """The team name of a mounted path (``@web/deploy.md`` → ``web``, DESIGN.md §7.8); ``""`` for a path of the
    caller's own memory."""
    from amux_memory.protocol.agent_protocol import MOUNT_LABEL

    found = MOUNT_LABEL.match(str(path))
    return found.group(0)[1:-1] if found else ""


def age(seconds: Any) -> str:
    """``seconds`` (an int, a proposal's ``age_seconds``) as a person reads an age: ``40 s``, ``5 min``,
    ``3 h``, ``2 d`` (whole units, rounded down)."""
    value = max(0, int(seconds))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if value >= size:
            return f"{value // size} {unit}"
    return f"{value} s"


class UiApp:
    """The routes, bound to one :class:`Guard` (for the CSRF token) and a client factory.

    ``client_factory`` makes an unconnected :class:`HubClient`; ``home`` is
    the local Hub's home for the settings page (``None`` when the Hub is
    remote, ``AMUX_HUB``: its settings are on its own machine).
    """

    def __init__(self, client_factory: Callable[[], HubClient], home: Path | None) -> None:
        self.client_factory = client_factory
        self.home = home
        self.env = templates()
        self.guard: Guard | None = None

    def starlette(self) -> Starlette:
        """The Starlette application (wrap it in :class:`Guard` and set :attr:`guard` before serving)."""
        static = Path(__file__).resolve().parent / "static"
        return Starlette(middleware=[Middleware(NavState)], routes=[
            Route("/", self.overview),
            Route("/lint", self.lint),
            Route("/health", self.health),
            Route("/doc/{path:path}", self.document),
            Route("/new", self.new),
            Route("/save", self.save, methods=["POST"]),
            Route("/forget", self.forget, methods=["POST"]),
            Route("/history/{path:path}", self.history),
            Route("/diff/{path:path}", self.diff),
            Route("/restore", self.restore, methods=["POST"]),
            Route("/purge", self.purge, methods=["POST"]),
            Route("/log", self.log),
            Route("/search", self.search),
            Route("/settings", self.settings, methods=["GET", "POST"]),
            Route("/restart", self.restart_hub, methods=["POST"]),
            Route("/review", self.review),
            Route("/review/decide", self.review_decide, methods=["POST"]),
            Route("/review/session", self.change_set_decide, methods=["POST"]),
            Route("/review/session/{session:path}", self.change_set),
            Route("/review/{id}", self.review_show),
            Route("/teams", self.teams),
            Route("/team/{name}", self.team),
            Route("/favicon.ico", self.favicon),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ])

    # -- plumbing ----------------------------------------------------------------------------

    async def hub(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(client, *args, **kwargs)`` in a worker thread on a fresh connection; raises what the Hub
        answers.  On a page view (:data:`NAV` holds a dict) the first call also asks, on the same connection,
        for the navigation's review count (:func:`tools.ui.hub_calls.review_state`)."""
        nav = NAV.get()

        def run() -> T:
            with self.client_factory() as client:
                out = fn(client, *args, **kwargs)
                if nav is not None and "pending" not in nav:
                    nav.update(hub_calls.review_state(client))
                return out

        return await trio.to_thread.run_sync(run)

    async def together(self, first: Callable[[HubClient], T], second: Callable[[HubClient], Any]) -> tuple[T, Any]:
        """:meth:`hub` for two functions at once, each on its own connection; raises the first one's
        :class:`HubError` if either failed (the other is left to finish)."""
        out: dict[int, Any] = {}

        async def run(key: int, fn: Callable[[HubClient], Any]) -> None:
            try:
                out[key] = await self.hub(fn)
            except HubError as exc:
                out[key] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, 0, first)
            nursery.start_soon(run, 1, second)
        for key in (0, 1):
            if isinstance(out[key], HubError):
                raise out[key]
        return out[0], out[1]

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """Render template ``name`` with ``values`` plus the CSRF token of ``request``'s session."""
        assert self.guard is not None
        csrf = self.guard.csrf_for(str(request.scope.get(SESSION_KEY, "")))
        html = self.env.get_template(name).render(csrf=csrf, csrf_field=CSRF_FIELD, nav=NAV.get() or {}, **values)
        return HTMLResponse(html, status_code=status)

    async def nav_state(self) -> None:
        """Fill :data:`NAV` for a page that asks the Hub nothing else (its navigation shows the review count);
        a Hub that does not answer leaves the count out."""
        nav = NAV.get()
        if nav is not None and "pending" not in nav:
            with contextlib.suppress(HubError):
                await self.hub(lambda client: None)

    def error_page(self, request: Request, exc: HubError, status: int = 400,
                   retry: tuple[str, str] | None = None) -> HTMLResponse:
        """A page showing one Hub error (code, message); ``retry``: ``(url, label)`` of what to try instead."""
        return self.page(request, "error.html", status=status, error=exc, title="Error", retry=retry)

    async def form(self, request: Request) -> dict[str, str]:
        """The POST form's fields as text; raises ``unauthorized`` (→ 403) when the CSRF token is wrong."""
        data = await request.form(max_fields=64, max_part_size=16 << 20)
        fields = {k: v for k, v in data.items() if isinstance(v, str)}
        assert self.guard is not None
        check_csrf(self.guard, request.scope, fields.get(CSRF_FIELD))
        return fields

    async def form_post(self, request: Request, act: Callable[[dict[str, str]], Awaitable[Response]], *,
                        check: Callable[[dict[str, str]], HubError | None] | None = None,
                        refused: int | Callable[[HubError], int] = 400) -> Response:
        """Answer a form POST: read the form (:meth:`form`; a wrong CSRF token is the error page, 403), refuse
        what ``check`` finds wrong in its fields before anything is done (the error page, 400), else answer
        what ``act(fields)`` returns; a :class:`HubError` ``act`` raises is the error page with status
        ``refused`` (or ``refused(exc)``)."""
        try:
            fields = await self.form(request)
        except HubError as exc:
            return self.error_page(request, exc, 403)
        if check is not None and (wrong := check(fields)) is not None:
            return self.error_page(request, wrong)
        try:
            return await act(fields)
        except HubError as exc:
            return self.error_page(request, exc, refused if isinstance(refused, int) else refused(exc))

    @staticmethod
    def see(url: str) -> RedirectResponse:
        """303 to ``url`` (after a successful POST)."""
        return RedirectResponse(url, status_code=303)

    # -- pages -------------------------------------------------------------------------------

    async def favicon(self, request: Request) -> Response:
        """The icon browsers ask for on their own (the pages name ``/static/favicon.svg``)."""
        from starlette.responses import FileResponse

        return FileResponse(Path(__file__).resolve().parent / "static" / "favicon.svg", media_type="image/svg+xml")

    async def overview(self, request: Request) -> Response:
        try:
            cursor = request.query_params.get("cursor", "")
            data, changes = await self.together(lambda c: hub_calls.overview(c, cursor), hub_calls.recent_changes)
        except HubError as exc:
            return self.error_page(request, exc, 503 if exc.code is ErrorCode.UNAVAILABLE else 400)
        return self.page(request, "overview.html", title="Overview", **hub_calls.with_changes(data, changes))

    async def lint(self, request: Request) -> Response:
        """``/lint``: every finding; ``/lint?summary=1``: the overview's fragment (how many, the first
        :data:`LINT_SUMMARY_ROWS`), fetched by ``ui.js`` after the overview loaded, since lint reads every
        document."""
        summary = request.query_params.get("summary") == "1"
        if summary:
            NAV.set(None)  # a fragment: no navigation to fill
        try:
            problems = await self.hub(hub_calls.lint)
        except HubError as exc:
            return self.error_page(request, exc)
        if summary:
            return self.page(request, "lint_summary.html", problems=problems, top=problems[:LINT_SUMMARY_ROWS])
        return self.page(request, "lint.html", title="Lint", problems=problems)

    async def health(self, request: Request) -> Response:
        """``/health[?path_prefix=P]``: ``amux memory health``'s findings grouped by code, each document linked
        to its page and its history (where its diffs are), DESIGN.md §23."""
        prefix = request.query_params.get("path_prefix", "")
        try:
            data = await self.hub(hub_calls.health, prefix)
        except HubError as exc:
            if not prefix:
                return self.error_page(request, exc)
            # A prefix that is invalid or names nothing this caller may see (a team it is not in reads the
            # same as none): the way on is the whole report.
            return self.error_page(request, exc, 404 if exc.code is ErrorCode.NOT_FOUND else 400,
                                   retry=("/health", "Show the health of all your memory (no path prefix)"))
        return self.page(request, "health.html", title="Health", path_prefix=prefix, **data)

    async def document(self, request: Request) -> Response:
        path = request.path_params["path"]
        try:
            data = await self.hub(hub_calls.document, path)
        except HubError as exc:
            return self.error_page(request, exc, 404 if exc.code is ErrorCode.INVALID_PATH else 400)
        return self.page(request, "doc.html", title=path, path=path, draft=data["text"] if data["editable"] else "",
                         expected=data["revision"], citations=await self.citations(path, data["text"]),
                         conflict=None, error=None, **data)

    async def citations(self, path: str, text: str) -> dict[str, Any]:
        """The state of each citation in a document, checked against the work tree ``amux ui`` runs in (DESIGN.md
        §24: the Hub never sees one); a check git cannot make is shown as its error, never a failed page."""
        from amux_memory.tools.client.source_health import document_citations

        try:
            return await trio.to_thread.run_sync(document_citations, path, text, os.getcwd())
        except HubError as exc:
            return {"checked": False, "repository": "", "root": "", "rows": [], "error": exc.message}

    async def new(self, request: Request) -> Response:
        path = request.query_params.get("path", "")
        await self.nav_state()
        return self.page(request, "new.html", title="New document", path=path, draft="", error=None)

    async def save(self, request: Request) -> Response:
        async def act(fields: dict[str, str]) -> Response:
            path = fields.get("path", "").strip()
            submitted = fields.get("content", "")
            expected = fields.get("expected_revision", ABSENT)
            stored = fields.get("stored_sha256", "")  # the stored text at expected_revision, as a form sends it
            if expected != ABSENT and stored and hmac.compare_digest(
                    hashlib.sha256(form_text(submitted).encode("utf-8")).hexdigest(), stored):
                # Nothing was edited: no write, no new version (the text may differ from the stored bytes
                # only by what HTML forms do to line breaks).
                return self.see(self.env.filters["docurl"](path) + "?unchanged=1")
            # Forms send CRLF; a document that used CRLF keeps it, any other gets LF.
            content = submitted.replace("\r\n", "\n")
            if fields.get("newline") == "crlf":
                content = content.replace("\n", "\r\n")
            try:
                await self.hub(hub_calls.save, path, content, expected, fields.get("allow_shrink") == "on")
            except HubError as exc:
                return await self.save_failed(request, path, content, expected, exc)
            return self.see(self.env.filters["docurl"](path) + "?saved=1")

        return await self.form_post(request, act)

    async def save_failed(self, request: Request, path: str, content: str, expected: str, exc: HubError) -> Response:
        """The edit page again, the user's text kept; after a conflict, the other version and a diff.

        Answered 200: the page is the answer a person needs (the error is on it), not a failed load.
        """
        if expected == ABSENT and exc.code is not ErrorCode.CONFLICT:
            return self.page(request, "new.html", title="New document", path=path, draft=content, error=exc)
        try:
            data = await self.hub(hub_calls.document, path)
        except HubError:
            data = {"text": "", "shown": "", "cut": False, "editable": True, "max_bytes": 0, "bytes": 0,
                    "revision": ABSENT, "exists": False, "versions": [], "history_next": None}
        conflict = None
        if exc.code is ErrorCode.CONFLICT:
            # The textarea keeps the user's text; saving again now overwrites the version shown.
            changes = hub_calls.text_diff(data["text"], content)
            rows, cut = diff_rows(changes["hunks"])
            conflict = {"theirs": data["shown"], "theirs_cut": data["cut"], "revision": data["revision"],
                        "rows": rows, "rows_cut": cut, **changes}
            expected = data["revision"]
        return self.page(request, "doc.html", title=path, path=path, draft=content, expected=expected,
                         conflict=conflict, error=exc, **data)

    async def forget(self, request: Request) -> Response:
        async def act(fields: dict[str, str]) -> Response:
            path = fields.get("path", "")
            await self.hub(hub_calls.forget, path, fields.get("expected_revision", ""))
            return self.see("/history/" + quote(path, safe="/") + "?forgotten=1")

        return await self.form_post(request, act, refused=409,
                                    check=lambda fields: unconfirmed(fields, f"forget {fields.get('path', '')}"))

    async def history(self, request: Request) -> Response:
        path = request.path_params["path"]
        try:
            data = await self.hub(hub_calls.history, path, request.query_params.get("cursor", ""))
        except HubError as exc:
            return self.error_page(request, exc)
        return self.page(request, "history.html", title=f"History of {path}", path=path, **data)

    async def diff(self, request: Request) -> Response:
        path = request.path_params["path"]
        old = request.query_params.get("from") or None
        new = request.query_params.get("to") or None
        try:
            data = await self.hub(hub_calls.diff, path, old or ABSENT, new)
        except HubError as exc:
            return self.error_page(request, exc)
        rows, cut = diff_rows(data["hunks"])
        return self.page(request, "diff.html", title=f"Diff of {path}", path=path, rows=rows, cut=cut, **data)

    async def restore(self, request: Request) -> Response:
        async def act(fields: dict[str, str]) -> Response:
            path = fields.get("path", "")
            await self.hub(hub_calls.restore, path, fields.get("revision", ""), fields.get("expected_revision", ""))
            return self.see(self.env.filters["docurl"](path) + "?restored=1")

        return await self.form_post(request, act, refused=409)

    async def purge(self, request: Request) -> Response:
        async def act(fields: dict[str, str]) -> Response:
            path = fields.get("path", "")
            revision = fields.get("revision") or None
            await self.hub(hub_calls.purge, path, revision, revision is None)
            return self.see("/history/" + quote(path, safe="/") + "?purged=1")

        return await self.form_post(request, act, check=lambda fields: unconfirmed(fields, "purge"))

    async def log(self, request: Request) -> Response:
        since = request.query_params.get("since") or None
        try:
            if since is not None:
                from amux_memory.tools.client.when import parse_since

                since = parse_since(since)
            data = await self.hub(hub_calls.log_page, since=since, cursor=request.query_params.get("cursor", ""))
        except HubError as exc:
            return self.error_page(request, exc)
        return self.page(request, "log.html", title="Activity", since=request.query_params.get("since", ""), **data)

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        fragment = request.query_params.get("fragment") == "1"
        if fragment:
            NAV.set(None)  # a fragment fetched as the person types: no navigation, no extra Hub call
        result: dict[str, Any] | None = None
        error: HubError | None = None
        if query:
            try:
                result = await self.hub(hub_calls.search, query)
            except HubError as exc:
                error = exc
        name = "search_results.html" if fragment else "search.html"
        return self.page(request, name, title="Search", q=query, keywords=query.split(), result=result, error=error)

    def settings_state(self) -> dict[str, Any]:
        """``{running, writable, config}`` of :attr:`home`: whether a Hub serves it now
        (:func:`tools.client.running.serving_hub`), and whether this user may change its ``config.toml``
        (the file, or the home when there is none yet, is writable: the settings are the Hub's own user's)."""
        from amux_memory.tools.client.running import serving_hub

        assert self.home is not None
        config = self.home / "config.toml"
        writable = os.access(config, os.W_OK) if config.exists() else os.access(self.home, os.W_OK)
        return {"running": serving_hub(self.home) is not None, "writable": writable, "config": config}

    async def settings(self, request: Request) -> Response:
        from amux_memory.protocol.settings import SETTINGS, get_value

        message: str | None = request.query_params.get("restarted") and "The Hub was restarted." or None
        error: HubError | None = None
        if request.method == "POST":
            try:
                fields = await self.form(request)
            except HubError as exc:
                return self.error_page(request, exc, 403)
            if self.home is None:
                return self.error_page(request, HubError(ErrorCode.BAD_REQUEST, "this page talks to a remote Hub "
                                                "(AMUX_HUB): change its settings on its machine"))
            key, value = fields.get("key", ""), fields.get("value", "")
            if not self.home.is_dir():
                return self.error_page(request, HubError(
                    ErrorCode.BAD_REQUEST, f"{self.home} does not exist: no Hub has run with this home, so "
                    "there is no config.toml to change (nothing was written)", {"field": "home"}))
            if not self.settings_state()["writable"]:
                return self.error_page(request, HubError(
                    ErrorCode.PERMISSION_DENIED, f"{self.home / 'config.toml'} is not yours to change: the "
                    "settings belong to the Hub's own user (nothing was written)", {"field": "home"}), 403)
            from amux_memory.hub.access.config import (
                set_value,  # the durable write of config.toml (hub.storage.fsio, DESIGN.md §4.5, §4.8)
            )

            try:
                stored = await trio.to_thread.run_sync(set_value, self.home, key, value)
                if self.settings_state()["running"]:
                    message = f"{key} = {stored!r} saved; it takes effect when the Hub restarts"
                else:
                    message = f"{key} = {stored!r} saved; no Hub runs for this home now, so it applies when one starts"
            except HubError as exc:
                error = exc
        await self.nav_state()
        rows: list[dict[str, Any]] = []
        state: dict[str, Any] = {"running": False, "writable": False, "config": None}
        if self.home is not None:
            state = self.settings_state()
            for key, setting in SETTINGS.items():
                try:
                    value = get_value(self.home, key)
                except HubError as exc:
                    value = f"(invalid: {exc.message})"
                rows.append({"key": key, "value": value, "help": setting.help,
                             "bool": isinstance(setting.default, bool)})
        return self.page(request, "settings.html", title="Settings", rows=rows, home=self.home, message=message,
                         error=error, restart=RESTART_HINT, **state)

    async def restart_hub(self, request: Request) -> Response:
        """``POST /restart``: restart the Hub of :attr:`home` (:func:`tools.ui.restart.restart_hub`), then
        back to the settings page; refused (nothing done) for a remote Hub or another user's home."""
        from amux_memory.tools.ui.restart import restart_hub

        try:
            await self.form(request)
        except HubError as exc:
            return self.error_page(request, exc, 403)
        if self.home is None or not self.home.is_dir() or not self.settings_state()["writable"]:
            return self.error_page(request, HubError(ErrorCode.PERMISSION_DENIED, "only the Hub's own user can "
                                                     "restart it from this page (nothing was done)"), 403)
        try:
            await trio.to_thread.run_sync(restart_hub, self.home)
        except HubError as exc:
            return self.error_page(request, exc, 503)
        return self.see("/settings?restarted=1")

    # -- teams (DESIGN.md §7.8) ---------------------------------------------------------------

    async def teams(self, request: Request) -> Response:
        """``/teams``: the caller's team mounts (from ``hello``), each with its role and review rule."""
        try:
            mounts = await self.hub(lambda client: hub_calls.mounts_of(client.hello))
        except HubError as exc:
            return self.error_page(request, exc, 503 if exc.code is ErrorCode.UNAVAILABLE else 400)
        return self.page(request, "teams.html", title="Teams", teams=mounts)

    async def team(self, request: Request) -> Response:
        """``/team/NAME``: the team's documents (one ``list`` page of ``@NAME/``), its recent changes and, for a
        maintainer, its review queue with Approve and Reject; ``?approved=ID`` / ``?rejected=ID`` after a
        decision.  A team the caller is not in is the Hub's ``not_found``, as for one that does not exist."""
        name = request.path_params["name"]
        try:
            data = await self.hub(hub_calls.team, name, request.query_params.get("cursor", ""))
        except HubError as exc:
            return self.error_page(request, exc, 404 if exc.code in (ErrorCode.NOT_FOUND, ErrorCode.INVALID_PATH)
                                   else 503 if exc.code is ErrorCode.UNAVAILABLE else 400)
        done = {flag: request.query_params.get(flag, "") for flag in ("approved", "rejected")}
        return self.page(request, "team.html", title=f"Team {name}", done=done, **data)

    # -- review (DESIGN.md §21) --------------------------------------------------------------

    async def review(self, request: Request) -> Response:
        """``/review``: every pending proposal, oldest first (path, action, proposer and session, age, +/−
        lines, whether the document changed since the agent read it); ``?approved=ID`` / ``?rejected=ID``
        after a decision."""
        try:
            data = await self.hub(hub_calls.review_list)
        except HubError as exc:
            return self.error_page(request, exc, 503 if exc.code is ErrorCode.UNAVAILABLE else 400)
        done = {flag: request.query_params.get(flag, "") for flag in ("approved", "rejected")}
        return self.page(request, "review.html", title="Review", done=done, **data)

    async def review_show(self, request: Request) -> Response:
        """``/review/ID``: one proposal, its diffs and the Approve, Edit then approve and Reject forms."""
        try:
            data = await self.hub(hub_calls.proposal, request.path_params["id"])
        except HubError as exc:
            return self.error_page(request, exc, 404 if exc.code in (ErrorCode.NOT_FOUND, ErrorCode.BAD_REQUEST)
                                   else 400)
        return self.proposal_page(request, data, draft=data["proposed"] or "", error=None,
                                  already=request.query_params.get("already") == "1")

    def proposal_page(self, request: Request, data: dict[str, Any], *, draft: str, error: HubError | None,
                      conflict: bool = False, already: bool = False) -> HTMLResponse:
        """Render ``proposal.html`` for :func:`tools.ui.hub_calls.proposal`'s ``data``, the editor holding ``draft``;
        with ``conflict``, the version now stored and the diff stored → ``draft`` above it (as the edit page
        shows a conflict, DESIGN.md §20.1)."""
        rows, cut = diff_rows(data["diff"]["hunks"])
        current_rows: list[dict[str, str]] = []
        current_cut = False
        if data["diff_current"] is not None:
            current_rows, current_cut = diff_rows(data["diff_current"]["hunks"])
        from amux_memory.tools.ui.render import SHOWN_MAX_CHARS

        clash = None
        if conflict:
            stored = data["current"] or ""
            changes = hub_calls.text_diff(stored, draft)
            clash_rows, clash_cut = diff_rows(changes["hunks"])
            clash = {"theirs": stored[:SHOWN_MAX_CHARS], "theirs_cut": len(stored) > SHOWN_MAX_CHARS,
                     "exists": data["current"] is not None, "revision": data["expected"], "rows": clash_rows,
                     "rows_cut": clash_cut, **changes}
        entry = data["proposal"]
        return self.page(request, "proposal.html", title=f"Proposal {entry['id']}", p=entry, rows=rows, rows_cut=cut,
                         current_rows=current_rows, current_cut=current_cut, draft=draft, error=error,
                         conflict=clash, already=already, review_conflict_hint=REVIEW_CONFLICT_HINT,
                         shown_max=SHOWN_MAX_CHARS, **data)

    async def review_decide(self, request: Request) -> Response:
        """``POST /review/decide``: ``id``, ``decision`` (``approve`` | ``reject``), ``expected_revision`` (the
        document's revision the page showed), ``reason``; from the editor also ``edited=1``, ``content``,
        ``proposed_sha256``, ``base_revision`` and ``newline``; ``back=team`` from a team's page.  Success: 303
        to ``/review``, or to the team's page for ``back=team`` and a proposal of a team mount (DESIGN.md §7.8).
        A Hub refusal (``conflict`` above all: the document changed, nothing written) shows the proposal page
        again with the error, the version now stored and the text kept in the editor."""
        async def act(fields: dict[str, str]) -> Response:
            pid, decision = fields.get("id", "").strip(), fields.get("decision", "")
            expected = fields.get("expected_revision") or None
            reason = fields.get("reason", "").strip() or None
            draft: str | None = None
            try:
                if decision == "approve" and fields.get("edited") == "1":
                    submitted = fields.get("content", "")
                    draft = submitted.replace("\r\n", "\n")
                    if fields.get("newline") == "crlf":
                        draft = draft.replace("\n", "\r\n")
                    unedited = hmac.compare_digest(hashlib.sha256(form_text(submitted).encode("utf-8")).hexdigest(),
                                                   fields.get("proposed_sha256", ""))
                    result = await self.hub(hub_calls.approve_edited, pid, draft, unedited=unedited,
                                            base_revision=fields.get("base_revision", ""),
                                            expected_revision=expected, reason=reason)
                else:
                    result = await self.hub(hub_calls.review_decide, pid, decision, expected_revision=expected,
                                            reason=reason)
            except HubError as exc:
                return await self.decide_failed(request, pid, exc, draft)
            if result.get("already_decided"):
                return self.see(f"/review/{quote(str(result.get('proposal', pid)), safe='')}?already=1")
            decided = f"{DECIDED_AS[decision]}={quote(str(result.get('proposal', pid)), safe='')}"
            team = team_of(result.get("path", ""))
            if fields.get("back") == "team" and team:  # decided from the team's page: back to its queue
                return self.see(f"/team/{quote(team, safe='')}?{decided}#queue")
            return self.see(f"/review?{decided}")

        return await self.form_post(request, act, check=undecided)

    async def change_set(self, request: Request) -> Response:
        """``/review/session/S``: a change set (every pending proposal of one session, a tidy run's) on one page,
        each document's diff, and Approve all / Reject all (DESIGN.md §21)."""
        try:
            data = await self.hub(hub_calls.change_set_page, request.path_params["session"])
        except HubError as exc:
            return self.error_page(request, exc, 404 if exc.code in (ErrorCode.NOT_FOUND, ErrorCode.BAD_REQUEST)
                                   else 400)
        for item in data["proposals"]:
            item["rows"], item["cut"] = diff_rows(item["diff"]["hunks"])
        return self.page(request, "changeset.html", title="Change set", result=None, **data)

    async def change_set_decide(self, request: Request) -> Response:
        """``POST /review/session``: ``session``, ``decision`` (``approve`` | ``reject``), ``reason``: the whole
        change set at once, each document by compare-and-swap; the answer page lists what was applied and what
        stayed pending as a conflict (:func:`tools.client.changeset.decide_change_set`)."""
        async def act(fields: dict[str, str]) -> Response:
            session, decision = fields.get("session", "").strip(), fields.get("decision", "")
            result = await self.hub(hub_calls.decide_change_set, session, decision,
                                    fields.get("reason", "").strip() or None)
            return self.page(request, "changeset.html", title="Change set", result=result, session=session,
                             proposals=[])

        return await self.form_post(request, act, check=undecided,
                                    refused=lambda exc: 404 if exc.code is ErrorCode.NOT_FOUND else 400)

    async def decide_failed(self, request: Request, pid: str, exc: HubError, draft: str | None) -> Response:
        """The proposal page again after a refused decision (200: the page is the answer), re-read so it shows
        the document as it is now; the editor keeps ``draft`` (the person's text), else the proposed text.
        A proposal that cannot be read any more gets the error page."""
        try:
            data = await self.hub(hub_calls.proposal, pid)
        except HubError:
            return self.error_page(request, exc, 409 if exc.code is ErrorCode.CONFLICT else 400)
        text = draft if draft is not None else data["proposed"] or ""
        return self.proposal_page(request, data, draft=text, error=exc, conflict=exc.code is ErrorCode.CONFLICT)
