"""Sans-I/O tests of ``protocol/``: frames, request/response decoding, error codes, params.

No Hub, no sockets: everything here runs on bytes in memory.  The last part is
three Hypothesis properties that together generate about 100,000 inputs per
run: the frame decoder, the request decoder and the parameter parsers must
never fail with anything but their documented errors.
"""

from __future__ import annotations

import os
import struct
import tracemalloc
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amux_memory.hub.methods.routes import ROUTES
from amux_memory.protocol import params as P
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.protocol.framing import HEADER_BYTES, FrameDecoder, FrameTooLarge, encode_frame
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import (
    MSGPACK_ARRAY16_GROWTH,
    MSGPACK_INT_MAX,
    MSGPACK_STR_HEADER_MAX,
    Request,
    Response,
    decode_request,
    decode_response,
    encode_error,
    encode_request,
    encode_result,
    pack,
    response_room,
)
from amux_memory.protocol.paths import normalize_path

MAX = LIMITS.max_frame_bytes

METHODS = frozenset(ROUTES)
"""The Hub's method names (its route table): what a request may name."""


def drain(decoder: FrameDecoder) -> list[bytes]:
    """Every complete frame the decoder holds right now."""
    out: list[bytes] = []
    while (body := decoder.next_frame()) is not None:
        out.append(body)
    return out


def body_of(frame: bytes) -> bytes:
    """The single frame body inside a complete encoded frame (checked)."""
    d = FrameDecoder()
    d.feed(frame)
    frames = drain(d)
    assert len(frames) == 1 and d.buffered == 0 and not d.in_frame
    return frames[0]


def bad_request(body: bytes) -> HubError:
    with pytest.raises(HubError) as info:
        decode_request(body, METHODS)
    assert info.value.code is ErrorCode.BAD_REQUEST, info.value
    return info.value


# ---------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------

BODIES = [b"hello", b"", bytes(range(256)), b"\x00\x00\x00\x00", b"x" * 70_000]
STREAM = b"".join(encode_frame(b) for b in BODIES)


def test_encode_frame_is_big_endian_length_prefix() -> None:
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"y" * 0x10203)[:4] == b"\x00\x01\x02\x03"
    assert HEADER_BYTES == 4


@pytest.mark.parametrize("body", BODIES, ids=lambda b: f"{len(b)}B")
def test_encode_frame_round_trip(body: bytes) -> None:
    assert body_of(encode_frame(body)) == body


def test_frames_split_at_every_byte_boundary() -> None:
    small = b"".join(encode_frame(b) for b in BODIES[:4])
    for cut in range(len(small) + 1):
        d = FrameDecoder()
        d.feed(small[:cut])
        got = drain(d)
        d.feed(small[cut:])
        got += drain(d)
        assert got == BODIES[:4], cut
        assert d.buffered == 0 and not d.in_frame


def test_frames_split_at_every_pair_of_boundaries() -> None:
    small = encode_frame(b"ab") + encode_frame(b"") + encode_frame(b"cde")
    for i in range(len(small) + 1):
        for j in range(i, len(small) + 1):
            d = FrameDecoder()
            got: list[bytes] = []
            for part in (small[:i], small[i:j], small[j:]):
                d.feed(part)
                got += drain(d)
            assert got == [b"ab", b"", b"cde"], (i, j)


def test_frames_fed_one_byte_at_a_time() -> None:
    d = FrameDecoder()
    got: list[bytes] = []
    ends = _frame_ends()
    for k in range(len(STREAM)):
        d.feed(STREAM[k : k + 1])
        got += drain(d)
        assert d.in_frame == (k + 1 not in ends), k
    assert got == BODIES
    assert not d.in_frame


def _frame_ends() -> set[int]:
    ends, pos = set(), 0
    for b in BODIES:
        pos += HEADER_BYTES + len(b)
        ends.add(pos)
    return ends


def test_several_frames_in_one_feed() -> None:
    d = FrameDecoder()
    d.feed(STREAM)
    assert drain(d) == BODIES
    assert d.next_frame() is None
    assert d.buffered == 0 and not d.in_frame


def test_zero_length_body_is_a_frame_not_none() -> None:
    d = FrameDecoder()
    d.feed(b"\x00\x00\x00")
    assert d.next_frame() is None and d.in_frame
    d.feed(b"\x00")
    assert d.next_frame() == b""
    assert d.next_frame() is None and not d.in_frame


