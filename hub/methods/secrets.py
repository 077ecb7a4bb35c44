"""Credential detection for memory writes and for ``scan``: the rules and the scan (DESIGN.md §16).

:func:`find_secrets` takes a document's UTF-8 bytes and returns the
credentials in it as :class:`Finding` s (rule name, 1-based line, redacted
preview, SHA-256 of the exact value for ``memory.secret_allow``).  The rules
are those of Yelp's ``detect-secrets`` (its plugin classes' own ``denylist``
patterns and filters, called directly: no baseline, no network verification)
for AWS, Azure storage, URLs with a password, GitHub,
GitLab, Slack, Stripe, OpenAI, npm, PyPI, private keys and JWTs, plus the
few it lacks, each a named rule here: Anthropic keys, GitHub fine-grained
tokens, OpenAI project keys, bare npm tokens, unquoted AWS secret access
keys, GCP service-account keys, Azure connection-string keys, the Hub's own
``amux_`` tokens, ``curl -u`` and ``Authorization: Basic|Bearer``.
Keyword assignments (``password=``, ``secret:``, ``*_TOKEN=``, also as
Markdown labels, table rows and spaced key names) count only when the first
token of the value is high-entropy, not dismissed by ``detect-secrets``'
heuristic filters (templates, ``$VARS``, UUIDs, sequences) and no reference
to where a credential lives (:func:`is_reference`, ``secret_name:``), so
prose about passwords and notes saying where one is never trip it.
:func:`scrub` redacts the credentials in a text (a path, an error message).

Cost: one Aho-Corasick pass (:data:`LITERAL_SEARCH`) over the
ASCII-lowercased bytes finds the lines holding a rule's literal (``ghp_``,
``akia``, ``://``, ``key``...); only those lines are decoded, and on each
only the rules whose literals it holds run, so a document without a
candidate costs one pass of a few µs per KiB.  ``detect-secrets`` is
imported on the first candidate line, not at Hub start.  Everything here is
pure and blocking (called from the write's worker thread); nothing raises.
A secret value never leaves this module except as its SHA-256 and the
redacted :attr:`Finding.preview`.

Thresholds (DESIGN.md §16.1, §16.6): a keyword-assigned value counts only
with :data:`KEYWORD_MIN_LENGTH` (12) characters or more, letters and digits,
and :data:`KEYWORD_MIN_ENTROPY` (3.5) bits of entropy per character (a
``token``-assigned one: :data:`TOKEN_MIN_LENGTH` (20) and
:data:`TOKEN_MIN_ENTROPY` (4.0)).  A URL's password runs from ``user:`` to the
token's last ``@``, not past whitespace or another ``://`` and at most
:data:`URL_PASSWORD_CHARS` (256) characters, since connection strings are
pasted unescaped (``#``, ``/``, ``?``, a raw ``%``).  ``detect-secrets``'
backtracking keyword patterns read only lines of up to
:data:`ANALYZE_MAX_CHARS` (1,000) characters; longer ones get a linear
pattern of the same keywords.  At most :data:`MAX_FINDINGS` (20) findings a
document are reported.

Figures (``bench/results/notes.md``, "Secret scan"): on a corpus of 1,259 real
notes (11 MB) the rules refuse none (``tests/test_secrets_corpus.py`` upserts
every one through a Hub), where stock ``detect-secrets`` flags 22; the check
costs 7-19 µs per KiB there (6 µs for a 2 KiB note) against about 22 ms per
KiB for stock ``detect-secrets``; bench row s (write throughput with the check
on over off, goal 0.9 or more) gave 0.84-1.13 over four runs, the spread being
the machine's load.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import ahocorasick_rs

if TYPE_CHECKING:
    from amux_memory.protocol.errors import HubError

MAX_FINDINGS: Final = 20
"""At most this many findings are reported per document (the answer stays small)."""

KEYWORD_MIN_LENGTH: Final = 12
"""A keyword-assigned value shorter than this (characters) is never a finding."""

URL_PASSWORD_CHARS: Final = 256
"""Longest URL password looked at (characters): the bound of :data:`URL_PASSWORD`'s runs and of the search for
its last ``@``."""

KEYWORD_MIN_ENTROPY: Final = 3.5
"""Shannon entropy (bits per character) a keyword-assigned value needs to count as a credential."""


@dataclass(frozen=True)
class Finding:
    """One credential found: ``rule`` name, 1-based ``line``, redacted ``preview``, ``sha256`` of the value."""

    rule: str
    line: int
    preview: str
    sha256: str

    def wire(self) -> dict[str, Any]:
        """The entry of ``data.findings`` / ``secret_findings``: ``{rule, line, preview}`` (never the value)."""
        return {"rule": self.rule, "line": self.line, "preview": self.preview}


def redact(value: str) -> str:
    """A preview that identifies a credential without revealing it: ``ghp_…9f2c``.

    Shows the first 4 and last 4 characters of a value of 24 characters or
    more, the first 2 and last 2 of one of 12-23, and only ``…`` for a
    shorter one (so at most a third of any value is shown).
    """
    if len(value) >= 24:
        return f"{value[:4]}…{value[-4:]}"
    if len(value) >= 12:
        return f"{value[:2]}…{value[-2:]}"
    return "…"


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for ``""``)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in (value.count(ch) for ch in set(value)))


Finder = Callable[[str, str], Iterable[str]]
"""A rule's matcher: ``(line, the text after it)`` → the raw secret values in the line."""

