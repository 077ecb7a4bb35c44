"""Requests, responses and the ``hello`` exchange, as msgpack maps.

* request  ``{"id": int, "method": str, "params": map}``
* response ``{"id": int, "result": map}`` or ``{"id": int|None, "error": {code, message, data}}``

Decoding uses ``raw=False`` and ``strict_map_key=True`` with explicit size
limits, and turns every msgpack failure into :class:`~protocol.errors.HubError`
``bad_request``.  DESIGN.md §3.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from amux_memory.protocol.errors import ErrorCode, HubError, names_for_error
from amux_memory.protocol.framing import encode_frame
from amux_memory.protocol.limits import LIMITS, Limits

PROTOCOL_VERSION: Final = 1

_MAX_ID: Final = 2**63 - 1


def _unpack(body: bytes) -> Any:
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=len(body),
            max_bin_len=len(body),
            max_array_len=4096,
            max_map_len=256,
            max_ext_len=0,
        )
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        # ExtraData, FormatError and StackError all derive from ValueError.
        raise HubError(ErrorCode.BAD_REQUEST, f"frame is not a valid msgpack message: {exc}") from None


def pack(obj: Any) -> bytes:
    """msgpack-encode ``obj`` (str as UTF-8 str type, bytes as bin type)."""
    return msgpack.packb(obj, use_bin_type=True)


@dataclass(frozen=True)
class Request:
    """A decoded request. ``params`` is a map with string keys."""

    id: int
    method: str
    params: dict[str, Any] = field(default_factory=dict)


def decode_request(body: bytes, methods: Collection[str]) -> Request:
    """Decode one request frame body whose method must be one of ``methods`` (the Hub's route table).

    Raises :class:`HubError` ``bad_request`` for bodies that are not msgpack,
    not a map, lack a valid ``id``/``method``, carry non-map ``params`` or name
    a method not in ``methods``.  When the id could be read, ``error.data["id"]`` holds
    it so the caller can address the error response.
    """
    obj = _unpack(body)
    if not isinstance(obj, dict):
        raise HubError(ErrorCode.BAD_REQUEST, "request must be a map with id, method and params")
    rid = obj.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid <= _MAX_ID:
        raise HubError(ErrorCode.BAD_REQUEST, "request id must be a non-negative integer")
    method = obj.get("method")
    params = obj.get("params", {})
    extra = set(obj) - {"id", "method", "params"}
    if extra:
        raise HubError(ErrorCode.BAD_REQUEST, f"unknown request fields: {names_for_error(extra)}", {"id": rid})
    if not isinstance(method, str):
        raise HubError(ErrorCode.BAD_REQUEST, "request method must be a string", {"id": rid})
    if method not in methods:
        raise HubError(
            ErrorCode.BAD_REQUEST,
            f"unknown method {method[:64]!r}; known: {', '.join(sorted(methods))}",
            {"id": rid},
        )
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise HubError(ErrorCode.BAD_REQUEST, "request params must be a map", {"id": rid})
    return Request(rid, method, params)


def encode_request(rid: int, method: str, params: dict[str, Any],
                   max_frame_bytes: int = LIMITS.max_frame_bytes) -> bytes:
    """A complete request frame (length prefix included).

    Raises :class:`~protocol.framing.FrameTooLarge` over ``max_frame_bytes``;
    ``UnicodeEncodeError`` / ``OverflowError`` for text or integers msgpack
    cannot carry (:class:`protocol.connection.ClientConnection` turns those
    into ``bad_request`` first).
    """
    return encode_frame(pack({"id": rid, "method": method, "params": params}), max_frame_bytes)


def encode_result(rid: int, result: dict[str, Any]) -> bytes:
    """A complete success-response frame."""
    return encode_frame(pack({"id": rid, "result": result}))


def encode_error(rid: int | None, error: HubError) -> bytes:
    """A complete error-response frame; ``rid`` is None when the request id was unreadable."""
    return encode_frame(pack({"id": rid, "error": error.to_wire()}))


@dataclass(frozen=True)
class Response:
    """A decoded response: exactly one of ``result`` and ``error`` is set."""

    id: int | None
    result: dict[str, Any] | None = None
    error: HubError | None = None

    def unwrap(self) -> dict[str, Any]:
        """The result, or raise the error."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def decode_response(body: bytes) -> Response:
    """Decode one response frame body; a malformed one raises ``internal``."""
    try:
        obj = _unpack(body)
    except HubError as exc:
        raise HubError(ErrorCode.INTERNAL, f"malformed response from Hub: {exc.message}") from None
    if not isinstance(obj, dict) or ("result" in obj) == ("error" in obj):
        raise HubError(ErrorCode.INTERNAL, "malformed response from Hub")
    rid = obj.get("id")
    if rid is not None and not isinstance(rid, int):
        raise HubError(ErrorCode.INTERNAL, "malformed response id from Hub")
    if "error" in obj:
        return Response(rid, error=HubError.from_wire(obj["error"]))
    result = obj["result"]
    if not isinstance(result, dict):
        raise HubError(ErrorCode.INTERNAL, "malformed result from Hub")
    return Response(rid, result=result)


def encode_mcp(text: str, max_frame_bytes: int = LIMITS.max_frame_bytes) -> bytes:
    """A complete MCP frame: ``{"mcp": text}``, ``text`` being one JSON-RPC message (DESIGN.md §9.2).

    After a successful ``mcp_open`` every frame on the connection, both ways, is one of these.  Raises
    :class:`~protocol.framing.FrameTooLarge` over ``max_frame_bytes`` and ``UnicodeEncodeError`` for text that
    is not valid Unicode (lone surrogates).
    """
    return encode_frame(pack({"mcp": text}), max_frame_bytes)


def decode_mcp(body: bytes) -> str:
    """The JSON-RPC text of one MCP frame body.

    Raises ``bad_request`` for a body that is not msgpack or not a map with exactly one ``mcp`` string (an
    ordinary response or error frame raises it too: :func:`decode_response` reads those).
    """
    obj = _unpack(body)
    if not isinstance(obj, dict) or set(obj) != {"mcp"} or not isinstance(obj["mcp"], str):
        raise HubError(ErrorCode.BAD_REQUEST, 'an MCP frame must be a map {"mcp": <JSON-RPC text>}')
    return obj["mcp"]


def packed_size(obj: Any) -> int:
    """Serialized size in bytes, used to hold store responses to their budget."""
    return len(pack(obj))


# What an answer reserves beside its packed fixed part (:func:`response_room`), in bytes of msgpack.
MSGPACK_STR_HEADER_MAX: Final = 5
"""Bytes of the longest header of a msgpack str or bin (str 32, bin 32: a type byte and a 4-byte length)."""
MSGPACK_INT_MAX: Final = 9
"""Bytes of the longest msgpack integer (uint 64: a type byte and 8 bytes), e.g. a ``next_offset``."""
MSGPACK_ARRAY16_GROWTH: Final = 2
"""Bytes an array's header grows by from fixarray (1 byte, up to 15 items) to array 16 (3 bytes)."""
PAGE_RESERVE_BYTES: Final = 8
"""Bytes a page of entries keeps spare beyond its fixed part packed with an empty list and a sample cursor:
the list's header grows from 1 byte to 3 (array 16) or 5 (array 32), and the rest is slack."""
LIST_RESERVE_BYTES: Final = 128
"""Bytes a ``list`` page keeps for its ``entries`` and ``next_cursor`` keys, the list's header and the cursor
(DESIGN.md §5.8); a cursor (a path) longer than about 100 bytes takes the page that much past the budget."""


def response_room(limits: Limits, fixed: Mapping[str, Any] | None = None, reserve: int = 0) -> int:
    """Bytes of msgpack an answer has left for what it adds to ``fixed`` within the response budget (DESIGN.md §6).

    That is ``limits.response_max_bytes`` (the whole response frame body) less
    ``limits.response_envelope_bytes`` (the ``{id, result}`` around the result), less the packed size of
    ``fixed`` (the answer as it stands without the part still to fill; None counts 0 bytes), less
    ``reserve``: the bytes ``fixed`` does not show yet, made of the sizes above (a content's
    :data:`MSGPACK_STR_HEADER_MAX` and a ``next_offset``'s :data:`MSGPACK_INT_MAX`, or
    :data:`PAGE_RESERVE_BYTES` for a page).  Negative when ``fixed`` alone is over the budget.
    """
    used = 0 if fixed is None else packed_size(fixed)
    return limits.response_max_bytes - limits.response_envelope_bytes - used - reserve