def test_partial_body_waits_for_more() -> None:
    d = FrameDecoder()
    d.feed(encode_frame(b"0123456789")[:9])
    assert d.next_frame() is None
    assert d.in_frame and d.buffered == 5
    d.feed(b"56789")
    assert d.next_frame() == b"0123456789"


def test_exactly_max_size_frame_is_accepted() -> None:
    body = bytes(range(256)) * (MAX // 256)
    assert len(body) == MAX
    frame = encode_frame(body)
    d = FrameDecoder()
    d.feed(frame[: HEADER_BYTES])
    assert d.next_frame() is None
    d.feed(frame[HEADER_BYTES:])
    assert d.next_frame() == body


def test_max_plus_one_rejected_on_the_header_alone() -> None:
    d = FrameDecoder()
    d.feed(b"\x00\x10")  # half a header: nothing to judge yet
    d.feed(b"\x00")
    with pytest.raises(FrameTooLarge) as info:
        d.feed(b"\x01")  # the fourth header byte: 0x00100001 == MAX + 1
    err = info.value
    assert isinstance(err, HubError) and err.code is ErrorCode.FRAME_TOO_LARGE
    assert err.data == {"current": MAX + 1, "maximum": MAX, "unit": "bytes"}
    assert d.buffered == 0


def test_custom_maximum() -> None:
    d = FrameDecoder(max_frame_bytes=3)
    d.feed(encode_frame(b"abc"))
    assert d.next_frame() == b"abc"
    with pytest.raises(FrameTooLarge):
        d.feed(struct.pack(">I", 4))
    assert encode_frame(b"abc", 3) == b"\x00\x00\x00\x03abc"
    with pytest.raises(FrameTooLarge):
        encode_frame(b"abcd", 3)


def test_encode_frame_rejects_over_max() -> None:
    assert len(encode_frame(b"z" * MAX)) == MAX + 4
    with pytest.raises(FrameTooLarge) as info:
        encode_frame(b"z" * (MAX + 1))
    assert info.value.data["current"] == MAX + 1


def test_4gib_prefix_rejected_without_allocating() -> None:
    d = FrameDecoder()
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge) as info:
            d.feed(b"\xff\xff\xff\xff")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.data["current"] == 2**32 - 1
    assert d.buffered <= HEADER_BYTES
    assert peak < 64 * 1024, peak


def test_4gib_prefix_with_body_bytes_in_the_same_feed() -> None:
    d = FrameDecoder()
    with pytest.raises(FrameTooLarge):
        d.feed(b"\xff\xff\xff\xff" + b"A" * 10_000)
    assert d.buffered == 0


def test_decoder_is_poisoned_after_an_oversized_header() -> None:
    d = FrameDecoder()
    with pytest.raises(FrameTooLarge):
        d.feed(b"\x7f\xff\xff\xff")
    for _ in range(3):
        with pytest.raises(FrameTooLarge):
            d.next_frame()
        with pytest.raises(FrameTooLarge):
            d.feed(encode_frame(b"fine"))
        with pytest.raises(FrameTooLarge):
            d.feed(b"")
    assert d.buffered == 0


def test_complete_frames_before_an_oversized_header_are_delivered() -> None:
    # A client pipelines a good request and then (in the same packet) a huge
    # one: the good one is complete and must not be thrown away.
    d = FrameDecoder(max_frame_bytes=16)
    d.feed(encode_frame(b"first") + encode_frame(b"second") + b"\xff\xff\xff\xff")
    assert d.next_frame() == b"first"
    assert d.next_frame() == b"second"
    with pytest.raises(FrameTooLarge):
        d.next_frame()
    with pytest.raises(FrameTooLarge):
        d.next_frame()


def test_oversized_header_arriving_after_a_pulled_frame() -> None:
    d = FrameDecoder(max_frame_bytes=16)
    d.feed(encode_frame(b"ok") + b"\x00\x00")
    assert d.next_frame() == b"ok"
    with pytest.raises(FrameTooLarge):
        d.feed(b"\x01\x00")


# ---------------------------------------------------------------------------
# decode_request
# ---------------------------------------------------------------------------


def req(obj: Any) -> bytes:
    return pack(obj)


def test_decode_request_happy_path() -> None:
    r = decode_request(req({"id": 7, "method": "search", "params": {"query": "x"}}), METHODS)
    assert r == Request(7, "search", {"query": "x"})
    assert decode_request(req({"id": 0, "method": "hello"}), METHODS) == Request(0, "hello", {})
    assert decode_request(req({"id": 1, "method": "get", "params": None}), METHODS).params == {}
    assert decode_request(req({"id": 2**63 - 1, "method": "export", "params": {}}), METHODS).id == 2**63 - 1


