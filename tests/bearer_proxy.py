"""A loopback HTTP proxy that adds ``Authorization: Bearer TOKEN``, for MCP clients that send no header.

The MCP conformance suite (``@modelcontextprotocol/conformance``) talks to
a URL and sends no ``Authorization`` header; the Hub's ``/mcp`` answers 401
to any request without a token (DESIGN.md §7).  Rather than give the Hub a
test-only mode that skips authentication, the test puts this proxy in
front: it forwards every request unchanged except that

- it adds the bearer token when the request carries no ``Authorization``;
- a ``Host`` naming the proxy itself becomes the Hub's listener
  (``127.0.0.1:HUBPORT``) and an ``Origin`` of ``http://<proxy>`` the Hub's
  own origin, as a reverse proxy does (``header_up Host {upstream_hostport}``
  in docs/remote.md); any other ``Host`` or ``Origin`` passes through
  untouched, so the Hub's DNS-rebinding check still sees a foreign one.

Responses are streamed back as they arrive (server-sent events), one
request per connection (``Connection: close``).  Only loopback: the proxy
listens on ``127.0.0.1`` and forwards to ``127.0.0.1``.  Every request's
method, path and status is kept in :attr:`BearerProxy.log`.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailers", "transfer-encoding", "upgrade", "content-length"})
"""Headers that describe one hop; the proxy sets its own ``Content-Length`` / chunking."""


@dataclass
class BearerProxy:
    """The running proxy: ``url`` (``http://127.0.0.1:PORT/mcp``), the upstream port, the request log.

    Use as a context manager; :meth:`close` stops the server thread.
    """

    upstream_port: int
    token: str
    log: list[tuple[str, str, int]] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None
    upstreams: set[http.client.HTTPConnection] = field(default_factory=set)
    """Connections to the Hub in use (a long-lived event stream among them), cut by :meth:`close`."""

    @property
    def port(self) -> int:
        """The proxy's own port (the kernel picked a free one)."""
        assert self.server is not None
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        """The MCP URL to hand the client: the proxy's ``/mcp``."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> BearerProxy:
        """Listen on a free loopback port and serve in a daemon thread."""
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                return

            def _forward(self) -> None:
                own = f"127.0.0.1:{proxy.port}"
                hub = f"127.0.0.1:{proxy.upstream_port}"
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers: dict[str, str] = {}
                for name, value in self.headers.items():
                    low = name.lower()
                    if low in HOP_BY_HOP:
                        continue
                    if low == "host" and value.lower() in (own, f"localhost:{proxy.port}"):
                        value = hub
                    elif low == "origin" and value.lower() in (f"http://{own}", f"http://localhost:{proxy.port}"):
                        value = f"http://{hub}"
                    headers[name] = value
                if not any(k.lower() == "authorization" for k in headers):
                    headers["Authorization"] = f"Bearer {proxy.token}"
                # http.client would add its own Host: pass the (possibly foreign) one through instead.
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                proxy.upstreams.add(conn)
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers.items():
                    conn.putheader(name, value)
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                resp = conn.getresponse()
                proxy.log.append((self.command, self.path, resp.status))
                self.send_response_only(resp.status, resp.reason)
                for name, value in resp.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Connection", "close")
                self.close_connection = True
                try:
                    self._relay(resp)
                except (OSError, http.client.HTTPException):
                    pass  # either side went away mid-stream: end both (the client sees a cut stream, as without us)
                finally:
                    proxy.upstreams.discard(conn)
                    conn.close()

            def _relay(self, resp: http.client.HTTPResponse) -> None:
                declared = resp.getheader("Content-Length")
                if resp.status in (204, 304):
                    self.end_headers()
                elif declared is not None:
                    data = resp.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while chunk := resp.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = do_DELETE = _forward  # noqa: N815 - the stdlib's dispatch names

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="bearer-proxy", daemon=True).start()
        return self

    def close(self) -> None:
        """Stop serving, close the listening socket and cut the connections to the Hub still open (the
        suite leaves its event streams open; the Hub would otherwise wait for them when it stops)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        for conn in list(self.upstreams):
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> BearerProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
