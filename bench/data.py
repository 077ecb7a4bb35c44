"""Scopes and queries for the bench, and the independent literal scan every result is checked against.

Scopes are cut from ``../shared/corpus/files`` (real Markdown, like
``tests/test_corpus_e2e.py`` does) or generated (deterministic synthetic
Markdown, English and Chinese) when the corpus is absent or for sizes the
corpus cannot give (up to the 16 MiB scope quota).
"""

from __future__ import annotations

import csv
import itertools
import os
import random
import re
import stat
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.paths import normalize_path
from bench.util import CORPUS

MIB = 1024 * 1024
SCAN_BYTES = 8 * MIB


# -- the reference (independent of hub/methods/search.py and hub/storage/cache.py) ---------------------------------

def fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def title(text: str) -> str:
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        closing = [i for i in range(1, min(len(lines), 400)) if lines[i].strip() in ("---", "...")]
        start = closing[0] + 1 if closing else 0
    return next((ln for ln in lines[start:400] if ln.startswith("#")), "")


def read_tree(root: Path) -> dict[str, bytes]:
    """Every regular ``.md`` file under ``root`` (symlinks neither followed nor read), by logical path."""
    out: dict[str, bytes] = {}
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            if not name.endswith(".md"):
                continue
            full = os.path.join(dirpath, name)
            if not stat.S_ISREG(os.lstat(full).st_mode):
                continue
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root).replace(os.sep, "/")] = fh.read()
    return out


def literal_rank(docs: dict[str, bytes], words: Iterable[str]) -> list[tuple[str, int]]:
    """Reference ranking: ``(path, distinct keywords)`` for every document containing any keyword.

    Keywords are literal, case-insensitive (NFC + casefold); ranked by distinct
    keywords, then keywords in the path or title, then path.
    """
    kws = [fold(w) for w in dict.fromkeys(words)]
    ranked = []
    for path, data in docs.items():
        text = data.decode("utf-8", "replace")
        body = fold(text)
        hit = [k for k in kws if k in body]
        if hit:
            where = fold(path) + "\n" + fold(title(text))
            ranked.append((-len(hit), -sum(k in where for k in hit), path))
    ranked.sort()
    return [(p, -n) for n, _, p in ranked]


def python_scan(root: Path, words: Iterable[str]) -> list[tuple[str, int]]:
    """The one-shot Python literal scan: read every file, fold, test, rank (no cache)."""
    return literal_rank(read_tree(root), words)


def walk_order(paths: Iterable[str], max_files: int = LIMITS.scan_max_files) -> list[str]:
    """Logical paths in the order the Hub's scan reads them (DESIGN.md §5.4.1), written independently of it.

    Folders are taken breadth-first (depth, then path); the top level comes
    first (``MEMORY.md`` before the rest), then the other folders share the
    remaining ``max_files`` max-min fairly (an odd file to the earlier folder)
    and are read from the smallest share to the largest, each folder's files
    by name.  Files past their folder's share follow at the end (never read).
    """
    folders: dict[str, list[str]] = {}
    for path in paths:
        folders.setdefault(path.rpartition("/")[0], []).append(path)
    order = sorted(folders, key=lambda d: (d.count("/") + (d != ""), d.split("/")))
    for d in order:
        folders[d].sort(key=lambda p: (p != "MEMORY.md", p))
    planned: list[str] = []
    left = max_files
    if "" in folders:
        planned += folders[""][:left]
        left -= len(planned)
    others = [d for d in order if d != ""]
    share = dict.fromkeys(others, 0)
    # Max-min fair: hand out one file per round to every folder that still has files.
    while left > 0:
        hungry = [d for d in others if share[d] < len(folders[d])]
        if not hungry:
            break
        for d in hungry[:left]:
            share[d] += 1
        left -= min(left, len(hungry))
    position = {d: i for i, d in enumerate(others)}
    for d in sorted(others, key=lambda d: (share[d], position[d])):
        planned += folders[d][: share[d]]
    kept = set(planned)
    rest = [p for d in order for p in folders[d] if p not in kept]
    return planned + rest


def check_result(got: dict[str, Any], expected: list[tuple[str, int]], limit: int,
                 docs: dict[str, bytes] | None = None, words: Iterable[str] = ()) -> list[str]:
    """Differences between a search result and the reference ranking (empty when equal).

    A result cut short by time or file count (``incomplete``) is checked
    against the literal scan of the files it says it scanned: the first
    ``scanned_files`` in walk order (needs ``docs`` and ``words``).
    """
    problems: list[str] = []
    matches = got["matches"]
    reasons = set(got.get("incomplete_reasons") or ())
    if got.get("incomplete"):
        if docs is None or not reasons <= {"time", "files"}:
            return [f"incomplete: {sorted(reasons)}"]
        scanned = walk_order(docs)[: got["scanned_files"]]
        expected = literal_rank({p: docs[p] for p in scanned}, words)
    if got.get("candidates") != len(expected):
        problems.append(f"candidates {got.get('candidates')} != reference {len(expected)}")
    paths = [m["path"] for m in matches]
    if paths != [p for p, _ in expected[: len(paths)]]:
        problems.append(f"ranked paths differ: {paths[:3]}... vs {[p for p, _ in expected[:3]]}...")
    if len(paths) != min(limit, len(expected)) and not got.get("truncated"):
        problems.append(f"{len(paths)} matches for {len(expected)} expected without truncated")
    counts = dict(expected)
    for m in matches:
        if m["path"] in counts and len(m["matched"]) != counts[m["path"]]:
            problems.append(f"{m['path']}: matched {len(m['matched'])} keywords, reference {counts[m['path']]}")
            break
    return problems