def test_encode_request_round_trip() -> None:
    for method in sorted(METHODS):
        frame = encode_request(42, method, {"path": "a.md", "n": [1, 2], "b": b"\x00"})
        expected = Request(42, method, {"path": "a.md", "n": [1, 2], "b": b"\x00"})
        assert decode_request(body_of(frame), METHODS) == expected
    with pytest.raises(FrameTooLarge):
        encode_request(1, "upsert", {"content": "x" * MAX})


@pytest.mark.parametrize("body", [
    b"", b"\xc1", b"not msgpack at all", b"\xff" * 10, b"\x92\x01",  # truncated array
    b"\x81\xa2id", b"\xdf\x00\x00",  # truncated map / map32 header
], ids=repr)
def test_decode_request_rejects_non_msgpack(body: bytes) -> None:
    err = bad_request(body)
    assert "id" not in err.data


def test_decode_request_rejects_trailing_data() -> None:
    bad_request(req({"id": 1, "method": "get"}) + b"\x00")
    bad_request(req({"id": 1, "method": "get"}) * 2)


@pytest.mark.parametrize("obj", [None, 1, -1, 1.5, True, "id", b"id", [], [1, "get", {}], msgpack.ExtType(1, b"")],
                         ids=repr)
def test_decode_request_rejects_non_maps(obj: Any) -> None:
    err = bad_request(req(obj))
    assert "map" in err.message or "msgpack" in err.message


@pytest.mark.parametrize("rid", [None, -1, -(2**63), 2**63, 2**64 - 1, True, False, 1.0, 0.0, "1", b"1", [1], {"a": 1}],
                         ids=repr)
def test_decode_request_rejects_bad_ids(rid: Any) -> None:
    err = bad_request(req({"id": rid, "method": "get", "params": {}}))
    assert "id" in err.message
    assert "id" not in err.data  # no usable id to address the answer with


def test_decode_request_rejects_missing_id() -> None:
    err = bad_request(req({"method": "get", "params": {}}))
    assert "id" not in err.data


@pytest.mark.parametrize("method", [None, 1, True, b"get", ["get"], {"m": 1}], ids=repr)
def test_decode_request_rejects_non_string_method(method: Any) -> None:
    err = bad_request(req({"id": 5, "method": method, "params": {}}))
    assert err.data == {"id": 5}


def test_decode_request_rejects_missing_method() -> None:
    assert bad_request(req({"id": 5})).data == {"id": 5}


@pytest.mark.parametrize("method", ["", "GET", "Search", "delete", "hello ", "x" * 10_000, "\u0000", "get\u200b"])
def test_decode_request_unknown_method_carries_id(method: str) -> None:
    err = bad_request(req({"id": 99, "method": method, "params": {}}))
    assert err.data == {"id": 99}
    assert "unknown method" in err.message
    assert len(err.message) < 400  # a huge method name is not echoed back whole


@pytest.mark.parametrize("params", [[], [1, 2], "query", b"x", 0, True, 1.5], ids=repr)
def test_decode_request_rejects_non_map_params(params: Any) -> None:
    err = bad_request(req({"id": 3, "method": "search", "params": params}))
    assert err.data == {"id": 3}


@pytest.mark.parametrize("extra", [{"jsonrpc": "2.0"}, {"Id": 1}, {"result": {}}, {b"id": 1}], ids=repr)
def test_decode_request_rejects_unknown_top_level_fields(extra: dict[Any, Any]) -> None:
    err = bad_request(req({"id": 4, "method": "get", "params": {}, **extra}))
    assert err.data == {"id": 4}
    assert "unknown request fields" in err.message


@pytest.mark.parametrize("obj", [
    {1: "x"},
    {"id": 1, "method": "get", "params": {1: "x"}},
    {"id": 1, "method": "get", "params": {"path": {2.5: 1}}},
    {"id": 1, "method": "get", "params": {"path": [{None: 1}]}},
], ids=repr)
def test_decode_request_rejects_non_string_map_keys(obj: Any) -> None:
    err = bad_request(msgpack.packb(obj, use_bin_type=True))
    assert "strict_map_key" in err.message or "map key" in err.message


def test_decode_request_rejects_unhashable_map_keys() -> None:
    # A map key that is itself a map or an array: never a TypeError from dict().
    body = b"\x81" + b"\x91\x01" + b"\x01"  # {[1]: 1}
    bad_request(body)
    body = b"\x81" + b"\x81\xa1a\x01" + b"\x01"  # {{"a": 1}: 1}
    bad_request(body)


