"""The page's front door: Host check, start token traded for a cookie, Origin + CSRF on POST, headers.

DESIGN.md §20.2.  :class:`Guard` is plain ASGI middleware around the Starlette
app, applied to every request before any route runs:

1. ``Host`` must be one of :attr:`Guard.hosts` (the bound ``host:port``, and
   ``localhost:PORT`` only when bound to ``127.0.0.1``), else 421: a page
   loaded through a rebound DNS name never reaches the Hub.
2. ``GET /...?token=T`` with the start token, the first time only, creates a
   session and sets its cookie (named :func:`cookie_name` for the port;
   ``HttpOnly``, ``SameSite=Strict``, ``Path=/``, ``Secure`` over TLS) on a
   page that moves on by itself (``<meta http-equiv=refresh>``) to the same
   path (as sent, re-quoted, never ``//host``) without the token, so it leaves
   the address bar.  The
   token is then spent: a second use is 401 with a page saying to use the
   browser it was opened in, or to restart ``amux ui``.
3. Without a session cookie (or with a wrong one), 401 and a page saying to
   open the URL ``amux ui`` printed.  ``/static/`` (our CSS and JS, nothing
   secret) is served without it so that page is styled.
4. Only ``GET``/``HEAD`` (which change nothing) and ``POST`` are allowed.  A
   ``POST`` whose ``Origin`` is present and not the page's own (``null``
   included: the pages send ``Referrer-Policy: same-origin``, so the
   browser sends their forms' real origin) is 403, and so is one whose form
   lacks the session's CSRF token (:meth:`Guard.csrf_for`, an HMAC of the
   session id, checked by the routes with :func:`check_csrf` since the form
   body is theirs to read).

The session id of a signed-in request is put in ``scope[SESSION_KEY]`` for the
routes.  Every answer gets the Content-Security-Policy (:data:`CSP`, no inline
script, nothing from another origin, no framing), ``X-Content-Type-Options:
nosniff``, ``Referrer-Policy: same-origin`` and ``Cache-Control: no-store``.
Secrets are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote_from_bytes

from markupsafe import escape

from amux_memory.protocol.errors import ErrorCode, HubError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE_PREFIX = "amux_ui_"
"""The session cookie's name is this plus the port (:func:`cookie_name`)."""

SESSION_KEY = "amux.session"
"""The ASGI scope key where :class:`Guard` puts a signed-in request's session id."""

CSRF_FIELD = "csrf"
"""The hidden form field holding the CSRF token on every POST form."""

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
"""The Content-Security-Policy of every answer."""

SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
"""Headers added to every answer."""

UNAUTHORIZED_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>amux ui: open the printed link</title>"
    "<link rel=stylesheet href=/static/ui.css></head><body><main><h1>Not signed in</h1>"
    "<p>This page needs the link <code>amux ui</code> printed when it started (it holds a one-time token). "
    "Open that link, or restart <code>amux ui</code> for a new one.</p></main></body></html>"
)
"""The 401 page without a session."""

SPENT_TOKEN_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>amux ui: this link was already used</title>"
    "<link rel=stylesheet href=/static/ui.css></head><body><main><h1>This link was already used</h1>"
    "<p>The link <code>amux ui</code> printed signs in one browser, once. Use the browser it was first "
    "opened in, or restart <code>amux ui</code> for a new link.</p></main></body></html>"
)
"""The 401 page for a start token already traded."""

REDIRECT_SAFE = "/%!$&'()*+,;=:@-._~"
"""Characters kept as they are when the sign-in redirect re-quotes the path and query it was sent."""


def cookie_name(port: int) -> str:
    """The session cookie's name for a page on ``port`` (``amux_ui_8787``): browsers send one host's
    cookies to all its ports, so two pages on one host must not share a name (DESIGN.md §20.2)."""
    return f"{COOKIE_PREFIX}{port}"


def sign_in_location(raw_path: bytes, raw_query: bytes) -> str:
    """Where the page goes after a sign-in: ``raw_path`` as sent (still percent-encoded, so ``%3F``, ``%23``
    and ``%25`` keep their meaning), bytes outside :data:`REDIRECT_SAFE` quoted, leading slashes collapsed
    to one (never ``//host``: another origin), and ``raw_query`` without its ``token`` fields."""
    path = quote_from_bytes(raw_path or b"/", safe=REDIRECT_SAFE)
    path = "/" + path.lstrip("/")
    kept = [part for part in raw_query.split(b"&") if part and part.split(b"=", 1)[0] != b"token"]
    query = quote_from_bytes(b"&".join(kept), safe=REDIRECT_SAFE + "?")
    return path + ("?" + query if query else "")


def loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_names(host: str, port: int) -> frozenset[str]:
    """The ``Host`` header values accepted for a page bound to ``host``:``port``."""
    shown = f"[{host}]" if ":" in host else host
    names = {f"{shown}:{port}"}
    if host in ("127.0.0.1", "::1"):
        names.add(f"localhost:{port}")
    return frozenset(names)