PLACEHOLDER_MARKS: Final = ("...", "…", "xxxx", "example", "abc123", "your_", "your-", "changeme", "<", "${")
"""Substrings (lowercase) that make a value a documented placeholder, not a credential."""


def is_placeholder(value: str) -> bool:
    """True for a value that documentation uses as a stand-in: ``AKIAIOSFODNN7EXAMPLE``, ``wh_abc123...``,
    ``ghp_XXXX…``, ``<your-token>`` (a marker of :data:`PLACEHOLDER_MARKS`, or fewer than 6 distinct characters)."""
    low = value.lower()
    return any(mark in low for mark in PLACEHOLDER_MARKS) or len(set(low)) < 6


def _value(m: re.Match[str], whole: bool = False) -> str:
    """The secret in a match: all of it when ``whole``, else its longest group (e.g. a URL's password) if any."""
    groups = [g for g in m.groups() if g]
    return m.group(0) if whole or not groups else max(groups, key=len)


def _regexes(*patterns: str, flags: int = 0) -> Finder:
    compiled = [re.compile(p, flags) for p in patterns]

    def find(line: str, after: str) -> Iterator[str]:
        for rx in compiled:
            for m in rx.finditer(line):
                yield _value(m)

    return find


def _plugin(cls: Any, whole: bool = False) -> Finder:
    """A ``detect-secrets`` regex plugin's own ``denylist`` patterns.

    ``whole``: the value is the whole match (the plugin's groups only mark a prefix, e.g. ``ghp``)."""
    denylist = list(cls.denylist)

    def find(line: str, after: str) -> Iterator[str]:
        for rx in denylist:
            for m in rx.finditer(line):
                yield _value(m, whole)

    return find


KEY_MATERIAL: Final = re.compile(r"(?:\\n|\s|^)([A-Za-z0-9+/]{40,}={0,2})")
"""Base64 key material after a private-key header (on its line, JSON ``\\n`` escaped, or on the next lines)."""


def _private_key() -> Finder:
    from detect_secrets.plugins.private_key import PrivateKeyDetector

    headers = list(PrivateKeyDetector.denylist)

    def find(line: str, after: str) -> Iterator[str]:
        for rx in headers:
            m = rx.search(line)
            if m is None:
                continue
            # A header alone is documentation ("expects -----BEGIN PRIVATE KEY-----"): a key has material.
            material = KEY_MATERIAL.search(line, m.end()) or KEY_MATERIAL.search(after[:600])
            if material is not None:
                yield material.group(1)
            return

    return find


JWT: Final = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]++=*+\.[A-Za-z0-9_-]++=*+\.?[A-Za-z0-9_.+/=-]*+")
"""A JWT: ``detect-secrets``' pattern (header, payload, signature, ``=`` only as padding) with possessive runs and
no start inside a run of token characters, so a line costs linear time (``eyJeyJ…`` and ``eyJ=eyJ=…`` do not
backtrack, and every start is tried once)."""


def _jwt() -> Finder:
    """:data:`JWT` (the whole token), checked with ``detect-secrets``' ``is_formally_valid`` (header and payload
    are base64 JSON)."""
    from detect_secrets.plugins.jwt import JwtTokenDetector

    def find(line: str, after: str) -> Iterator[str]:
        for m in JWT.finditer(line):
            token = m.group(0).rstrip(".")
            if JwtTokenDetector.is_formally_valid(".".join(token.split(".")[:2])):
                yield token

    return find


MARKUP: Final = re.compile(r"\*\*|`")
"""Markdown emphasis and code marks around a label (``**Password:**``, ```api_key```), dropped before the keyword
rules read a line."""