@pytest.mark.parametrize("raw_str", [
    b"\xa1\xff", b"\xa2\xc3\x28", b"\xa3\xed\xa0\x80",  # lone, truncated, encoded surrogate
    b"\xa4\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xa2\xc0\x80",  # overlong NUL
], ids=repr)
@pytest.mark.parametrize("where", ["method", "key", "param"])
def test_decode_request_rejects_invalid_utf8(raw_str: bytes, where: str) -> None:
    id_pair = b"\xa2id\x01"
    if where == "method":
        body = b"\x82" + id_pair + b"\xa6method" + raw_str
    elif where == "key":
        body = b"\x82" + id_pair + raw_str + b"\x01"
    else:
        body = b"\x83" + id_pair + b"\xa6method\xa3get" + b"\xa6params\x81\xa4path" + raw_str
    err = bad_request(body)
    assert "utf-8" in err.message.lower()


@pytest.mark.parametrize("depth", [1_000, 5_000, 100_000])
@pytest.mark.parametrize("opener", [b"\x91", b"\x81\xa1k"], ids=["arrays", "maps"])
def test_decode_request_deep_nesting_is_bad_request_not_a_crash(depth: int, opener: bytes) -> None:
    nested = opener * depth + b"\xc0"
    bad_request(nested)
    # The same depth inside the params of an otherwise valid request.
    prefix = b"\x83\xa2id\x01\xa6method\xa3get\xa6params\x81\xa4path"
    try:
        r = decode_request(prefix + nested, METHODS)
    except HubError as exc:
        assert exc.code is ErrorCode.BAD_REQUEST
    else:  # shallow enough for msgpack: decoded faithfully, validation is params' job
        assert depth <= 1_000 and r.method == "get"


@pytest.mark.parametrize("header", [
    b"\xdd\xff\xff\xff\xff",  # array32 of 4 Gi items
    b"\xdf\xff\xff\xff\xff",  # map32 of 4 Gi pairs
    b"\xdb\xff\xff\xff\xff",  # str32 of 4 GiB
    b"\xc6\xff\xff\xff\xff",  # bin32 of 4 GiB
    b"\xc9\xff\xff\xff\xff\x01",  # ext32 of 4 GiB
    b"\xdc\xff\xff",  # array16 of 65535 items
    b"\xde\xff\xff",  # map16 of 65535 pairs
    b"\xdc\x10\x00",  # array16 of 4096 items (at the array limit, but only 3 bytes)
    b"\xda\x01\x00",  # str16 of 256 bytes in a 3-byte body
], ids=lambda h: h.hex())
def test_decode_request_huge_declared_lengths_in_a_tiny_body(header: bytes) -> None:
    tracemalloc.start()
    try:
        bad_request(header)
        # Nested where a param value would be.
        bad_request(b"\x83\xa2id\x01\xa6method\xa3get\xa6params\x81\xa4path" + header)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, peak


def test_decode_request_rejects_ext_types() -> None:
    ts = msgpack.packb({"id": 1, "method": "get", "params": {"t": msgpack.Timestamp(1)}}, use_bin_type=True)
    bad_request(ts)


# ---------------------------------------------------------------------------
# Responses and errors
# ---------------------------------------------------------------------------


def test_result_response_round_trip() -> None:
    result = {"matches": [{"path": "a.md", "line": 3}], "incomplete": False, "raw": b"\x00\xff"}
    resp = decode_response(body_of(encode_result(12, result)))
    assert resp == Response(12, result=result)
    assert resp.unwrap() == result


@pytest.mark.parametrize("rid", [0, 12, 2**63 - 1, None])
@pytest.mark.parametrize("code", list(ErrorCode))
def test_error_response_round_trip(code: ErrorCode, rid: int | None) -> None:
    err = HubError(code, f"it went wrong: {code}", {"observed_revision": "a" * 64, "n": [1, 2]})
    resp = decode_response(body_of(encode_error(rid, err)))
    assert resp.id == rid and resp.result is None and resp.error is not None
    got = resp.error
    assert (got.code, got.message, got.data) == (err.code, err.message, err.data)
    with pytest.raises(HubError) as info:
        resp.unwrap()
    assert info.value is got


