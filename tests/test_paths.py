"""Logical path rules (protocol.paths): what a caller may name inside a scope.

Every rejection must carry the ``invalid_path`` code; every accepted path comes
back in NFC form.  Pure functions: no Hub, no files.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.params import parse_export, parse_forget, parse_get, parse_search, parse_upsert
from amux_memory.protocol.paths import is_canonical_path, normalize_path, normalize_prefix

REV = "0" * 64


def assert_invalid(path: object) -> HubError:
    with pytest.raises(HubError) as info:
        normalize_path(path)
    assert info.value.code is ErrorCode.INVALID_PATH, info.value
    return info.value


def path_of_bytes(total: int) -> str:
    """An ASCII path of exactly ``total`` UTF-8 bytes, in segments of at most 200 bytes."""
    body = total - len(".md")
    parts: list[str] = []
    while body > 0:
        seg = min(200, body)
        if parts:
            seg = min(seg, body - 1)  # room for the "/" separator
            if seg <= 0:
                break
            body -= 1
        parts.append("a" * seg)
        body -= seg
    path = "/".join(parts) + ".md"
    assert len(path.encode()) == total, len(path.encode())
    return path


# -- accepted -----------------------------------------------------------------

ACCEPTED = [
    "MEMORY.md",
    "a.md",
    "preferences/communication.md",
    "projects/amux/decisions.md",
    ".hidden.md",
    "a.b.md",
    "dir.with.dots/x.md",
    "spaces inside/a name.md",
    "架构/决策.md",
    "emoji 🚀/notes.md",
    "100%.md",
    "%41.md",  # percent-escape that is not a separator or dot segment
    "C++/real-time.md",
    "don't/\"quoted\".md",
    "-leading.md",
    "x..y.md",
    "...x.md",
]


@pytest.mark.parametrize("path", ACCEPTED)
def test_valid_paths_are_returned_unchanged(path: str) -> None:
    assert normalize_path(path) == path


def test_exactly_max_path_bytes_is_accepted() -> None:
    path = path_of_bytes(LIMITS.max_path_bytes)
    assert len(path.encode("utf-8")) == 1024
    assert normalize_path(path) == path


def test_exactly_max_path_bytes_with_multibyte_characters() -> None:
    # 3-byte characters in several segments, padded with ASCII to exactly 1,024 bytes.
    segs = ["决" * 60] * 5
    path = "/".join(segs) + "/.md"
    pad = LIMITS.max_path_bytes - len(path.encode())
    path = "/".join(segs) + "/" + "a" * pad + ".md"
    assert len(path.encode()) == LIMITS.max_path_bytes
    assert normalize_path(path) == path
    assert_invalid("/".join(segs) + "/" + "a" * (pad + 1) + ".md")


def test_segment_byte_limit() -> None:
    ok = "d/" + "é" * 126 + ".md"  # 252 + 3 bytes
    assert len(ok.split("/")[1].encode()) == LIMITS.max_segment_bytes
    assert normalize_path(ok) == ok
    err = assert_invalid("d/" + "é" * 126 + "x.md")
    assert "255" in err.message


def test_exactly_max_segments_is_accepted() -> None:
    path = "/".join(["d"] * (LIMITS.max_path_segments - 1) + ["x.md"])
    assert path.count("/") + 1 == 20
    assert normalize_path(path) == path


def test_nfd_input_returns_nfc() -> None:
    nfc = "café/résumé.md"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    out = normalize_path(nfd)
    assert out == nfc
    assert unicodedata.is_normalized("NFC", out)
    # Both spellings name the same logical document.
    assert normalize_path(nfc) == normalize_path(nfd)


def test_nfd_hangul_returns_nfc() -> None:
    nfc = "한국어.md"
    nfd = unicodedata.normalize("NFD", nfc)
    assert len(nfd) > len(nfc)
    assert normalize_path(nfd) == nfc


# -- rejected -----------------------------------------------------------------

REJECTED = {
    # traversal and dot segments
    "dotdot": "..",
    "dotdot-file": "../x.md",
    "dotdot-inside": "a/../b.md",
    "dotdot-trailing": "a/..",
    "dotdot-deep": "a/b/../../../etc/passwd.md",
    "dot-leading": "./x.md",
    "dot-inside": "a/./b.md",
    "dot-only": ".",
    # absolute
    "absolute": "/x.md",
    "absolute-etc": "/etc/passwd.md",
    "double-slash-absolute": "//x.md",
    "windows-drive": "C:/x.md",
    "windows-drive-relative": "c:x.md",
    # backslash
    "backslash": "a\\b.md",
    "backslash-traversal": "..\\x.md",
    "backslash-leading": "\\x.md",
    # NUL and control characters
    "nul": "a\x00.md",
    "nul-end": "a.md\x00",
    "ctrl-01": "a\x01b.md",
    "ctrl-1f": "a\x1fb.md",
    "del-7f": "a\x7fb.md",
    "newline": "a\nb.md",
    "newline-end": "a.md\n",
    "carriage-return": "a\rb.md",
    "tab": "a\tb.md",
    "nel-0085": "a\u0085b.md",
    "line-separator-2028": "a\u2028b.md",
    "zero-width-space": "a\u200bb.md",
    "bidi-override": "invoice\u202edm.exe.md",
    "byte-order-mark": "\ufeffMEMORY.md",
    "paragraph-separator-2029": "a\u2029b.md",
    "c1-control-009b": "a\u009bb.md",
    # empty segments
    "empty": "",
    "double-slash": "a//b.md",
    "trailing-slash": "a/b.md/",
    "dir-only": "a/",
    "slash-only": "/",
    # not a Markdown document
    "txt": "a.txt",
    "no-extension": "notes",
    "md-then-txt": "a.md.txt",
    "uppercase-ext-not-md": "a.markdown",
    "md-without-dot": "amd",
    "directory-like": "projects/amux",
    "temp-file": ".a.md.0123456789ab.amux-tmp",
    # names only of dots or spaces
    "ext-only": ".md",
    "dots-name": "...md",
    "dots-dir": ".../x.md",
    "space-name": " .md",
    "spaces-name": "   .md",
    "space-dir": " /x.md",
    "dots-and-spaces-dir": ". ./x.md",
    "dot-space-name": ". .md",
    # percent-encoded traversal / separators
    "pct-dotdot": "%2e%2e/x.md",
    "pct-dotdot-upper": "%2E%2E/x.md",
    "pct-dotdot-mixed": ".%2e/x.md",
    "pct-dot": "%2e/x.md",
    "pct-dotdot-inside": "a/%2e%2e/b.md",
    "pct-slash": "a%2fb.md",
    "pct-slash-traversal": "%2e%2e%2fx.md",
    "pct-backslash": "a%5cb.md",
    "pct-nul": "a%00b.md",
    # leading / trailing whitespace
    "leading-space": " a.md",
    "trailing-space": "a.md ",
    "leading-space-dir": " a/b.md",
    "trailing-space-dir": "a /b.md",
    "leading-space-inner": "a/ b.md",
    "leading-nbsp": "\u00a0a.md",
    "trailing-ideographic-space": "a.md\u3000",
    # lone surrogates
    "lone-high-surrogate": "a\ud800.md",
    "lone-low-surrogate": "\udc00.md",
    "surrogate-dir": "\udfff/x.md",
}


@pytest.mark.parametrize("path", list(REJECTED.values()), ids=list(REJECTED))
def test_invalid_paths_are_rejected(path: str) -> None:
    err = assert_invalid(path)
    assert err.data.get("reason"), err.data
    # The error stays printable and serializable even for hostile input.
    assert isinstance(err.to_wire()["message"], str)


@pytest.mark.parametrize("value", [None, 1, b"a.md", ["a.md"], {"p": "a.md"}, 1.5, True])
def test_non_string_paths_are_rejected(value: object) -> None:
    assert_invalid(value)


def test_over_max_path_bytes_is_rejected() -> None:
    path = path_of_bytes(LIMITS.max_path_bytes + 1)
    assert len(path.encode()) == 1025
    err = assert_invalid(path)
    assert "1024" in err.message


def test_far_over_max_path_bytes_is_rejected_with_short_message() -> None:
    err = assert_invalid("a" * 100_000 + ".md")
    assert len(err.message) < 400


def test_over_max_segments_is_rejected() -> None:
    path = "/".join(["d"] * LIMITS.max_path_segments + ["x.md"])
    assert path.count("/") + 1 == 21
    assert_invalid(path)


def test_nfd_path_over_limit_after_nfc_is_rejected() -> None:
    # The length bound applies to the normalized form.
    path = path_of_bytes(LIMITS.max_path_bytes + 1)
    assert_invalid(unicodedata.normalize("NFD", path))


@pytest.mark.parametrize("path", ["../x.md", "/x.md", "a\\b.md", "a//b.md", "a.txt", "%2e%2e/x.md", "a\x00.md"])
def test_every_method_validates_its_path(path: str) -> None:
    for call in (
        lambda: parse_get({"path": path}),
        lambda: parse_upsert({"path": path, "content": "x", "expected_revision": "absent"}),
        lambda: parse_forget({"path": path, "expected_revision": REV}),
        lambda: parse_export({"path": path}),
    ):
        with pytest.raises(HubError) as info:
            call()
        assert info.value.code is ErrorCode.INVALID_PATH


def test_params_return_nfc_path() -> None:
    nfd = unicodedata.normalize("NFD", "café.md")
    assert parse_get({"path": nfd}).path == "café.md"
    assert parse_upsert({"path": nfd, "content": "x", "expected_revision": "absent"}).path == "café.md"
    assert parse_forget({"path": nfd, "expected_revision": REV}).path == "café.md"
    assert parse_export({"path": nfd}).path == "café.md"


# -- search path_prefix -------------------------------------------------------

@pytest.mark.parametrize("prefix", ["", "projects/", "projects/am", "projects", "a/b/", "架构/"])
def test_prefix_accepted(prefix: str) -> None:
    assert normalize_prefix(prefix) == prefix
    assert parse_search({"query": "x", "path_prefix": prefix}).path_prefix == prefix


def test_prefix_none_means_whole_scope() -> None:
    assert normalize_prefix(None) == ""


def test_prefix_nfd_returns_nfc() -> None:
    assert normalize_prefix(unicodedata.normalize("NFD", "café/")) == "café/"


@pytest.mark.parametrize(
    "prefix",
    ["../", "..", "a/../", "/etc", "a\\b", "a//b", "./a", "%2e%2e/", "a\x00", "a\nb", "a\u2028", " a/", "\ud800"],
)
def test_prefix_rejected(prefix: str) -> None:
    with pytest.raises(HubError) as info:
        normalize_prefix(prefix)
    assert info.value.code is ErrorCode.INVALID_PATH
    with pytest.raises(HubError) as info:
        parse_search({"query": "x", "path_prefix": prefix})
    assert info.value.code is ErrorCode.INVALID_PATH


def test_a_printable_path_has_no_character_the_path_rules_refuse() -> None:
    # protocol.paths takes str.isprintable() as proof that no character is Cc, Cf, Cs or a line or paragraph
    # separator (and skips its per-character loop): check that for every code point this Python knows.
    refused = {"Cc", "Cf", "Cs"}
    wrong = [f"U+{cp:04X}" for cp in range(0x110000)
             if chr(cp).isprintable() and (unicodedata.category(chr(cp)) in refused or chr(cp) in "\u2028\u2029\u0085")]
    assert wrong == []


@pytest.mark.parametrize("path", ["笔记/配置.md", "Ünïcödé/ß-ﬁ.md", "emoji-🧠.md", "a\u00a0b.md", "a\u3000b.md"])
def test_non_ascii_paths_are_accepted_whether_printable_or_not(path: str) -> None:
    # NBSP and the ideographic space are not printable, so they take the per-character path; the rest do not.
    assert normalize_path(path) == unicodedata.normalize("NFC", path)


@pytest.mark.parametrize("ch", ["\u200d", "\u202e", "\u2028", "\u0085", "\x7f", "\ufeff"])
def test_an_invisible_or_control_character_beside_printable_text_is_refused(ch: str) -> None:
    with pytest.raises(HubError) as info:
        normalize_path(f"notes/笔记{ch}x.md")
    assert info.value.code is ErrorCode.INVALID_PATH


def _slow_canonical(path: str) -> bool:
    try:
        return normalize_path(path) == path
    except HubError:
        return False


@settings(max_examples=800, deadline=None)
@given(st.lists(st.text(alphabet="aZ09_.- %:\\é", min_size=0, max_size=6), min_size=1, max_size=22),
       st.sampled_from([".md", "", ".txt", "/.md", ".md/"]))
def test_the_plain_path_shortcut_agrees_with_the_rules(segments: list[str], end: str) -> None:
    path = "/".join(segments) + end
    assert is_canonical_path(path) == _slow_canonical(path), path


def test_the_plain_path_shortcut_keeps_the_length_limits() -> None:
    longest = "/".join(["s" * (LIMITS.max_segment_bytes - 3) + ".md"])
    assert is_canonical_path(longest) and not is_canonical_path("x" + longest)
    deepest = "/".join(["d"] * (LIMITS.max_path_segments - 1) + ["n.md"])
    assert is_canonical_path(deepest) and not is_canonical_path("d/" + deepest)
    head = "/".join(["w" * 200] * 5) + "/"
    widest = head + "x" * (LIMITS.max_path_bytes - len(head) - 3) + ".md"
    assert len(widest) == LIMITS.max_path_bytes and is_canonical_path(widest) and _slow_canonical(widest)
    assert not is_canonical_path(widest[:-3] + "x.md")  # one byte over the path's limit