SPACED_KEY: Final = re.compile(
    r"(?i)\b(aws|api|auth|secret|access|private|client|service|account)[ -](?=(?:secret[ -])?(?:access[ -])?key\b)")
"""A key name written with spaces (``AWS secret access key``, ``api key``): joined with ``_`` before the keyword
rules read the line, so it reads as ``aws_secret_access_key`` / ``api_key``."""


def label_forms(line: str) -> list[str]:
    """The line as the keyword rules read it: Markdown marks dropped, spaced key names joined, and a table row
    ``| password | X |`` also read as ``password: X`` for each pair of neighbouring cells."""
    text = SPACED_KEY.sub(r"\1_", MARKUP.sub("", line))
    forms = [text]
    stripped = text.strip()
    if stripped.startswith("|") and stripped.count("|") >= 3:
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        forms.extend(f"{a}: {b}" for a, b in itertools.pairwise(cells) if a and b)
    return forms


def key_before(text: str, pos: int) -> str:
    """The key name just before ``text[pos:]``, an assigned value: ``secret_name`` in ``secret_name: X``."""
    end = pos
    while end > 0 and text[end - 1] in " \t:=|\"'`*]":
        end -= 1
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return text[start:end]


REFERENCE_KEY_ENDINGS: Final = ("name", "ref", "file", "path")
"""A key ending so (``secret_name``, ``secretRef``, ``password_file``) names where a credential is, not the
credential: its value is never a finding."""

WORDY_CHUNK: Final = re.compile(r"\d*[A-Za-z]+\d*|\d+")
"""A piece of a reference: a word with digits only at its ends (``1Password``, ``db2024``, ``v2``) or a number."""

CASE_HUMP: Final = re.compile(r"[a-z][A-Z]")
"""A lower-to-upper case change: a word has at most one (``OpenAI``), random letters several (``QrDpzSfq``)."""


def is_word(piece: str) -> bool:
    """True for a piece of a reference (:data:`WORDY_CHUNK` with at most one :data:`CASE_HUMP`)."""
    return WORDY_CHUNK.fullmatch(piece) is not None and len(CASE_HUMP.findall(piece)) <= 1


def is_reference(value: str) -> bool:
    """True for a value that names where a credential lives rather than being one: a path or URI of words
    (``vault/kv/prod/db2024``, ``env:DJANGO_SECRET_KEY``, ``1Password/Engineering/OpenAI-2024``) or three or more
    ``-``/``_``/``.``-joined words (``prod-db-credentials-v2``).  Random material mixes letters and digits inside
    its pieces (``K7MDENG/bPx9…``), so it is not a reference."""
    pieces = [c for c in re.split(r"[/:#@._-]+", value) if c]
    if not pieces or not all(is_word(c) for c in pieces):
        return False
    return len(pieces) >= 3 or (len(pieces) >= 2 and any(c in value for c in "/:"))


def first_token(raw: str) -> str:
    """The value an assignment gives: the text after the ``=``/``:`` up to whitespace, ``,``, ``)`` or ``|``,
    without quotes and cut at ``&`` (``password: X (prod)`` → ``X``)."""
    value = raw.strip().lstrip("`'\"*")
    value = re.split(r"[\s,)|]", value, maxsplit=1)[0]
    return value.split("&")[0].strip("`'\",;*")


def is_credential_value(value: str, min_length: int = 12, min_entropy: float = 3.5) -> bool:
    """True for an assigned value that looks like a credential: one token of ``min_length`` characters or more
    with a digit and ``min_entropy`` bits per character, that ``detect-secrets``' heuristic filters do not
    dismiss (templates, ``$VARS``, UUIDs, sequences) and that is no reference (:func:`is_reference`)."""
    from detect_secrets.filters import heuristic

    return not (len(value) < min_length or entropy(value) < min_entropy or heuristic.is_templated_secret(value)
                or heuristic.is_prefixed_with_dollar_sign(value) or heuristic.is_sequential_string(value)
                or heuristic.is_potential_uuid(value) or heuristic.is_not_alphanumeric_string(value)
                or not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value)
                or "://" in value or any(c in value for c in "()[]{}^\\") or is_reference(value))