def test_the_budget_header_sizes_are_what_msgpack_writes() -> None:
    """The sizes :func:`response_room`'s callers reserve are msgpack's own (DESIGN.md §6): the longest str
    and bin headers, the longest integer, and an array's header growing past 15 items."""
    big = 1 << 16
    assert len(pack("x" * big)) - big == len(pack(b"x" * big)) - big == MSGPACK_STR_HEADER_MAX
    assert len(pack(2**64 - 1)) == len(pack(-(2**63))) == MSGPACK_INT_MAX
    assert len(pack([0] * 16)) - 16 - len(pack([])) == MSGPACK_ARRAY16_GROWTH
    assert response_room(LIMITS) == LIMITS.response_max_bytes - LIMITS.response_envelope_bytes
    fixed = {"path": "a.md", "content": b""}
    assert response_room(LIMITS, fixed, 14) == response_room(LIMITS) - len(pack(fixed)) - 14


def test_frame_too_large_round_trips_as_hub_error() -> None:
    err = FrameTooLarge(2**32 - 1, MAX)
    back = decode_response(body_of(encode_error(None, err))).error
    assert back is not None and back.code is ErrorCode.FRAME_TOO_LARGE
    assert back.data == {"current": 2**32 - 1, "maximum": MAX, "unit": "bytes"}


def test_hub_error_wire_round_trip() -> None:
    for code in ErrorCode:
        e = HubError(code, "msg", {"k": 1})
        assert e.to_wire() == {"code": code.value, "message": "msg", "data": {"k": 1}}
        back = HubError.from_wire(e.to_wire())
        assert (back.code, back.message, back.data) == (code, "msg", {"k": 1})
        assert back.exit_code == EXIT_CODES[code]
    assert HubError(ErrorCode.CONFLICT, "m").data == {}


@pytest.mark.parametrize("wire,code,message", [
    ("nonsense", ErrorCode.INTERNAL, None),
    (None, ErrorCode.INTERNAL, None),
    ([1, 2], ErrorCode.INTERNAL, None),
    ({"code": "no_such_code", "message": "m"}, ErrorCode.INTERNAL, "m"),
    ({"code": "conflict", "message": 5}, ErrorCode.CONFLICT, "conflict"),
    ({"code": "busy"}, ErrorCode.BUSY, "busy"),
    ({"code": 7, "message": "m", "data": [1]}, ErrorCode.INTERNAL, "m"),
    ({}, ErrorCode.INTERNAL, "None"),
], ids=repr)
def test_hub_error_from_malformed_wire(wire: Any, code: ErrorCode, message: str | None) -> None:
    e = HubError.from_wire(wire)
    assert e.code is code
    assert isinstance(e.message, str) and isinstance(e.data, dict)
    if message is not None:
        assert e.message == message
    if not isinstance(wire, dict) or not isinstance(wire.get("data"), dict):
        assert e.data == {}


@pytest.mark.parametrize("body", [
    b"\xc1",
    pack([1, 2]),
    pack({"id": 1}),
    pack({"id": 1, "result": {}, "error": {"code": "busy"}}),
    pack({"id": "1", "result": {}}),
    pack({"id": 1.5, "result": {}}),
    pack({"id": 1, "result": [1]}),
    pack({"id": 1, "result": None}),
], ids=repr)
def test_decode_response_malformed_is_internal(body: bytes) -> None:
    with pytest.raises(HubError) as info:
        decode_response(body)
    assert info.value.code is ErrorCode.INTERNAL


def test_every_error_code_has_a_distinct_exit_code() -> None:
    assert set(EXIT_CODES) == set(ErrorCode)
    values = [EXIT_CODES[c] for c in ErrorCode]
    assert len(set(values)) == len(values)
    assert all(isinstance(v, int) and 1 <= v <= 125 for v in values)  # 0 is success; >125 is the shell's
    assert EXIT_CODES[ErrorCode.INTERNAL] == 1 and EXIT_CODES[ErrorCode.BAD_REQUEST] == 2
    for c in ErrorCode:
        assert HubError(c, "x").exit_code == EXIT_CODES[c]


# ---------------------------------------------------------------------------
# Properties (Hypothesis).
#
# Hypothesis costs roughly 1-5 ms per example (drawing, not checking, is the
# cost), so each example carries a fixed-size batch of independently generated
# inputs, and each input is also checked in ways that need no further drawing
# (a stream fed one byte at a time, every prefix of an encoded request):
#   frames     400 examples x 6 streams                 =  2,400 (x 2 feeds)
#   requests   800 examples x 10 byte strings           =  8,000
#              500 examples x (1 object + 3 mutations)  =  2,000 (+ every prefix)
#   params     600 examples x 3 param maps              =  1,800
# in all 14,200 drawn inputs at scale 1, which the suite runs (the four took
# 16 s of CPU on a loaded 2-core machine; the earlier 31,500 inputs took 37 s);
# AMUX_FUZZ_SCALE=70 is the longer documented run (~1 million inputs),
# AMUX_FUZZ_SCALE=7 the size earlier suites ran (~100,000).
# ---------------------------------------------------------------------------

