"""The page's front door: Host check, start token traded for a cookie, Origin + CSRF on POST, headers.

DESIGN.md §20.  :class:`Guard` is plain ASGI middleware around the Starlette
app, applied to every request before any route runs:

1. ``Host`` must be one of :attr:`Guard.hosts` (the bound ``host:port``, and
   ``localhost:PORT`` when bound to ``127.0.0.1``), else 421: a page loaded
   through a rebound DNS name never reaches the Hub.
2. ``GET /...?token=T`` with the start token sets the session cookie
   (``HttpOnly``, ``SameSite=Strict``, ``Path=/``, ``Secure`` over TLS) and
   redirects (303) to the same URL without the token, so it leaves the
   address bar and the history.
3. Without the cookie (or with a wrong one), 401 and a page saying to open
   the URL ``amux ui`` printed.  ``/static/`` (our CSS and JS, nothing
   secret) is served without it so that page is styled.
4. Only ``GET``/``HEAD`` (which change nothing) and ``POST`` are allowed.  A
   ``POST`` whose ``Origin`` is present and not the page's own is 403 (``null``,
   which browsers send for the page's own forms under ``no-referrer``, passes on
   to the token check), and so
   is one whose form lacks the CSRF token (:attr:`Guard.csrf`, checked by the
   routes with :func:`check_csrf` since the form body is theirs to read).

Every answer gets the Content-Security-Policy (:data:`CSP`, no inline script,
nothing from another origin, no framing), ``X-Content-Type-Options:
nosniff``, ``Referrer-Policy: no-referrer`` and ``Cache-Control: no-store``.
Secrets are compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from protocol.errors import ErrorCode, HubError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE_NAME = "amux_ui"
"""The session cookie's name."""

CSRF_FIELD = "csrf"
"""The hidden form field holding the CSRF token on every POST form."""

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
"""The Content-Security-Policy of every answer."""

SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
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


def check_csrf(guard: Guard, form_value: object) -> None:
    """Raise :class:`HubError` ``unauthorized`` (``data.reason`` ``csrf``) unless ``form_value`` is the
    CSRF token; the route answers it with a 403 page and changes nothing."""
    if not isinstance(form_value, str) or not hmac.compare_digest(form_value, guard.csrf):
        raise HubError(ErrorCode.UNAUTHORIZED, "the form's CSRF token is missing or wrong: reload the page and "
                       "try again (nothing was changed)", {"reason": "csrf"})


class Guard:
    """ASGI middleware enforcing the checks in this module's docstring around ``app``.

    ``token`` is the start token (in the printed URL), ``hosts`` the accepted
    ``Host`` values, ``origin`` the page's own origin (``http://host:port``),
    ``tls`` whether the page is served over TLS.  :attr:`cookie` (the session
    secret) and :attr:`csrf` are random per process.
    """

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str], origins: frozenset[str],
                 tls: bool = False) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts
        self.origins = origins
        self.tls = tls
        self.cookie = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)

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
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        offered = [v for k, v in query if k == "token"]
        if method == "GET" and offered:
            if hmac.compare_digest(offered[0], self.token):
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                await self._redirect(send, path + ("?" + rest if rest else ""), set_cookie=True)
            else:
                await self._plain(send, 401, UNAUTHORIZED_PAGE, html=True)
            return
        if not path.startswith("/static/") and not self._signed_in(headers.get("cookie", "")):
            await self._plain(send, 401, UNAUTHORIZED_PAGE, html=True)
            return
        if method == "POST":
            origin = headers.get("origin")
            # "null" is what browsers send for our own forms under Referrer-Policy: no-referrer; the
            # CSRF token and the SameSite=Strict cookie still stand between it and a foreign page.
            if origin is not None and origin != "null" and origin not in self.origins:
                await self._plain(send, 403, "cross-origin request refused (nothing was changed)\n")
                return
        await self.app(scope, receive, self._with_headers(send))

    def _signed_in(self, cookie_header: str) -> bool:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie_header)
        except Exception:  # a malformed Cookie header: not signed in
            return False
        morsel = jar.get(COOKIE_NAME)
        return morsel is not None and hmac.compare_digest(morsel.value, self.cookie)

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

    async def _redirect(self, send: Send, location: str, *, set_cookie: bool) -> None:
        cookie = f"{COOKIE_NAME}={self.cookie}; HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if self.tls else "")
        headers = [(b"location", location.encode("latin-1", "replace")), (b"content-length", b"0"),
                   *SECURITY_HEADERS]
        if set_cookie:
            headers.append((b"set-cookie", cookie.encode("latin-1")))
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
