"""The client side of one Hub connection, sans-I/O (DESIGN.md §3).

Like h11's ``Connection``: the caller owns the socket; this object owns the
protocol state.  It turns a request into the exact bytes to send (allocating
the request id), takes received bytes in, and hands complete responses back,
matched to the requests they answer.  The blocking client
(:mod:`tools.client.blocking`) is a thin I/O loop around it::

    conn = ClientConnection()
    rid, frame = conn.hello_request("amux-cli", binding, token)
    sock.sendall(frame)
    while (response := conn.next_response()) is None:
        conn.receive_data(sock.recv(65536))     # b"" at end of stream
    hello = response.unwrap()                   # or raises the Hub's HubError

Errors, all :class:`~protocol.errors.HubError`:

* :meth:`ClientConnection.send_request` raises ``bad_request`` when the
  params hold text that is not valid Unicode (a lone surrogate, as Python
  makes from non-UTF-8 bytes in ``argv`` or a file name) or an integer
  outside msgpack's 64 bits, and ``frame_too_large`` when the request is over
  the frame limit; in both cases nothing is registered and there is nothing
  to send.
* :meth:`ClientConnection.next_response` raises ``internal`` for a malformed
  response, ``frame_too_large`` for a response frame over the limit (the
  connection cannot be resynchronised), and :class:`ConnectionClosed`
  (``unavailable``) once the Hub closed the stream and no complete response
  is left.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import Response, decode_response, encode_request
from amux_memory.protocol.requests import hello_params

INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
"""The integers msgpack can carry (``int 64`` to ``uint 64``)."""


class ConnectionClosed(HubError):
    """The Hub closed the stream (end of file) with no complete response left: ``unavailable``.

    ``mid_frame`` is true when the stream ended inside a response frame.
    """

    def __init__(self, *, mid_frame: bool = False) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, "the Hub closed the connection")
        self.mid_frame = mid_frame


def _fields(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """Every leaf of a params map as ``(dotted field name, value)``; map keys count as leaves too.

    Names are printable UTF-8 whatever the keys hold (a lone surrogate becomes ``\\udcff``).
    """
    if isinstance(value, dict):
        for key, item in value.items():
            label = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
            child = f"{name}.{label}" if name else label
            yield child, key
            yield from _fields(item, child)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _fields(item, f"{name}[{index}]")
    else:
        yield name, value


def unencodable(method: str, params: dict[str, Any]) -> HubError | None:
    """The ``bad_request`` error for params msgpack cannot carry, or ``None`` when they can.

    Text must be valid Unicode (no lone surrogates: the UTF-8 encoder refuses
    them) and integers must fit in 64 bits.  ``data`` names the ``method``
    and the ``field`` (dotted for nested maps).  The message never repeats the
    offending value: it may be a secret or unprintable.
    """
    for name, value in _fields(params, ""):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return HubError(ErrorCode.BAD_REQUEST,
                                f"the {method} request's {name or 'params'} is not valid UTF-8 text (a lone "
                                f"surrogate at character {exc.start}, as from non-UTF-8 bytes in an argument "
                                "or file name)", {"method": method, "field": name, "character": exc.start})
        elif isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
            return HubError(ErrorCode.BAD_REQUEST,
                            f"the {method} request's {name or 'params'} is out of range (an integer must fit "
                            "in 64 bits)", {"method": method, "field": name})
    return None


class ClientConnection:
    """Protocol state of one client connection: request ids, outstanding requests, received bytes.

    Ids count up from ``first_id`` (default 1).  A request stays
    *outstanding* from :meth:`send_request` until its response is returned by
    :meth:`next_response` or it is :meth:`abandon`-ed.  A response whose id
    is not outstanding (the late answer to an abandoned request) is skipped.
    A response with id ``None`` is an error the Hub could not address (it
    could not read a request id, or it refused the connection as ``busy``): it
    answers the oldest outstanding request.  ``max_frame_bytes`` bounds both
    directions (default ``LIMITS.max_frame_bytes``, 1 MiB).

    Not thread-safe and not reentrant; one per connection.  A new connection
    (a reconnect) needs a new :class:`ClientConnection`.
    """

    def __init__(self, *, max_frame_bytes: int = LIMITS.max_frame_bytes, first_id: int = 1) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.hello: dict[str, Any] | None = None
        """The Hub's ``hello`` result once it has been received (principal, scope, binding, limits, ...)."""
        self._ids = itertools.count(first_id)
        self._decoder = FrameDecoder(max_frame_bytes)
        self._outstanding: dict[int, str] = {}  # request id -> method, in the order sent
        self._eof = False

    @property
    def outstanding(self) -> tuple[int, ...]:
        """Ids of the requests sent and not yet answered (nor abandoned), oldest first."""
        return tuple(self._outstanding)

    @property
    def closed(self) -> bool:
        """True once end of stream was received (:meth:`receive_data` with ``b""``)."""
        return self._eof

    def send_request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        """Allocate an id for ``method``/``params``; returns ``(request_id, frame_bytes)`` to send as they are.

        Raises ``bad_request`` for params msgpack cannot carry (see
        :func:`unencodable`), ``frame_too_large`` (``data.current`` /
        ``data.maximum`` in bytes) for a request over ``max_frame_bytes``, and
        :class:`ConnectionClosed` after end of stream.  On any error no id is
        used and nothing is outstanding.
        """
        if self._eof:
            raise ConnectionClosed()
        error = unencodable(method, params)
        if error is not None:
            raise error
        rid = next(self._ids)
        frame = encode_request(rid, method, params, self.max_frame_bytes)
        self._outstanding[rid] = method
        return rid, frame

    def hello_request(self, client_name: str, binding: str | None = None, token: str | None = None,
                      *, session: str | None = None) -> tuple[int, bytes]:
        """The ``hello`` request (:func:`protocol.requests.hello_params`); its result is kept in :attr:`hello`.

        ``binding``, ``token`` and ``session`` are left out when empty
        (DESIGN.md §7, §10).  Raises like :meth:`send_request`.
        """
        return self.send_request("hello", hello_params(client_name, binding, token, session=session))

    def abandon(self, request_id: int) -> None:
        """Stop waiting for ``request_id`` (after a timeout): its late response will be skipped."""
        self._outstanding.pop(request_id, None)

    def receive_data(self, data: bytes) -> None:
        """Feed bytes received from the Hub; ``b""`` means the Hub closed the stream.

        Raises ``frame_too_large`` when a response header announces more than
        ``max_frame_bytes`` (the connection is then unusable).
        """
        if not data:
            self._eof = True
            return
        self._decoder.feed(data)

    def next_response(self) -> Response | None:
        """The next response to an outstanding request, or ``None`` when more bytes are needed.

        Skips responses to requests that are not outstanding.  Raises
        ``internal`` for a malformed response, ``frame_too_large`` for an
        oversized one, and :class:`ConnectionClosed` when the stream has ended
        and no complete response is left.
        """
        while True:
            body = self._decoder.next_frame()
            if body is None:
                if self._eof:
                    raise ConnectionClosed(mid_frame=self._decoder.in_frame)
                return None
            response = decode_response(body)
            if response.id is None:
                if self._outstanding:
                    self._finish(next(iter(self._outstanding)), response)
                return response
            if response.id in self._outstanding:
                self._finish(response.id, response)
                return response

    def _finish(self, rid: int, response: Response) -> None:
        method = self._outstanding.pop(rid)
        if method == "hello" and response.result is not None:
            self.hello = response.result