FUZZ_SCALE = float(os.environ.get("AMUX_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    """Hypothesis examples for a property, scaled by AMUX_FUZZ_SCALE."""
    return max(1, int(n * FUZZ_SCALE))


FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def reference_frames(data: bytes, maximum: int) -> tuple[list[bytes], bool, int]:
    """What a correct decoder yields for ``data``: frames, oversized?, bytes left over."""
    frames: list[bytes] = []
    i = 0
    while len(data) - i >= HEADER_BYTES:
        (n,) = struct.unpack_from(">I", data, i)
        if n > maximum:
            return frames, True, 0
        if len(data) - i - HEADER_BYTES < n:
            break
        frames.append(data[i + HEADER_BYTES : i + HEADER_BYTES + n])
        i += HEADER_BYTES + n
    return frames, False, len(data) - i


@st.composite
def framed_streams(draw: st.DrawFn) -> tuple[bytes, int, list[int]]:
    """Arbitrary bytes, or mostly-valid frame streams with garbage mixed in; a maximum; cut points."""
    maximum = draw(st.sampled_from([0, 1, 5, 64, 255, 4096, MAX]))
    if draw(st.booleans()):
        data = draw(st.binary(max_size=300))
    else:
        parts = []
        for _ in range(draw(st.integers(0, 5))):
            kind = draw(st.integers(0, 4))
            if kind == 0:
                parts.append(draw(st.binary(max_size=8)))  # garbage
            elif kind == 1:
                parts.append(struct.pack(">I", draw(st.integers(0, 2**32 - 1))))  # a bare header
            else:
                parts.append(encode_frame(draw(st.binary(max_size=80)), 2**32 - 1))
        data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    return data, maximum, cuts


def _check_frames(data: bytes, maximum: int, cuts: list[int]) -> None:
    want_frames, want_error, leftover = reference_frames(data, maximum)
    d = FrameDecoder(maximum)
    got: list[bytes] = []
    error = False
    bounds = [0, *cuts, len(data)]
    try:
        for a, b in zip(bounds, bounds[1:], strict=False):
            d.feed(data[a:b])
            while (body := d.next_frame()) is not None:
                got.append(body)
            # What is left is part of one header or of one body, never more.
            assert d.buffered < max(maximum, HEADER_BYTES)
    except FrameTooLarge as exc:
        error = True
        assert exc.code is ErrorCode.FRAME_TOO_LARGE and exc.data["maximum"] == maximum
        assert exc.data["current"] > maximum
        assert d.buffered == 0
        with pytest.raises(FrameTooLarge):
            d.next_frame()
        with pytest.raises(FrameTooLarge):
            d.feed(b"")
    assert got == want_frames
    assert error == want_error
    if not error:
        assert d.in_frame == (leftover > 0)


@pytest.mark.slow
@settings(FAST, max_examples=examples(400))
@given(st.lists(framed_streams(), min_size=6, max_size=6))
def test_property_frame_decoder_yields_frames_or_frame_too_large(cases: list[tuple[bytes, int, list[int]]]) -> None:
    for data, maximum, cuts in cases:
        _check_frames(data, maximum, cuts)
        _check_frames(data, maximum, list(range(1, len(data))))  # the finest split: one byte at a time


def _keys() -> st.SearchStrategy[str]:
    return st.sampled_from(["id", "method", "params", "path", "query"]) | st.text(max_size=4)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
    st.text(max_size=12), st.binary(max_size=12), st.sampled_from(sorted(METHODS)),
)
msgpack_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys(), inner, max_size=4),
    max_leaves=10,
)
request_like = st.fixed_dictionaries(
    {
        "id": st.integers(0, 2**63 - 1) | st.integers(-2, 2**64 - 1) | msgpack_values,
        "method": st.sampled_from(sorted(METHODS)) | msgpack_values,
    },
    optional={
        "params": st.dictionaries(_keys(), msgpack_values, max_size=3) | msgpack_values,
        "extra": msgpack_values,
    },
)


def _check_decode(body: bytes) -> Request | None:
    try:
        r = decode_request(body, METHODS)
    except HubError as exc:
        assert exc.code is ErrorCode.BAD_REQUEST, exc
        assert isinstance(exc.message, str)
        if "id" in exc.data:
            rid = exc.data["id"]
            assert isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid < 2**63
        pack(exc.to_wire())  # the Hub must be able to send it back
        return None
    assert isinstance(r, Request)
    assert isinstance(r.id, int) and not isinstance(r.id, bool) and 0 <= r.id < 2**63
    assert r.method in METHODS
    assert isinstance(r.params, dict)
    return r


@pytest.mark.slow
@settings(FAST, max_examples=examples(800))
@given(st.lists(st.binary(max_size=200), min_size=10, max_size=10))
def test_property_decode_request_arbitrary_bytes(bodies: list[bytes]) -> None:
    for body in bodies:
        _check_decode(body)


mutations = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2**16), st.binary(min_size=1, max_size=4)),
                     min_size=1, max_size=3)


@pytest.mark.slow
@settings(FAST, max_examples=examples(500))
@given(msgpack_values | request_like, st.lists(mutations, min_size=3, max_size=3))
def test_property_decode_request_arbitrary_objects(obj: Any, mutation_sets: list[list[tuple[int, int, bytes]]]) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    r = _check_decode(body)
    if isinstance(obj, dict) and set(obj) <= {"id", "method", "params"}:
        # A request the decoder accepts keeps what was sent.
        if r is not None:
            assert r.id == obj["id"] and r.method == obj["method"]
            assert pack(r.params) == pack(obj.get("params") or {})  # pack: NaN != NaN
    elif r is not None:
        pytest.fail(f"accepted a request with wrong fields: {obj!r}")
    for ops in mutation_sets:  # the same body, corrupted: bytes replaced, inserted, truncated
        mutated = bytearray(body)
        for op, where, chunk in ops:
            pos = where % (len(mutated) + 1)
            if op == 0:
                mutated[pos : pos + len(chunk)] = chunk
            elif op == 1:
                mutated[pos:pos] = chunk
            else:
                del mutated[pos:]
        _check_decode(bytes(mutated))
    for end in range(len(body)):  # every truncation of the valid body
        _check_decode(body[:end])


# Param maps aimed at every parser's fields, with values that get past the first checks.
REVISIONS = st.sampled_from(["absent", "ABSENT", " absent ", "a" * 64, "A" * 64, "a" * 63, "g" * 64, "a" * 64 + "\n",
                             "a" * 12, "a" * 11, "a" * 65, "absen", "abs"])
PATHS = st.sampled_from([
    "MEMORY.md", "notes/a.md", "a/b/c.md", "../x.md", "/abs.md", "a//b.md", "a/./b.md", ".md", "x.txt",
    "C:/x.md", "a\\b.md", "%2e%2e/x.md", "a%2fb.md", "caf\u00e9.md", "cafe\u0301.md", "a\x00.md",
    "\ud800.md", "a\u2028b.md", " a.md", "a /b.md", "... /x.md", "a/" * 25 + "x.md", "x" * 1100 + ".md",
    "notes/", "",
])
TEXT = st.text(max_size=30) | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3)
INT64 = st.integers(-(2**63), 2**64 - 1)
PARAM_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 40), INT64, st.floats(), TEXT, st.binary(max_size=20), PATHS, REVISIONS,
    st.sampled_from(["a b c", " ".join(["w"] * 17), "x" * 513, "\u00e9" * 300, "   ", "-flag"]),
    st.lists(INT64, max_size=2), st.dictionaries(st.text(max_size=3), INT64, max_size=2),
)
PARAM_KEYS = st.sampled_from([
    "protocol", "client", "binding", "token", "query", "path_prefix", "limit", "path", "start_line",
    "end_line", "offset", "content", "expected_revision",
]) | st.text(max_size=5)
PARSERS = [P.parse_hello, P.parse_search, P.parse_get, P.parse_upsert, P.parse_forget, P.parse_export]
ANY = PARAM_VALUES.map(lambda v: v)  # one branch, not flattened into (and outweighing) a one_of
GOOD_PATHS = st.sampled_from(["MEMORY.md", "notes/a.md", "a/b/c.md", "caf\u00e9.md", "cafe\u0301.md", "x y.md"])
SMALL_INTS = st.one_of(st.integers(-3, 40), ANY)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "protocol": st.one_of(st.integers(0, 3), ANY),
    "client": st.one_of(TEXT, st.just("c" * 201), ANY),
    "binding": st.one_of(st.sampled_from(["global", "principal:me", "", "x" * 1201]), ANY),
    "token": ANY,
    "query": st.one_of(st.sampled_from(["preferences", "a b", "C++ -x", "  ", " ".join("abcdefghijklmnopq")]), TEXT),
    "path_prefix": st.one_of(GOOD_PATHS, PATHS, st.sampled_from(["notes/", "no", "a/b/"]), TEXT),
    "limit": SMALL_INTS, "start_line": SMALL_INTS, "end_line": SMALL_INTS, "offset": SMALL_INTS,
    "path": st.one_of(GOOD_PATHS, PATHS.map(lambda v: v), TEXT.map(lambda v: v)),
    "content": st.one_of(TEXT, st.binary(max_size=20), st.sampled_from([b"\xff", b"ok\xed\xa0\x80", "# Notes\n"])),
    "expected_revision": st.one_of(REVISIONS, ANY),
}
PARSER_FIELDS = [  # (required, optional) fields of each parser
    (set(), {"protocol", "client", "binding", "token"}),
    ({"query"}, {"path_prefix", "limit"}),
    ({"path"}, {"start_line", "end_line", "offset"}),
    ({"path", "content", "expected_revision"}, set()),
    ({"path", "expected_revision"}, set()),
    ({"path"}, {"offset", "expected_revision"}),
]
PARAM_MAPS = st.one_of(
    st.dictionaries(PARAM_KEYS, PARAM_VALUES, max_size=5),  # anything
    *[  # aimed at one parser: its fields, with values that often pass
        st.fixed_dictionaries({f: FIELDS[f] for f in sorted(req)}, optional={f: FIELDS[f] for f in sorted(opt)})
        for req, opt in PARSER_FIELDS
    ],
)


def _check_params(params: dict[str, Any]) -> None:
    try:
        pack(params)
        from_the_wire = True
    except UnicodeEncodeError:  # lone surrogates: never produced by the Hub's msgpack decoder
        from_the_wire = False
    for parse in PARSERS:
        try:
            out = parse(dict(params))
        except HubError as exc:
            assert exc.code in {ErrorCode.BAD_REQUEST, ErrorCode.INVALID_PATH}, (parse.__name__, exc)
            assert isinstance(exc.message, str) and isinstance(exc.data, dict)
            if from_the_wire:
                pack(exc.to_wire())  # the Hub must be able to send the error back
            continue
        path = getattr(out, "path", None)
        if path is not None:
            assert isinstance(path, str) and path.endswith(".md")
            assert normalize_path(path) == path  # normalization is idempotent
        rev = getattr(out, "expected_revision", None)
        if rev is not None:
            assert rev == "absent" or (12 <= len(rev) <= 64 and set(rev) <= set("0123456789abcdef"))
        if isinstance(out, P.SearchParams):
            assert 1 <= len(out.keywords) <= LIMITS.query_max_keywords
            assert 1 <= out.limit <= LIMITS.search_max_limit
        if isinstance(out, P.UpsertParams):
            out.content.decode("utf-8")
    try:
        P.parse_revision(params.get("expected_revision"))
    except HubError as exc:
        assert exc.code is ErrorCode.BAD_REQUEST


@pytest.mark.slow
@settings(FAST, max_examples=examples(600))
@given(st.lists(PARAM_MAPS, min_size=3, max_size=3))
def test_property_params_parse_or_raise_bad_request_or_invalid_path(batch: list[dict[str, Any]]) -> None:
    for params in batch:
        _check_params(params)


def test_hub_error_text_is_always_encodable() -> None:
    # A lone surrogate (from a non-UTF-8 argument) anywhere in message or data becomes the visible \udcff.
    raw = os.fsdecode(b"/tmp/\xff")
    exc = HubError(ErrorCode.UNAVAILABLE, f"no Hub at {raw}", {"socket": raw, "nested": {raw: [raw, 1]}, "n": 3})
    wire = exc.to_wire()
    assert msgpack.packb(wire) and str(exc).encode("utf-8")
    assert wire["message"] == "no Hub at /tmp/\\udcff" and wire["data"]["socket"] == "/tmp/\\udcff"
    assert wire["data"]["nested"] == {"/tmp/\\udcff": ["/tmp/\\udcff", 1]} and wire["data"]["n"] == 3
    fine = HubError(ErrorCode.NOT_FOUND, "plain ü", {"path": "a.md"})
    assert fine.message == "plain ü" and fine.data == {"path": "a.md"}