def is_encoded_text(value: str) -> bool:
    """True when a ``.``-separated piece of ``value`` of 16 characters or more is base64 of printable ASCII
    (``YTUwMjcy…`` is an encoded UUID, ``MTIzNDU2…`` an encoded ``1234567890``): a documented example id, not
    the random bytes of a token."""
    import base64
    import binascii

    for piece in value.split("."):
        if len(piece) < 16:
            continue
        try:
            raw = base64.b64decode(piece + "=" * (-len(piece) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            continue
        if raw and all(32 <= b < 127 or b in (9, 10, 13) for b in raw):
            return True
    return False


EXTRA_ASSIGNMENT: Final = re.compile(r"(?i)(?<![A-Za-z0-9])(token|pass|secret)[\]'\"]{0,2}\s*(?::=|[:=]{1,2})\s*(\S+)")
"""Assignments ``detect-secrets``' keyword list lacks: ``GITHUB_TOKEN=X``, ``token: X``, ``pass: X`` (and
``secret`` again, so its key is known).  The keyword ends the key (its start is found by :func:`key_before`):
a match starts only at a keyword, so a long line costs linear time."""

TOKEN_MIN_LENGTH: Final = 20
"""A ``token``-assigned value shorter than this (characters) is never a finding (``max_tokens: 4096``)."""

TOKEN_MIN_ENTROPY: Final = 4.0
"""Bits per character a ``token``-assigned value needs: only random-looking values count."""


ANALYZE_MAX_CHARS: Final = 1000
"""Longest line (characters) given to ``detect-secrets``' keyword patterns, whose lookaheads scan to the end of
the line at every keyword (quadratic: 60 KB of ``pwd:::`` took 3 s); a longer line is read by
:func:`long_line_assignment` instead, which is linear."""


@functools.cache
def long_line_assignment() -> re.Pattern[str]:
    """``detect-secrets``' keywords (its ``DENYLIST``) and a bounded suffix, then ``=``/``:`` and the value: the
    keyword rule's reading of a line longer than :data:`ANALYZE_MAX_CHARS` (a match starts only at a keyword and
    every run is bounded or possessive)."""
    from detect_secrets.plugins.keyword import DENYLIST

    return re.compile(rf"(?i)(?:{'|'.join(DENYLIST)})\w{{0,40}}+[\]'\"]{{0,2}}\s*(?::=|[:=]{{1,2}})\s*(\S+)")


def _keyword() -> Finder:
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector

    plugin = KeywordDetector()
    long_line = long_line_assignment()

    def assigned(form: str) -> Iterator[tuple[str, int]]:
        """``(raw value, its position)`` of each keyword assignment in ``form``."""
        if len(form) > ANALYZE_MAX_CHARS:
            yield from ((m.group(1), m.start(1)) for m in long_line.finditer(form))
            return
        for raw in plugin.analyze_string(form, denylist_regex_to_group=CONFIG_DENYLIST_REGEX_TO_GROUP):
            yield raw, form.find(raw.strip()[:8])

    def check(form: str, raw: str, pos: int, token: bool = False) -> str | None:
        if pos >= 0 and key_before(form, pos).lower().endswith(REFERENCE_KEY_ENDINGS):
            return None
        value = first_token(raw)
        ok = (is_credential_value(value, TOKEN_MIN_LENGTH, TOKEN_MIN_ENTROPY) and not is_encoded_text(value)
              if token else is_credential_value(value))
        return value if ok else None

    def find(line: str, after: str) -> Iterator[str]:
        for form in label_forms(line):
            values = [check(form, raw, pos) for raw, pos in assigned(form)]
            values += [check(form, m.group(2), m.start(2), token=m.group(1).lower() == "token")
                       for m in EXTRA_ASSIGNMENT.finditer(form)]
            # the line's shape (``secret = get_secret()``), costly on long lines: only once a value counts
            if any(values) and not heuristic.is_indirect_reference(form):
                yield from (v for v in values if v)

    return find


CLI_PASSWORD: Final = re.compile(r"(?i)(?<!\S)--(?:password|passwd|token|api-key|secret)[ =]['\"]?([^\s'\"]+)")
"""A credential given as a command-line option: ``--password X``, ``--token=X``."""

BLOCK_SCALAR: Final = re.compile(
    r"(?i)(?:password|passwd|pwd|secret|token|api_?key|private_?key)\w{0,40}+['\"]?\s*:\s*[|>][-+]?\s*$")
"""A YAML key whose value is a block scalar on the next line (``password: |``)."""


def _cli_password() -> Finder:
    """:data:`CLI_PASSWORD`, the value checked as a keyword-assigned one (:func:`is_credential_value`)."""

    def find(line: str, after: str) -> Iterator[str]:
        for m in CLI_PASSWORD.finditer(line):
            if is_credential_value(first_token(m.group(1))):
                yield first_token(m.group(1))

    return find


def _block_scalar() -> Finder:
    """:data:`BLOCK_SCALAR`: the next line's text, when it is one token that looks like a credential."""

    def find(line: str, after: str) -> Iterator[str]:
        if BLOCK_SCALAR.search(line):
            following = after.split("\n", 1)[0].strip()
            if following and not any(c.isspace() for c in following) and is_credential_value(following):
                yield following

    return find


CLI_PASSWORD_TAIL: Final = re.compile(rb"(?:word|wd)?[ =]['\"]?[^\s'\"]{12}")
"""What must follow ``--pass`` for the option rule to look at its line."""

BLOCK_SCALAR_TAIL: Final = re.compile(rb"\w{0,40}+['\"]?[ \t]*:[ \t]*[|>][-+]?[ \t]*\r?$", re.MULTILINE)
"""What must follow a keyword for the block-scalar rule to look at its line: ``: |`` ending the line."""


def _aws_secret() -> Finder:
    """An AWS secret access key assigned to its name, also in a Markdown label or with spaces
    (``- **AWS secret access key**: X``)."""
    rx = re.compile(r"aws_?secret_?(?:access_?)?key\w*['\"]?\s*[:=]\s*['\"]?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
                    re.IGNORECASE)

    def find(line: str, after: str) -> Iterator[str]:
        for form in label_forms(line):
            for m in rx.finditer(form):
                yield m.group(1)

    return find


URL_PASSWORD: Final = re.compile(r"://([^\s:/?#@\[\]]{0,256}+):([^\s@]{1,256}+)@")
"""A URL's ``user:password@``: the user may be empty (``redis://:PW@cache``); the password is everything up to the
``@``, so one pasted unescaped keeps its reserved characters (``#``, ``/``, ``?``, ``[``, a raw ``%``) as well
as ``%XX`` and ``$``.  Both runs are bounded and possessive (linear on a line, DESIGN.md §16.6)."""

WHITESPACE: Final = re.compile(r"\s")
"""Where a URL's token ends: its password ends at the token's LAST ``@`` within :data:`URL_PASSWORD_CHARS` (and
before another ``://``), so one holding a raw ``@`` (``mysql://root:P@ssw0rd!@db``) is found whole (DESIGN.md
§16.1); the token's end is found once per token and the ``@`` by a bounded ``rfind``, so a line is still checked
in linear time."""

ENV_REFERENCE: Final = re.compile(r"%\w+%")
"""A whole password that is a Windows environment variable (``%DB_PASSWORD%``): a placeholder."""

PORT_AND_PATH: Final = re.compile(r"\d{1,5}[/?#]")
"""A "password" that starts as a port and a path (``https://host:8080/pkg@1.2``): a URL with an ``@`` later on,
no credential."""

URL_PLACEHOLDERS: Final = frozenset({"password", "pass", "passwd", "pwd", "secret", "token", "changeme", "example",
                                     "xxx", "pw"})
"""Whole URL passwords (lowercase) that documentation writes for one (``postgres://user:password@db``)."""


def _basic_auth() -> Finder:
    """:data:`URL_PASSWORD` (``detect-secrets``' ``BasicAuthDetector`` pattern, widened to an empty user and to
    any character but whitespace in the password, up to the token's last ``@``), without documented placeholders
    (``password``, ``${PW}``, ``$PW``, ``<pw>``, ``%PW%``) and without a port and path mistaken for one.
    Each ``://`` of the line starts a match, so a URL skipped as a port and path does not hide one after it."""

    def find(line: str, after: str) -> Iterator[str]:
        start = 0
        token_end = -1  # where the whitespace-free token of the last match ends (found once per token)
        while (m := URL_PASSWORD.search(line, start)) is not None:
            start = m.start() + 3
            begin = m.start(2)
            if begin >= token_end:
                space = WHITESPACE.search(line, begin)
                token_end = space.start() if space is not None else len(line)
            end = min(token_end, begin + URL_PASSWORD_CHARS + 1)
            nested = line.find("://", m.end(2), end)  # a second URL on the token keeps its own password
            value = line[begin:max(m.end(2), line.rfind("@", begin, end if nested < 0 else nested))]
            low = value.lower()
            if (low in URL_PLACEHOLDERS or any(c in value for c in "<>*{}()") or value.startswith("$")
                    or ENV_REFERENCE.fullmatch(value) or PORT_AND_PATH.match(value)
                    or low.startswith(("your", "my", "user"))):
                continue  # a documented placeholder or a port and path, not a credential
            yield value

    return find


CURL_USER: Final = re.compile(r"(?<!\S)(?:-u|--user)[ =]?['\"]?([^\s:'\"]+):([^\s'\"]+)")
"""``curl -u user:password`` (and ``--user``)."""

AUTHORIZATION: Final = re.compile(r"(?i)\b(basic|bearer)\s+([A-Za-z0-9+/=._~-]{16,})")
"""An ``Authorization: Basic|Bearer`` credential."""

AMUX_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9])amux_[0-9a-f]{12}_[A-Za-z0-9_-]{32,}")
"""The Hub's own bearer tokens, ``amux_<12 hex id>_<secret>`` (``hub/access/registry.py``)."""