# -- scopes --------------------------------------------------------------------------------------

def corpus_available() -> bool:
    return CORPUS.is_dir()


def corpus_docs() -> dict[str, bytes]:
    return {str(p.relative_to(CORPUS)): p.read_bytes() for p in sorted(CORPUS.rglob("*.md"))}


def _valid(path: str) -> bool:
    try:
        return normalize_path(path) == path
    except HubError:
        return False


def corpus_scope(everything: dict[str, bytes], files: int = 1024,
                 max_bytes: int = SCAN_BYTES - 64 * 1024) -> dict[str, bytes]:
    """``files`` valid documents within ``max_bytes``: the first ones in path order, with the
    largest swapped for the smallest unused ones until the size fits (as tests/test_corpus_e2e.py)."""
    valid = [p for p in everything if _valid(p)]
    chosen = valid[:files]
    spare = sorted(valid[files:], key=lambda p: len(everything[p]))
    chosen.sort(key=lambda p: len(everything[p]))
    while sum(len(everything[p]) for p in chosen) > max_bytes and spare:
        chosen.pop()
        chosen.insert(0, spare.pop(0))
    return {p: everything[p] for p in sorted(chosen)}


_SYLLABLES = ("ka", "to", "ri", "men", "sor", "lex", "pra", "vin", "do", "qua", "zel", "mor", "tig", "ban",
              "cor", "fle", "nu", "sta", "gri", "pol", "har", "wen", "ex", "ult", "ion", "ser", "ple", "dra")
_COMMON_EN = ("the", "and", "for", "with", "this", "that", "from", "use", "when", "should", "config", "project",
              "memory", "search", "agent", "test", "build", "decision", "context", "file")
# 240 frequent CJK characters (a fixed slice of the basic block is enough for contiguous matching).
_CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 20902, 87)][:240]


class Synth:
    """Deterministic synthetic Markdown: Zipf-distributed pseudo-words, ~15 % Chinese documents,
    and two unique rare words per document (so rare keywords exist at every size)."""

    def __init__(self, seed: int = 5) -> None:
        rng = random.Random(seed)
        self.rng = rng
        en = list(_COMMON_EN) + sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
                                         for _ in range(6000)})
        zh = sorted({"".join(rng.choice(_CJK) for _ in range(rng.randint(2, 3))) for _ in range(3000)})
        head = len(_COMMON_EN)
        tail = en[head:]
        rng.shuffle(tail)  # the Zipf head is the common words, then pseudo-words in no particular order
        en = en[:head] + tail
        rng.shuffle(zh)
        en_cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(en))))
        zh_cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(zh))))
        self.en_lines = [self._line(rng, en, en_cum, " ", 12) for _ in range(3000)]
        self.zh_lines = [self._line(rng, zh, zh_cum, "", 20) for _ in range(1500)]
        self.counter = 0

    @staticmethod
    def _line(rng: random.Random, vocab: list[str], cum: list[float], sep: str, n: int) -> str:
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(n // 2, n))
        prefix = rng.choice(("", "", "", "- ", "* ", "1. "))
        return prefix + sep.join(words)

    def rare_word(self, chinese: bool) -> str:
        self.counter += 1
        n = self.counter
        if chinese:
            return "".join(_CJK[(n * 7 + i * 31) % len(_CJK)] for i in range(5)) + _CJK[n % 97]
        return "zq" + "".join("bcdfghjklmnprstvwx"[(n >> (4 * i)) & 15] for i in range(5)) + "ux"

    def doc(self, size: int, chinese: bool) -> bytes:
        rng = self.rng
        lines = self.zh_lines if chinese else self.en_lines
        out = ["# " + rng.choice(lines).lstrip("-*1. "), ""]
        used = len(out[0]) + 2
        rare = [self.rare_word(chinese), self.rare_word(chinese)]
        while used < size:
            line = rng.choice(lines)
            if rare and rng.random() < 0.05:
                line = line + (" " if not chinese else "") + rare.pop()
            out.append(line)
            used += len(line.encode()) + 1
        if rare:
            out.insert(2, " ".join(rare))
        data = "\n".join(out).encode()[:size]
        data = data.decode("utf-8", "ignore").encode()
        return data + b"\n" * (size - len(data))

    def scope(self, files: int, file_bytes: int, prefix: str = "") -> dict[str, bytes]:
        """``files`` documents of exactly ``file_bytes`` bytes each, spread over a few folders."""
        docs: dict[str, bytes] = {}
        for i in range(files):
            chinese = i % 7 == 3
            folder = ("zh" if chinese else ("adr", "agent", "docs", "notes")[i % 4])
            docs[f"{prefix}{folder}/doc-{i:05d}.md"] = self.doc(file_bytes, chinese)
        return docs


def write_scope(root: Path, docs: dict[str, bytes], age_seconds: float = 3600.0) -> None:
    """Place ``docs`` under ``root`` by hand (as an editor would), backdated by ``age_seconds``
    so the Hub's cache does not treat them as just changed (its 2 s racy window)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for rel, data in docs.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        p.write_bytes(data)
        p.chmod(0o600)
    backdate(root, time.time() - age_seconds)


def backdate(root: Path, when: float, files_only: bool = False) -> None:
    """Set the mtime of everything under ``root`` (and ``root`` itself unless ``files_only``)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (when, when))
        if not files_only:
            os.utime(dirpath, (when, when))


