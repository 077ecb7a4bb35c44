"""Logical memory paths: relative ``.md`` paths inside one scope (DESIGN.md §4).

A logical path is what a caller names; the Hub maps it under the scope root it
derived itself.  Validation here is purely lexical; the store also refuses a
symlink anywhere on the way when it opens the file (``O_NOFOLLOW`` per segment).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS

MOUNT_MARK = "@"
"""A first path segment starting with this names a team mount (``@web/deploy.md``, DESIGN.md §7.8): no scope
holds a document there, and the walkers pass such top-level entries over."""

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PLAIN_SEGMENT = rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{LIMITS.max_segment_bytes - 1}}}"
_PLAIN_PATH = re.compile(rf"{_PLAIN_SEGMENT}(?:/{_PLAIN_SEGMENT}){{0,{LIMITS.max_path_segments - 1}}}")
_SEPARATORS = frozenset("\u2028\u2029\u0085")


def _reject(path: str, why: str) -> HubError:
    # Escape what cannot be encoded (lone surrogates from a mis-encoded argv) so the error can be sent.
    shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return HubError(ErrorCode.INVALID_PATH, f"invalid path {shown!r}: {why}", {"path": shown, "reason": why})


def _check_chars(path: str) -> None:
    if "\\" in path:
        raise _reject(path, "backslashes are not allowed; use '/' between segments")
    if path.isprintable():
        return  # no Cc, Cf, Cs or separator (tests/test_paths.py checks every code point); the loop costs ~1 µs a char
    for ch in path:
        category = unicodedata.category(ch)
        if category == "Cs":
            raise _reject(path, "not valid Unicode (lone surrogate)")
        if category == "Cc" or ch in _SEPARATORS:
            raise _reject(path, f"control character U+{ord(ch):04X} is not allowed")
        if category == "Cf":
            # Zero-width and bidi-override characters make one path look like another.
            raise _reject(path, f"invisible format character U+{ord(ch):04X} is not allowed")


def _check_segment(path: str, seg: str) -> None:
    if len(seg.encode("utf-8", "surrogatepass")) > LIMITS.max_segment_bytes:
        raise _reject(path, f"a segment is longer than {LIMITS.max_segment_bytes} bytes")
    if seg == "":
        raise _reject(path, "empty segment (leading, trailing or doubled '/')")
    if seg in (".", ".."):
        raise _reject(path, "'.' and '..' segments are not allowed")
    if seg.strip(". ") == "":
        raise _reject(path, "a segment made only of dots or spaces is not allowed")
    if seg != seg.strip():
        raise _reject(path, "a segment may not start or end with whitespace")
    if _PERCENT.search(seg):
        decoded = unquote(seg)
        if decoded.strip(". ") == "" or any(c in decoded for c in "/\\\x00"):
            raise _reject(path, "percent-encoded separators or dot segments are not allowed")


def normalize_path(path: object) -> str:
    """Validate a logical document path and return its NFC form.

    Rules: a string, NFC-normalized first (so NFC and NFD spellings name one
    file); relative; ``/``-separated; no empty, ``.``, ``..``, dots/spaces-only
    or percent-encoded traversal segments; no backslash, NUL or other control
    character; at most 1,024 UTF-8 bytes and 20 segments; the last segment ends
    in ``.md`` with a non-empty name; no segment over 255 bytes.  Raises :class:`HubError` ``invalid_path``.
    """
    if not isinstance(path, str):
        raise HubError(ErrorCode.INVALID_PATH, "path must be a string", {"reason": "type"})
    nfc = unicodedata.normalize("NFC", path)
    if nfc == "":
        raise _reject(nfc, "path is empty")
    if len(nfc.encode("utf-8", "surrogatepass")) > LIMITS.max_path_bytes:
        raise _reject(nfc, f"longer than {LIMITS.max_path_bytes} bytes")
    _check_chars(nfc)
    if nfc.startswith("/"):
        raise _reject(nfc, "absolute paths are not allowed; give a path relative to the memory scope")
    if re.match(r"^[A-Za-z]:", nfc):
        raise _reject(nfc, "a drive-letter prefix ('C:') is not allowed; give a path relative to the memory scope")
    segments = nfc.split("/")
    if len(segments) > LIMITS.max_path_segments:
        raise _reject(nfc, f"more than {LIMITS.max_path_segments} segments")
    for seg in segments:
        _check_segment(nfc, seg)
    last = segments[-1]
    if not last.endswith(".md") or last[:-3].strip(". ") == "":
        raise _reject(nfc, "only Markdown documents ('name.md') can be stored")
    return nfc


def normalize_prefix(prefix: object) -> str:
    """Validate a search ``path_prefix`` and return its NFC form ("" = whole scope).

    Same character and segment rules as :func:`normalize_path`, but any
    string prefix is allowed (``projects/`` or ``projects/am``); a trailing
    ``/`` is kept.  Raises :class:`HubError` ``invalid_path``.
    """
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise HubError(ErrorCode.INVALID_PATH, "path_prefix must be a string", {"reason": "type"})
    nfc = unicodedata.normalize("NFC", prefix)
    if nfc == "":
        return ""
    if len(nfc.encode("utf-8", "surrogatepass")) > LIMITS.max_path_bytes:
        raise _reject(nfc, f"longer than {LIMITS.max_path_bytes} bytes")
    _check_chars(nfc)
    if nfc.startswith("/"):
        raise _reject(nfc, "absolute prefixes are not allowed")
    segments = nfc.split("/")
    if segments[-1] == "":
        segments.pop()
    if len(segments) > LIMITS.max_path_segments:
        raise _reject(nfc, f"more than {LIMITS.max_path_segments} segments")
    for seg in segments:
        _check_segment(nfc, seg)
    return nfc


def is_canonical_path(path: str) -> bool:
    """True when ``path`` is a valid logical path already in its canonical (NFC) spelling.

    A name found on disk (a directory walk's ``rel/name.md``) is one the API can
    address exactly when this holds: :func:`normalize_path` accepts it and returns
    it unchanged.  Hand-placed files that fail it (an NFD name, a control character,
    a segment over 255 bytes) are skipped by ``search`` and ``list`` (DESIGN.md §5).
    Never raises.  A plain ASCII path (letters, digits, ``_``, ``.``, ``-``, segments not starting with ``.`` or
    ``-``) meets every rule by its shape, so it is told by one regular expression (a cold search checks every
    path it reads: 5 of its 97 ms for 1,024 notes, before); ``tests/test_paths.py`` checks both ways agree.
    """
    if len(path) <= LIMITS.max_path_bytes and path.endswith(".md") and _PLAIN_PATH.fullmatch(path):
        return True
    try:
        return normalize_path(path) == path
    except HubError:
        return False


def is_reserved(path: str) -> bool:
    """Whether ``path``'s first segment names a mount (starts with :data:`MOUNT_MARK`), DESIGN.md §7.8."""
    return path.startswith(MOUNT_MARK)