def _curl_user() -> Finder:
    def find(line: str, after: str) -> Iterator[str]:
        for m in CURL_USER.finditer(line):
            user, value = m.groups()
            if user[0] not in "$%<{" and value[0] not in "$%<{" and "{" not in value and len(value) >= 6:
                yield value

    return find


def _authorization() -> Finder:
    """``Basic`` values that decode to ``user:password``; ``Bearer`` values that look random
    (:func:`is_credential_value` with the token thresholds)."""
    import base64
    import binascii

    def find(line: str, after: str) -> Iterator[str]:
        for m in AUTHORIZATION.finditer(line):
            kind, value = m.group(1).lower(), m.group(2)
            if kind == "basic":
                try:
                    decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
                except (binascii.Error, ValueError):
                    continue
                if b":" in decoded:
                    yield value
            elif is_credential_value(value, TOKEN_MIN_LENGTH, TOKEN_MIN_ENTROPY) and value[:3] != "eyJ":
                yield value

    return find


KEYWORD_TAIL: Final = re.compile(rb"\w{0,40}+[*`'\"\]]{0,4}\s{0,8}+[:=|]{1,3}+[*`'\"\s]{0,6}+[^\s'\"`*|]{12}")
"""What must follow a keyword literal (``password``, ``secret_key``) for the keyword rule to look at its line:
an assignment (``=``, ``:`` or a table cell ``|``, with Markdown marks around it) of a token of at
least :data:`KEYWORD_MIN_LENGTH` characters (matched at the literal's end, in the ASCII-lowercased bytes; every
run is bounded and possessive, so each hit of a literal costs a bounded number of steps)."""