# -- queries -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    name: str
    lang: str  # "en" | "zh"
    freq: str  # "rare" | "common"
    words: tuple[str, ...]


_EN_TOKEN = re.compile(r"[a-z][a-z-]{5,18}[a-z]")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")


def _seed_words() -> list[str]:
    path = CORPUS.parent / "QUERIES.tsv"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [row["query"] for row in csv.DictReader(fh, delimiter="\t") if " " not in row["query"]]


def derive_queries(docs: dict[str, bytes], sizes: tuple[int, ...] = (1, 4, 16), seed: int = 7) -> list[Query]:
    """1-, 4- and 16-keyword queries of rare (in 1-2 documents) and common words, English and Chinese.

    Words come from the scope's own text (document frequency of English words
    and of Chinese 2- and 4-character strings), the corpus's QUERIES.tsv words
    first when they fit the class; deterministic for a given scope.
    """
    folded = [fold(d.decode("utf-8", "replace")) for d in docs.values()]
    df_en: Counter[str] = Counter()
    df_zh2: Counter[str] = Counter()
    df_zh4: Counter[str] = Counter()
    for text in folded:
        df_en.update(set(_EN_TOKEN.findall(text)))
        runs = _CJK_RUN.findall(text)
        df_zh2.update({r[i:i + 2] for r in runs for i in range(len(r) - 1)})
        df_zh4.update({r[i:i + 4] for r in runs for i in range(len(r) - 3)})

    def literal_df(word: str) -> int:
        k = fold(word)
        return sum(k in t for t in folded)

    rng = random.Random(seed)
    need = max(sizes)
    seeds = _seed_words()

    def pick(pool: list[str], seeded: list[str]) -> list[str]:
        chosen = list(dict.fromkeys(seeded))
        rest = [w for w in pool if w not in chosen]
        rng.shuffle(rest)
        return (chosen + rest)[:need]

    def is_zh(w: str) -> bool:
        return bool(_CJK_RUN.fullmatch(w))

    seed_rare: dict[str, list[str]] = {"en": [], "zh": []}
    seed_common: dict[str, list[str]] = {"en": [], "zh": []}
    for w in seeds:
        d = literal_df(w)
        lang = "zh" if is_zh(w) else "en"
        if 1 <= d <= 2:
            seed_rare[lang].append(w)
        elif d >= max(8, len(docs) // 20):
            seed_common[lang].append(w)

    rare_en = sorted(w for w, c in df_en.items() if c == 1 and len(w) >= 8)
    rare_zh = sorted(w for w, c in df_zh4.items() if c == 1)
    common_en = [w for w, _ in sorted(df_en.items(), key=lambda kv: (-kv[1], kv[0]))[8:8 + 4 * need]]
    common_zh = [w for w, _ in sorted(df_zh2.items(), key=lambda kv: (-kv[1], kv[0]))[4:4 + 4 * need]]
    # Rare by token frequency may still be a substring elsewhere: keep those literally in <= 2 documents.
    rng_sample = random.Random(seed + 1)
    rare_en = [w for w in rng_sample.sample(rare_en, min(len(rare_en), 4 * need)) if literal_df(w) <= 2]
    rare_zh = [w for w in rng_sample.sample(rare_zh, min(len(rare_zh), 4 * need)) if literal_df(w) <= 2]
    pools = {
        ("en", "rare"): pick(rare_en, seed_rare["en"]),
        ("zh", "rare"): pick(rare_zh, seed_rare["zh"]),
        ("en", "common"): pick(common_en, seed_common["en"]),
        ("zh", "common"): pick(common_zh, seed_common["zh"]),
    }
    queries = []
    for (lang, freq), pool in pools.items():
        for k in sizes:
            words = _fit_query(pool[:k])
            if words:
                queries.append(Query(f"{lang}-{freq}-{len(words)}", lang, freq, words))
    return queries


def _fit_query(words: list[str]) -> tuple[str, ...]:
    """Drop keywords from the end until the query fits the 512-byte limit."""
    while words and len(" ".join(words).encode()) > 512:
        words = words[:-1]
    return tuple(words)
