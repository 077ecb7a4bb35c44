"""Fake but format-valid credentials, assembled at run time (DESIGN.md §16's rule families).

Nothing here is a literal credential, so the repository trips neither push
protection nor the Hub's own scan: every value is built from a seeded random
generator when :func:`samples` is called.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Sample:
    """One credential in a line of a note: the ``rule`` expected to find it, the ``line`` and the ``secret``."""

    rule: str
    line: str
    secret: str

    @property
    def middle(self) -> str:
        """The distinctive middle third of the secret (a leak of part of it shows here too)."""
        n = len(self.secret)
        return self.secret[n // 3: 2 * n // 3]


def assert_no_leak(sample: Sample, *texts: str | bytes) -> None:
    """None of ``texts`` (bytes read as UTF-8) holds ``sample``'s secret or its distinctive middle; a failure
    names the rule and the line."""
    for t in texts:
        shown = t.decode("utf-8", "replace") if isinstance(t, bytes) else t
        assert sample.secret not in shown, f"{sample.rule}: the secret leaked ({sample.line})"
        assert sample.middle not in shown, f"{sample.rule}: part of the secret leaked ({sample.line})"


def _rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def samples(seed: int = 14) -> list[Sample]:
    """One :class:`Sample` per rule family, fresh values for each ``seed``."""
    r = random.Random(seed)
    upper = string.ascii_uppercase + string.digits
    b64 = ALNUM + "+/"
    aws_id = "AKIA" + _rand(r, 16, upper)
    aws_secret = _rand(r, 40, b64)
    jwt_head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).decode().rstrip("=")
    jwt_body = base64.urlsafe_b64encode(json.dumps({"sub": _rand(r, 12)}).encode()).decode().rstrip("=")
    jwt = f"{jwt_head}.{jwt_body}.{_rand(r, 43, ALNUM + '-_')}"
    key_material = _rand(r, 64, b64)
    gcp = _rand(r, 40, "0123456789abcdef")
    out = [
        Sample("github-token", "the deploy token is {}", "gh" + "p_" + _rand(r, 36)),
        Sample("github-fine-grained-token", "ci uses {}", "github" + "_pat_11" + _rand(r, 20) + "_" + _rand(r, 59)),
        Sample("gitlab-token", "gitlab: {}", "gl" + "pat-" + _rand(r, 20)),
        Sample("aws-access-key", "aws id {}", aws_id),
        Sample("aws-secret-access-key", "aws_secret_access_key = {}", aws_secret),
        Sample("slack-token", "slack bot {}", "xo" + "xb-" + _rand(r, 12, string.digits) + "-"
               + _rand(r, 12, string.digits) + "-" + _rand(r, 24, string.ascii_lowercase + string.digits)),
        Sample("stripe-key", "stripe {}", "sk" + "_live_" + _rand(r, 24)),
        Sample("openai-key", "OPENAI_API_KEY {}", "sk-" + _rand(r, 20) + "T3Blbk" + "FJ" + _rand(r, 20)),
        Sample("openai-project-key", "openai {}", "sk-" + "proj-" + _rand(r, 48, ALNUM + "_-")),
        Sample("anthropic-key", "anthropic {}", "sk-" + "ant-api03-" + _rand(r, 93, ALNUM + "_-") + "AA"),
        Sample("npm-access-token", "npm publish token {}", "np" + "m_" + _rand(r, 36)),
        Sample("pypi-token", "pypi upload {}", "pypi-" + "AgEIcHlwaS5vcmc" + _rand(r, 80, ALNUM + "-_")),
        Sample("jwt", "session cookie {}", jwt),
        Sample("url-password", "db is postgres://app:{}@db.internal:5432/app", _rand(r, 18)),
        Sample("keyword-assignment", "password = {}", _rand(r, 10) + "7#" + _rand(r, 8)),
        Sample("azure-connection-string", "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;"
               "SharedAccessKey={}", _rand(r, 43, b64) + "="),
        Sample("gcp-service-account", '{{"type": "service_account", "private_key_id": "{}"}}', gcp),
        Sample("private-key", "-----BEGIN RSA " + "PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
               key_material),
    ]
    return [Sample(s.rule, s.line.format(s.secret), s.secret) for s in out]


def note_forms(seed: int = 15) -> list[Sample]:
    """The shapes a model writes a credential in a Markdown note (DESIGN.md §16.2): a value with more text after
    it on the line, Markdown labels and tables, spaced key names, ``*_TOKEN=``, the Hub's own tokens, URL
    passwords with ``%XX``/``$`` or no user, ``PGPASSWORD=``, ``curl -u``, ``Authorization``."""
    r = random.Random(seed)
    pw = _rand(r, 9) + "7" + _rand(r, 7)
    aws = _rand(r, 19, ALNUM + "+") + "/" + _rand(r, 20, ALNUM + "+")
    opaque = _rand(r, 30) + "4"
    amux = "am" + "ux_" + _rand(r, 12, "0123456789abcdef") + "_" + _rand(r, 43, ALNUM + "-_")
    basic = base64.b64encode(f"admin:{pw}".encode()).decode()
    out = [
        Sample("keyword-assignment", "password: {} (prod)", pw),
        Sample("keyword-assignment", "DB_PASSWORD={} psql -h db", pw),
        Sample("keyword-assignment", "- staging: password={}, user=admin", pw),
        Sample("keyword-assignment", "password: {}  # rotated in May", pw),
        Sample("keyword-assignment", "The password={} works for both", pw),
        Sample("keyword-assignment", "**Password:** {}", pw),
        Sample("keyword-assignment", "**password**: {}", pw),
        Sample("keyword-assignment", "| password | {} |", pw),
        Sample("keyword-assignment", "api key: {}", opaque),
        Sample("keyword-assignment", "GITHUB_TOKEN={}", opaque),
        Sample("keyword-assignment", "auth_token: {}", opaque),
        Sample("keyword-assignment", "PGPASSWORD={} psql", pw),
        Sample("keyword-assignment", "pass: {}", pw),
        Sample("aws-secret-access-key", "AWS secret access key: {}", aws),
        Sample("aws-secret-access-key", "- **AWS secret access key**: {}", aws),
        Sample("amux-token", '{{"token": "{}"}}', amux),
        Sample("amux-token", "AMUX_TOKEN={}", amux),
        Sample("url-password", "postgres://admin:{}@db/app", pw[:6] + "%40" + pw[6:]),
        Sample("url-password", "postgres://admin:{}@db/app", pw[:6] + "$" + pw[6:]),
        Sample("url-password", "redis://:{}@cache:6379", pw),
        Sample("curl-user", "curl -u admin:{} https://api.internal/v1", pw),
        Sample("authorization", "Authorization: Basic {}", basic),
        Sample("authorization", "Authorization: Bearer {}", opaque),
        Sample("cli-password", "mysql --password {} -h db", pw),
        Sample("yaml-block-scalar", "password: |\n  {}", pw),
    ]
    return [Sample(s.rule, s.line.format(s.secret), s.secret) for s in out]


def url_password_forms(seed: int = 16) -> list[Sample]:
    """Connection strings pasted unescaped (DESIGN.md §16.1): a password holding ``#``, ``/``, ``?``, a raw ``%``
    (not followed by two hex digits), brackets or a raw ``@`` (the password ends at the last ``@``), which a URL
    parser would take for the end of the password."""
    r = random.Random(seed)

    def pw(reserved: str) -> str:
        body = _rand(r, 15)
        return body[:3] + reserved + body[3:]

    out = [
        Sample("url-password", "postgres://app:{}@db.internal/app", pw("#")),
        Sample("url-password", "redis://ops:{}@cache.internal:6379/0", pw("/")),
        Sample("url-password", "amqp://svc:{}@mq.internal:5672/", pw("?")),
        Sample("url-password", "DATABASE_URL=postgres://app:{}@db/app", pw("%q")),
        Sample("url-password", "mongodb://root:{}@mongo:27017/admin", pw("[") + "]"),
        Sample("url-password", "- prod db: `postgres://app:{}@db.internal:5432/app` (read-only)", pw("#/?")),
        Sample("url-password", "conn mysql://root:{}@db/app", pw("@") + "!"),
        Sample("url-password", "mysql://root:{}@db.internal/app", pw("@")),
    ]
    return [Sample(s.rule, s.line.format(s.secret), s.secret) for s in out]


REFERENCES: tuple[str, ...] = (
    "api_key: 1Password/Engineering/OpenAI-2024",
    "DB_PASSWORD: vault/kv/prod/db2024",
    "db_password = vault:secret/data/prod#pw2",
    "secret: aws-secretsmanager/prod/db/creds2024",
    "password: keychain-item-prod-db-2024",
    "password: see-1password-item-42",
    "secret_name: prod-db-credentials-v2",
    "secretRef: gcp-sm-prod-api-key-v3",
    "secret_key: env:DJANGO_SECRET_KEY_2024",
    "password_file: /run/secrets/db_password_2024",
    "max_tokens: 4096000000000000000000",
    "Authorization: Bearer $DEPLOY_TOKEN",
    "curl -u $API_USER:$API_PASSWORD https://api.internal",
    "postgres://app:${DB_PASSWORD}@db/app",
)
"""Notes that say where a credential lives (what the Hub asks agents to write), never refused (DESIGN.md §16.2)."""