def check_csrf(guard: Guard, scope: Scope, form_value: object) -> None:
    """Raise :class:`HubError` ``unauthorized`` (``data.reason`` ``csrf``) unless ``form_value`` is the CSRF
    token of the request's session (``scope``); the route answers it with a 403 page and changes nothing."""
    expected = guard.csrf_for(str(scope.get(SESSION_KEY, "")))
    if not isinstance(form_value, str) or not hmac.compare_digest(form_value, expected):
        raise HubError(ErrorCode.UNAUTHORIZED, "the form's CSRF token is missing or wrong: reload the page and "
                       "try again (nothing was changed)", {"reason": "csrf"})


class Guard:
    """ASGI middleware enforcing the checks in this module's docstring around ``app``.

    ``token`` is the start token (in the printed URL; spent by its first use),
    ``hosts`` the accepted ``Host`` values, ``origins`` the page's own origins
    (``http://host:port``), ``port`` the bound port (it names the cookie),
    ``tls`` whether the page is served over TLS.  Session ids and the CSRF key
    are random per process; nothing survives a restart.
    """

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str], origins: frozenset[str], port: int,
                 tls: bool = False) -> None:
        self.app = app
        self.token: str | None = token
        self.hosts = hosts
        self.origins = origins
        self.tls = tls
        self.cookie_name = cookie_name(port)
        self.sessions: set[str] = set()
        self._csrf_key = secrets.token_bytes(32)

    def csrf_for(self, session: str) -> str:
        """The CSRF token of ``session``: an HMAC-SHA256 of its id under a per-process key, so one
        session's forms are no use with another's cookie (hex, 64 characters)."""
        return hmac.new(self._csrf_key, session.encode(), hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("host", "") not in self.hosts:
            await self._plain(send, 421, "wrong Host header: open the URL amux ui printed\n")
            return
        method = scope["method"]
        if method not in ("GET", "HEAD", "POST"):
            await self._plain(send, 405, "method not allowed\n")
            return
        path: str = scope["path"]
        raw_query: bytes = scope.get("query_string", b"")
        offered = [v for k, v in parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True) if k == "token"]
        if method == "GET" and offered:
            if self.token is not None and hmac.compare_digest(offered[0], self.token):
                self.token = None  # spent: the link in stdout, a log or a process list is worth nothing now
                fresh = secrets.token_urlsafe(32)
                self.sessions.add(fresh)
                raw_path = scope.get("raw_path") or path.encode("utf-8")
                await self._signed_in_page(send, sign_in_location(raw_path, raw_query), fresh)
            else:
                await self._plain(send, 401, SPENT_TOKEN_PAGE if self.token is None else UNAUTHORIZED_PAGE,
                                  html=True)
            return
        session = self._session(headers.get("cookie", ""))
        if not path.startswith("/static/") and session is None:
            await self._plain(send, 401, UNAUTHORIZED_PAGE, html=True)
            return
        if method == "POST":
            origin = headers.get("origin")
            # Under Referrer-Policy: same-origin the page's own forms carry their real origin, so "null"
            # (a sandboxed frame, a no-referrer page elsewhere) is refused like any foreign origin.
            if origin is not None and origin not in self.origins:
                await self._plain(send, 403, "cross-origin request refused (nothing was changed)\n")
                return
        if session is not None:
            scope[SESSION_KEY] = session
        await self.app(scope, receive, self._with_headers(send))

    def _session(self, cookie_header: str) -> str | None:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie_header)
        except Exception:  # a malformed Cookie header: not signed in
            return None
        morsel = jar.get(self.cookie_name)
        if morsel is None:
            return None
        for session in self.sessions:
            if hmac.compare_digest(morsel.value, session):
                return session
        return None

    @staticmethod
    def _with_headers(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *[(k, v) for k, v in SECURITY_HEADERS if k not in names]]
            await send(message)

        return wrapped

    async def _plain(self, send: Send, status: int, body: str, *, html: bool = False) -> None:
        kind = b"text/html; charset=utf-8" if html else b"text/plain; charset=utf-8"
        data = body.encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(data)).encode()),
                                *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": data})

    async def _signed_in_page(self, send: Send, location: str, session: str) -> None:
        """The answer to a sign-in: the cookie, and a page that moves on to ``location`` by itself.

        Not a 303: a redirect keeps the navigation's first initiator, and when that is the ``file://``
        opener page (:func:`tools.ui.serve.redirect_page`) or another site, Chromium does not send a
        ``SameSite=Strict`` cookie on the redirected request.  A ``<meta http-equiv=refresh>`` of this
        origin starts a same-site navigation, which carries it (no script needed under :data:`CSP`).
        """
        cookie = (f"{self.cookie_name}={session}; HttpOnly; SameSite=Strict; Path=/"
                  + ("; Secure" if self.tls else ""))
        shown = escape(location)
        body = (f'<!doctype html><html lang=en><head><meta charset=utf-8><meta http-equiv=refresh '
                f'content="0;url={shown}"><title>amux ui: signed in</title></head><body><main><p>Signed in. '
                f'<a href="{shown}">Continue</a></p></main></body></html>').encode()
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                   *SECURITY_HEADERS, (b"set-cookie", cookie.encode("ascii"))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
