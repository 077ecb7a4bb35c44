"""The one-pass keyword matcher of ``hub.methods.search`` equals the per-keyword literal test (DESIGN.md §5.1).

Differential, with hypothesis: random documents and keywords over a small
alphabet full of overlaps (one keyword inside another, one's end the next
one's start), CJK, case folding that changes length (ß, İ, ﬁ), combining
characters and empty documents; every query has at least ``GROUP_MIN``
keywords so the one-pass automaton is used.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from amux_memory.hub.methods.search import GROUP_MIN, _matcher, _presence
from amux_memory.hub.storage.cache import CachedDoc, ScopeCache, fold

ALPHABET = "abAB ßSsİi\u0307e\u0301é中文中ﬁ"
words = st.text(ALPHABET.replace(" ", ""), min_size=1, max_size=4)


def _doc(path: str, text: str) -> CachedDoc:
    stat = os.stat_result((0o100644, 1, 0, 1, 0, 0, len(text.encode()), 0, 0, 0, 0.0, 0.0, 0.0, 0, 0, 0))
    return CachedDoc.load(path, stat, text.encode("utf-8"))


def _literal(texts: list[str], keywords: list[str]) -> dict[int, list[int]]:
    """The old rule: document ``d`` has keyword ``k`` when fold(k) is a substring of fold(d)."""
    out: dict[int, list[int]] = {}
    for d, text in enumerate(texts):
        hit = [k for k, kw in enumerate(keywords) if fold(kw) in fold(text)]
        if hit:
            out[d] = hit
    return out


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(st.text(ALPHABET, max_size=40), min_size=1, max_size=8),
       keywords=st.lists(words, min_size=GROUP_MIN, max_size=16, unique_by=fold))
def test_one_pass_equals_per_keyword_scan(texts: list[str], keywords: list[str]) -> None:
    docs = [_doc(f"d{i}.md", t) for i, t in enumerate(texts)]
    hay = ScopeCache().haystack_for(docs)
    folded = [fold(k).encode("utf-8") for k in keywords]
    assert _presence(hay, folded) == _literal(texts, keywords)


def test_group_is_used_and_hidden_keywords_are_found() -> None:
    """'abc' hides 'bc' (inside) and 'cd' (overlap) in a leftmost-longest pass; both are still found."""
    keywords = ["abc", "bc", "cd", "b", "zz"]
    texts = ["xabcd", "bc only", "", "zz", "nothing"]
    folded = tuple(fold(k).encode() for k in keywords)
    assert _matcher(folded, (False,) * len(folded)).automaton is not None
    hay = ScopeCache().haystack_for([_doc(f"d{i}.md", t) for i, t in enumerate(texts)])
    assert _presence(hay, list(folded)) == {0: [0, 1, 2, 3], 1: [1, 3], 3: [4]}