URL_PASSWORD_TAIL: Final = re.compile(rb"[^\s:/?#@\[\]]{0,256}+:[^\s@]{1,256}+@")
"""What must follow ``://`` for the URL rule to look at its line: ``user:password@`` (:data:`URL_PASSWORD`)."""


CURL_USER_TAIL: Final = re.compile(rb"(?:ser)?[ =]?['\"]?[^\s:'\"]{1,64}+:[^\s'\"]{6}")
"""What must follow ``-u`` for the ``curl -u user:password`` rule to look at its line."""

AUTHORIZATION_TAIL: Final = re.compile(rb"\s*[a-z0-9+/=._~-]{16}")
"""What must follow ``basic `` / ``bearer `` for the ``Authorization`` rule to look at its line."""


@dataclass(frozen=True)
class Rule:
    """One named rule: the lowercase ``literals`` a line must hold for it to run, an optional ``tail`` regex
    that must match right after the literal (in the ASCII-lowercased bytes), and its ``finder``."""

    name: str
    literals: tuple[str, ...]
    finder: Finder
    tail: re.Pattern[bytes] | None = None


@functools.cache
def rules() -> tuple[Rule, ...]:
    """The named rules, built once (this imports ``detect-secrets``), in report order (DESIGN.md §16)."""
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.stripe import StripeDetector

    gitlab = ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-",
              "gr1348941")
    return (
        Rule("private-key", ("private key", "putty-user-key"), _private_key()),
        Rule("gcp-service-account", ('"private_key',),
             _regexes(r'"private_key(?:_id)?"\s*:\s*"((?:-----BEGIN|[0-9a-f]{40})[^"]*)"')),
        Rule("aws-access-key", ("akia", "asia", "abia", "acca", "a3t", "aws"), _plugin(AWSKeyDetector)),
        Rule("aws-secret-access-key", ("aws",), _aws_secret()),
        Rule("azure-storage-key", ("accountkey=",), _plugin(AzureStorageKeyDetector)),
        Rule("azure-connection-string", ("sharedaccesskey=", "accountkey=", "sig="), _regexes(
            r"(?:SharedAccessKey|AccountKey)=([A-Za-z0-9+/]{40,}={0,2})",
            r"[?&]sig=([A-Za-z0-9%+/]{40,}(?:=|%3D){0,2})",
            flags=re.IGNORECASE)),
        Rule("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _plugin(GitHubTokenDetector, whole=True)),
        Rule("github-fine-grained-token", ("github_pat_",), _regexes(r"github_pat_[A-Za-z0-9_]{60,}")),
        Rule("gitlab-token", gitlab, _plugin(GitLabTokenDetector, whole=True)),
        Rule("slack-token", ("xox", "hooks.slack.com"), _plugin(SlackDetector)),
        Rule("stripe-key", ("k_live_",), _plugin(StripeDetector)),
        Rule("anthropic-key", ("sk-ant-",), _regexes(r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{32,}")),
        Rule("openai-key", ("t3blbkfj",), _plugin(OpenAIDetector)),
        Rule("openai-project-key", ("sk-proj-", "sk-svcacct-", "sk-admin-"),
             _regexes(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}")),
        Rule("npm-token", ("_authtoken",), _plugin(NpmDetector)),
        Rule("npm-access-token", ("npm_",), _regexes(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
        Rule("pypi-token", ("pypi-ag",), _plugin(PypiTokenDetector)),
        Rule("amux-token", ("amux_",), _regexes(AMUX_TOKEN.pattern)),
        Rule("jwt", ("eyj",), _jwt()),
        Rule("url-password", ("://",), _basic_auth(), URL_PASSWORD_TAIL),
        Rule("curl-user", ("-u",), _curl_user(), CURL_USER_TAIL),
        Rule("authorization", ("basic ", "bearer "), _authorization(), AUTHORIZATION_TAIL),
        Rule("keyword-assignment", ("key", "pass", "pwd", "secret", "contrase", "token"), _keyword(), KEYWORD_TAIL),
        Rule("cli-password", ("--pass", "--token", "--api-key", "--secret"), _cli_password(), CLI_PASSWORD_TAIL),
        Rule("yaml-block-scalar", ("pass", "pwd", "secret", "token", "key"), _block_scalar(), BLOCK_SCALAR_TAIL),
    )


LITERALS: Final = tuple(dict.fromkeys([
    "private key", "putty-user-key", '"private_key', "akia", "asia", "abia", "acca", "a3t", "aws", "accountkey=",
    "sharedaccesskey=", "sig=", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glft-",
    "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-", "gr1348941", "xox", "hooks.slack.com",
    "k_live_", "sk-ant-", "t3blbkfj", "sk-proj-", "sk-svcacct-", "sk-admin-", "_authtoken", "npm_", "pypi-ag", "eyj",
    "://", "key", "pass", "pwd", "secret", "contrase", "amux_", "-u", "basic ", "bearer ", "token", "--pass",
    "--token", "--api-key", "--secret",
]))
"""Every rule's literals (lowercase ASCII): a line holding none of them is not looked at again."""


def rule_names() -> list[str]:
    """The names of every rule, in report order (DESIGN.md §16)."""
    return [rule.name for rule in rules()]


LITERAL_SEARCH: Final = ahocorasick_rs.BytesAhoCorasick([literal.encode("utf-8") for literal in LITERALS])
""":data:`LITERALS` as one Aho-Corasick automaton, run over the ASCII-lowercased content (the first pass)."""


@functools.cache
def _rules_by_literal() -> tuple[tuple[tuple[int, re.Pattern[bytes] | None], ...], ...]:
    """For each index into :data:`LITERALS`, ``(index into rules(), its tail)`` of the rules that use it."""
    all_rules = rules()
    return tuple(tuple((i, rule.tail) for i, rule in enumerate(all_rules) if literal in rule.literals)
                 for literal in LITERALS)


def candidate_lines(content: bytes) -> Iterator[tuple[int, int, int, set[int]]]:
    """``(1-based line number, start, end, rule indexes)`` for each line where a rule's literal is, once each.

    One :data:`LITERAL_SEARCH` pass over ``content.lower()`` (ASCII-only
    lowercasing keeps byte offsets); a hit of a rule with a ``tail`` counts
    only when the tail matches right after it.  Line bounds and numbers are
    worked out only for lines with a hit that counts.
    """
    low = content.lower()
    by_literal = _rules_by_literal()
    line_no, last, begin, line_end = 1, 0, -1, -1
    wanted: set[int] = set()
    for literal, start, stop in LITERAL_SEARCH.find_matches_as_indexes(low, overlapping=True):
        hits = [i for i, tail in by_literal[literal] if tail is None or tail.match(low, stop)]
        if not hits:
            continue
        if start > line_end:
            if wanted:
                line_no += low.count(b"\n", last, begin)
                last = begin
                yield line_no, begin, line_end, wanted
            begin = low.rfind(b"\n", 0, start) + 1
            end = low.find(b"\n", start)
            line_end = len(low) if end < 0 else end
            wanted = set()
        wanted.update(hits)
    if wanted:
        yield line_no + low.count(b"\n", last, begin), begin, line_end, wanted


def found_values(content: bytes, allowed: frozenset[str] = frozenset()) -> Iterator[tuple[str, int, str, str]]:
    """``(rule name, 1-based line, value, SHA-256 hex of the value)`` for each credential in UTF-8 ``content``, in
    line order, one per value per line; the values never leave this module (:func:`find_secrets`, :func:`scrub`).

    ``allowed`` holds lowercase SHA-256 hex digests of the UTF-8 bytes of
    exact values known not to be credentials (``memory.secret_allow``); those
    are skipped, as are documented placeholders (:func:`is_placeholder`).
    Undecodable bytes are replaced before the rules see a line.
    """
    all_rules = rules()
    for line_no, begin, end, wanted in candidate_lines(content):
        text = content[begin:end].decode("utf-8", "replace")
        after = content[end + 1:end + 1025].decode("utf-8", "replace")
        seen: set[str] = set()
        for i in sorted(wanted):
            rule = all_rules[i]
            for value in rule.finder(text, after):
                if not value or any(value in s or s in value for s in seen) or is_placeholder(value):
                    continue
                seen.add(value)
                digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
                if digest not in allowed:
                    yield rule.name, line_no, value, digest


def find_secrets(content: bytes, allowed: frozenset[str] = frozenset()) -> list[Finding]:
    """The credentials in UTF-8 ``content`` (at most :data:`MAX_FINDINGS`), one per value per line, in line order
    (:func:`found_values`; ``allowed`` as there)."""
    found: list[Finding] = []
    for rule, line_no, value, digest in found_values(content, allowed):
        found.append(Finding(rule, line_no, redact(value), digest))
        if len(found) >= MAX_FINDINGS:
            break
    return found


def credentials(count: int) -> str:
    """``"1 credential"`` or ``"COUNT credentials"``: the count a refusal or a log line names (DESIGN.md §16.2;
    :func:`protocol.wording.counted`)."""
    from amux_memory.protocol.wording import counted

    return counted(count, "credential")


def refusal(path: str, findings: list[Finding], *, in_path: bool = False) -> HubError:
    """The ``secret_detected`` error of a write refused for ``findings`` (DESIGN.md §16.2): ``data`` is
    ``{path, findings}``; with ``in_path`` the findings are the path's (line 0, ``"in": "path"``) and the path is
    shown redacted.  Built here so the Hub and a project library (written in-process) refuse alike."""
    from amux_memory.protocol.errors import ErrorCode, HubError

    rules_found = ", ".join(sorted({f.rule for f in findings}))
    if in_path:
        shown = scrub(path)
        return HubError(ErrorCode.SECRET_DETECTED,
                        f"nothing was written: the path {shown} holds {credentials(len(findings))} "
                        f"({rules_found}); "
                        "choose a path without it (a path is shown in every list, log and history)",
                        {"path": shown, "findings": [{**f.wire(), "line": 0, "in": "path"} for f in findings]})
    return HubError(ErrorCode.SECRET_DETECTED,
                    f"nothing was written: {path} would hold {credentials(len(findings))} ({rules_found}); remove "
                    "them and write again, and store where the credential lives instead (e.g. 'the deploy token "
                    "is in 1Password, item X')", {"path": path, "findings": [f.wire() for f in findings]})


def scrub(text: str, source: bytes | None = None) -> str:
    """``text`` (a path, an error message) with each credential the rules find in it, or in ``source`` (the
    document the text quotes), replaced by its :func:`redact` preview, also where ``text`` quotes it lowercased:
    what may be shown of a text that holds one (DESIGN.md §16)."""
    values = {value for _, _, value, _ in found_values(text.encode("utf-8", "surrogatepass"))}
    if source is not None:
        values.update(value for _, _, value, _ in found_values(source))
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, redact(value)).replace(value.lower(), redact(value))
    return text


def scrubbed(exc: HubError, source: bytes | None = None) -> HubError:
    """``exc`` with every credential in its message, its next step and its ``data``'s strings replaced by a
    redacted preview (:func:`scrub`; ``source``: the document the error quotes, DESIGN.md §16): what the Hub
    raises instead of an error met by a write holding credentials, or an ``invalid_path`` error."""
    from amux_memory.protocol.errors import HubError

    data = {key: scrub(value, source) if isinstance(value, str) else value for key, value in exc.data.items()}
    step = scrub(exc.refined, source) if exc.refined is not None else None
    return HubError(exc.code, scrub(exc.message, source), data, next_step=step)
