"""The scan's matching form of a document (DESIGN.md §5.1): ``fold_document``'s fast paths give exactly
``fold(text)``, and the Unicode fact its NFC shortcut rests on holds for this Python's Unicode tables."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from amux_memory.hub.storage.cache import fold, fold_document


def _canonical_pairs() -> list[tuple[int, int, int]]:
    """``(composite, first, second)`` of every two-character canonical decomposition."""
    pairs = []
    for code in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            parts = [int(p, 16) for p in decomposition.split()]
            if len(parts) == 2:
                pairs.append((code, parts[0], parts[1]))
    return pairs


def test_only_marks_from_u0300_to_u037f_compose_with_an_ascii_character() -> None:
    pairs = _canonical_pairs()
    with_ascii_first = {second for _, first, second in pairs if first < 0x80}
    assert with_ascii_first and all(0x300 <= code <= 0x37F for code in with_ascii_first)
    assert not [composite for composite, _, second in pairs if second < 0x80]  # ASCII is never composed onto
    assert all(unicodedata.combining(chr(code)) == 0 and unicodedata.decomposition(chr(code)) == ""
               for code in range(0x80))


ALPHABET = (
    "aAzZ09 <=>-_#\n"  # ASCII, including the starters that compose (a + U+0301 is á, < + U+0338 is ≮)
    "\u0300\u0301\u0302\u0308\u030a\u0323\u0327\u0338\u0345\u0591\u05b0\u093c\u0bbe\u3099"  # combining marks
    "\u1100\u1161\u11a8\uac00"  # Hangul: a leading consonant, a vowel, a trailing consonant, a syllable
    "éÅ\u212b\u2126\uf900ﬁΣσςßİıЖ"  # precomposed, singletons (Angstrom, Ohm, a CJK compatibility ideograph), cases
    "项目中文😀\u200d—“”…"  # CJK, emoji, joiner, punctuation that casefold leaves alone
)


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=24))
def test_the_fast_paths_fold_exactly_as_fold_does(text: str) -> None:
    assert fold_document(text.encode("utf-8")) == fold(text).encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=24), st.text(alphabet=ALPHABET, max_size=8))
def test_invalid_utf8_folds_its_replacement_text(raw: bytes, text: str) -> None:
    data = raw + text.encode("utf-8")
    assert fold_document(data) == fold(data.decode("utf-8", "replace")).encode("utf-8")
