"""The built-in content detectors, in priority order (earlier wins when two start at the same place).

The vendor families (`vendors.py`: AI providers, code hosts, registries, cloud platforms, payment, chat, mail,
private-key containers) and the command-line credentials sit before the generic labelled-value detectors, so a
token under a label is reported as what it is. Every secret family carries a `spec` (its documented format,
see `tokenspec`) and a `source`.

Every pattern is written to stay linear on hostile input: each starts at a literal or behind a
look-behind that forbids starting inside a run of its own first class, quantifiers are bounded or
possessive, and no two adjacent quantifiers range over overlapping classes with a suffix that can fail.
"""

from __future__ import annotations

import re

from .assignments import ASSIGNMENT_DETECTORS
from .detectors import Detector, Validator, validate_ip, validate_secret
from .entities import is_placeholder, looks_random, looks_secret
from .vendors import CLI_DETECTORS, GAP_DETECTORS, VENDOR_DETECTORS, validate_crc32_token
from .verify import card_number

GUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
# Between a label and its value: optional quotes or backslashes (JSON inside JSON), then `:` or `=`.
# Operators: `=`, `:`, `:=`, `=>`, Makefile `::=` / `:::=` / `?=`, PHP `.=`; a Go or Kotlin type may sit
# between a name and its operator (`var apiToken string = "…"`) or be annotated (Python, TypeScript, Kotlin:
# `password: str = "…"`), and a YAML tag may follow (`password: !!str …`).
_SEP = (
    r"""[\s"'\\]{0,6}(?:(?<=[ \t])(?:string|str)[ \t]{1,3})?"""
    r"""(?::[ \t]{1,3}(?:str|string|String)[ \t]{1,3}=|:{1,3}=|\?=|\.=|=>|:|=)[\s"'\\]{0,6}"""
    r"""(?:!!str[ \t]{1,3}["']?)?"""
)
_IP_CLASSES = tuple(f"{c}_{k}" for c in ("private", "public", "special") for k in ("ip", "cidr"))
_TLDS = (
    "com|net|org|io|dev|app|cloud|ai|co|us|uk|de|fr|nl|eu|jp|cn|in|au|ca|ch|se|info|biz|edu|gov|mil|"
    "internal|local|localdomain|lan|corp|intra|home|test|example|invalid|site|tech|xyz"
)
TLDS = _TLDS
"""The top-level domains host names and e-mail values are recognised under (an alternation, for regexes)."""
PUBLIC_DOCUMENT_PATH = re.compile(
    r"(?:^|/)(?:receipts?|regulatory-receipts?|invoices?)/"
    r"|/(?:document|spreadsheets|presentation|forms|drawings|file)/d/(?:e/)?$|/drive/folders/$"
)
"""The fixed part of a URL path (searched in it) after which an opaque segment is the id of a document shown to
whoever holds the link: a receipt or invoice sent to a customer (Stripe's `pay.stripe.com/receipts/payment/…`,
`…/regulatory-receipt/…`), a Google document, sheet, form or Drive file (`/document/d/<id>`). An id, not a
credential: only a vendor family (a webhook URL) says a path segment is one."""


def _validate_account(value: str, entity: str) -> str | None:
    """111111111111 and 000000000000 are documentation placeholders, not accounts."""
    return None if len(set(value)) == 1 else entity


def _validate_ipv6(value: str, entity: str) -> str | None:
    if value == "::" or value.count(":") < 2:
        return None
    return validate_ip(value, entity)


def _validate_timestamp(value: str, entity: str) -> str | None:
    month, day, hour = int(value[5:7]), int(value[8:10]), int(value[11:13])
    return entity if 1 <= month <= 12 and 1 <= day <= 31 and hour <= 24 else None


def _validate_iri(value: str, entity: str) -> str | None:
    """`cmr:` needs two characters after it that are not the punctuation ending a sentence (`see cmr:a.`)."""
    return entity if len(value.rstrip(".:")) >= 6 else None


_DIGITS4 = re.compile(r"\d{4}")


def _validate_slack(value: str, entity: str) -> str | None:
    """Every Slack token type carries a team or user number or a random part after its `xox?-` prefix; words
    joined by dashes (`xoxo-indieweb-1` in a file name) are not a token."""
    for part in value[5:].split("-"):
        if _DIGITS4.search(part) or (len(part) >= 8 and not (part.isalpha() and (part.islower() or part.isupper()))):
            return entity
    return None


def _validate_card(value: str, entity: str) -> str | None:
    """A digit run is a card number only with an issuer's prefix and length and a valid Luhn digit."""
    return entity if card_number(value.replace(" ", "").replace("-", "")) else None


def _validate_auth_value(value: str, entity: str) -> str | None:
    """`Basic understanding_of_the_material` is prose (also ending a sentence): a credential has a digit, a
    symbol or mixed case."""
    if is_plain_word(value.rstrip(".")):
        return None
    return validate_secret(value, entity)


# --- labelled values: secret_assignment and connection_string_secret ----------------------------------------

# The labels of `secret_assignment`, and where one may start: not inside a word, or at a camelCase hump.
_SECRET_LABEL = (
    # not inside a word; at a camelCase hump (`dbPassword`), or after an acronym (`ETSYToken`, `APIToken`)
    r"(?:(?<![a-z0-9])|(?-i:(?<=[a-z0-9])(?=[A-Z]))|(?-i:(?<=[A-Z])(?=[A-Z][a-z])))"
    r"(?:client[ _.-]?secret|secret[ _.-]?key|private[ _.-]?key|api[ _.-]?key|apikey|access[ _.-]?token|"
    r"auth[ _.-]?token|refresh[ _.-]?token|passphrase|password|passwd|secret|bearer|token|pwd|"
    # the abbreviations and misspellings code uses (`X3_PSWD`, `PSSWRD:=`, `paswd`)
    r"pswd|psswd|psswrd|paswd|passwrd|"
    # `db_pass`, `SMTP-PASS`, `PGPASSWORD`, `MYSQL_ROOT_PASSWORD`: a word glued or joined to the label
    r"[a-z0-9]{1,16}[_.-]pass(?![a-z])|[a-z]{2,12}pass(?:word|wd))"
)
_CONNECTION_LABEL = r"(?<![a-z0-9])(?:password|pwd|accountkey|sharedaccesskey|sharedsecret|clientsecret)"
_CONNECTION_SEP = r"[ \t]{0,4}=[ \t]{0,4}"


def _quoted(quote: str, chars: str, low: int, high: int, next_label: str, *, escapes: bool) -> str:
    """The group(s) for a value opened by `quote`: up to its closing quote (or the end of the line, in a
    truncated document), but never over another `label SEP quote` or the blanks before it (`next_label`: the
    next assignment, whose opening quote an unterminated value would take for its closing one, swallowing the
    label). Every alternative takes one character or one escape pair, each starting with a different
    character, and the look-ahead is bounded, so the repetition stays linear.

    With `escapes` a backslash starts a pair, read as the syntax around the value reads it: after a plain
    opening quote (`key="…"`: JSON, YAML, shells, .env) `\\"` is an escaped quote inside the value and the
    value goes on; after an escaped opening quote (`\\"key\\": \\"…\\"`: JSON inside a JSON string) `\\"`
    closes it. Either way `\\\\` is one escaped backslash, so a value ending in a backslash is covered to
    its last character (two groups: escaped opening, then plain). Without `escapes`, a backslash is an
    ordinary character (connection strings: `C:\\keys`)."""
    guard = r"(?![ \t]{0,8}" + next_label + ")"
    if not escapes:
        return quote + r"((?:" + guard + r"[^" + chars + f"]){{{low},{high}}})"
    plain = r"[^" + chars + "]"
    inner_closes = r"(?<=\\)" + quote + r"((?:" + guard + r"(?:" + plain + r"|\\[^" + quote + r"\r\n])"
    inner_closes += f"){{{low},{high}}})"
    pair = r"\\(?:[^\r\n]|(?![^\r\n]))"  # a backslash and what it escapes (nothing at the end of a line)
    outer = r"(?<!\\)" + quote + r"((?:" + guard + r"(?:" + plain + "|" + pair + f")){{{low},{high}}})"
    return inner_closes + "|" + outer


def _bare(chars: str, low: int, high: int, next_label: str, *, no_call: bool = False) -> str:
    """A group for an unquoted value: a run of `chars` that stops before another assignment (`next_label`:
    `<td>Password=x</td><td>Password= y` is two values, not one holding the second label). Never right after a
    quote: a quoted value is read by `_quoted`, with its escapes (`"abc\\\\"` is `abc\\`, backslash included)."""
    if no_call:  # `token = get_token(scope)`: a value followed by `(` is a function call, not a secret
        return r"(?<![\"'])((?:(?!" + next_label + r")[^" + chars + f"]){{{low},{high}}}+)(?!\\()"
    return r"(?<![\"'])((?:(?!" + next_label + r")[^" + chars + f"]){{{low},{high}}})"


# Another assignment: a label where the detector would see one, and its separator; before a quoted value's end,
# followed by a quote (either kind: a value may be quoted with one and its label with the other, `key':= 'value`).
_PEM_SPEC = (
    "("
    "'-----BEGIN RSA PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{"
    "20,60} ('' | '=' | '==') '\\n-----END RSA PRIVATE KEY-----'"
    "|'-----BEGIN EC PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{"
    "20,60} ('' | '=' | '==') '\\n-----END EC PRIVATE KEY-----'"
    "|'-----BEGIN OPENSSH PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-"
    "9+/]{20,60} ('' | '=' | '==') '\\n-----END OPENSSH PRIVATE KEY-----'"
    "|'-----BEGIN PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{20,"
    "60} ('' | '=' | '==') '\\n-----END PRIVATE KEY-----'"
    "|'-----BEGIN ENCRYPTED PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z"
    "0-9+/]{20,60} ('' | '=' | '==') '\\n-----END ENCRYPTED PRIVATE KEY-----'"
    "|'-----BEGIN DSA PRIVATE KEY-----\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]"
    "{20,60} ('' | '=' | '==') '\\n-----END DSA PRIVATE KEY-----'"
    "|'-----BEGIN PGP PRIVATE KEY BLOCK-----\\n\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za-z0-9+/]{64} '\\n' [A-Za"
    "-z0-9+/]{20,60} ('' | '=' | '==') '\\n-----END PGP PRIVATE KEY BLOCK-----'"
    ")"
)

# Labels with no vendor prefix in front of their value (`DD_API_KEY=…`, `license_key: …`, `X-API-Key: …`):
# only a value that looks like a secret counts, and keys that name a non-secret (`cache_key`, `public_key`)
# are not labels.
_LABELLED_KEY = (
    # `api_key`, `app_key`, `access_key`, `license_key`, `credential(s)`, `auth` at a word or after a joined word
    # (`DD_API_KEY`, `x_app_key`); a bare `key` only as a word of its own (`key: …`, never `cache_key`, `public_key`,
    # `sort_key`, `monkey`)
    r"(?i)(?:(?:(?<![a-z0-9])|(?<=[a-z0-9][_.-]))"
    r"(?:api[ _.-]?key|app[ _.-]?key|access[ _.-]?key|license[ _.-]?key|credentials?|auth)s?|(?<![a-z0-9_.-])keys?)"
    + _SEP
    + r"""(?:"([^"\s\\]{16,256})"|'([^'\s\\]{16,256})'|(?<!["'])([A-Za-z0-9+/=_.~-]{16,256}))"""
)

_NEXT_SECRET = _SECRET_LABEL + r"""[ \t"'\\]{0,6}(?::=|=>|:|=)"""
_NEXT_CONNECTION = _CONNECTION_LABEL + r"[ \t]{0,4}="

_ASSIGNED_SECRET = (
    r"(?i)" + _SECRET_LABEL + _SEP + "(?:"
    + _quoted('"', r'"\\\r\n', 4, 256, _NEXT_SECRET + r"""[ \t\\]{0,6}["']""", escapes=True) + "|"
    + _quoted("'", r"'\\\r\n", 4, 256, _NEXT_SECRET + r"""[ \t\\]{0,6}["']""", escapes=True) + "|"
    + _bare(r"""\s"'\\,;&<>{}()\[\]""", 4, 256, _NEXT_SECRET, no_call=True) + ")"
)  # fmt: skip
_CONNECTION_SECRET = (
    r"(?i)" + _CONNECTION_LABEL + _CONNECTION_SEP + "(?:"
    + _quoted('"', r'"\r\n', 1, 512, _NEXT_CONNECTION + r"""[ \t]{0,4}["']""", escapes=False) + "|"
    + _quoted("'", r"'\r\n", 1, 512, _NEXT_CONNECTION + r"""[ \t]{0,4}["']""", escapes=False) + "|"
    + _bare(r""";\s"'\\""", 1, 512, _NEXT_CONNECTION) + ")"
)  # fmt: skip

# What is left of a separator when a value's first character is its last one (`password:=n/a` reads as
# `password:` and `=n/a`; `Password => ${X}` as `Password=` and `>`), and where a bare value in prose, a URL
# or Markdown ends (`Password=****,ok`, `?password=xxxx&next=/`, `` `pwd=****` ``).
_GLUED = "=:>"
_VALUE_STOP = re.compile(r"[,&<>(){}\[\]`]")
# A value that is code reading the secret from somewhere else (`process.env.STRIPE_KEY`, `os.environ["X"]`,
# `settings.API_KEY`, `$DB_PASSWORD`): the name of a secret, not the secret.
_CODE_REFERENCE = re.compile(
    r"(?:process\.env|os\.environ|os\.getenv|System\.getenv|ENV|env|config|settings|secrets|vars|self|this|"
    r"import\.meta\.env)(?:\.[A-Za-z_][A-Za-z0-9_]{0,64}|\[[\"']?[A-Za-z_][A-Za-z0-9_]{0,64}[\"']?\]){1,4};?"
    r"|\$\{?[A-Z_][A-Z0-9_]{1,64}\}?;?"
    r"|(?:process\.env|os\.environ|os\.getenv|System\.getenv|ENV|getenv)(?:[.\[(].{0,80})?"
)


def _validate_assigned(value: str, entity: str) -> str | None:
    """A labelled value is no secret when it is a placeholder, once separator debris before it and
    punctuation after it (three characters or more in: `****,ok`, `xxxx&next=/`) are taken off."""
    core = value.lstrip(_GLUED)
    if is_placeholder(core) or _CODE_REFERENCE.fullmatch(core):
        return None
    stop = _VALUE_STOP.search(core)
    if stop is not None and stop.start() >= 3 and is_placeholder(core[: stop.start()]):
        return None
    return entity


def is_plain_word(value: str) -> bool:
    return value.replace("_", "").replace("-", "").isalpha() and (value.islower() or value.isupper())


def _d(
    name: str,
    entity: str,
    category: str,
    confidence: float,
    pattern: str,
    *,
    hints: tuple[str, ...] = (),
    flags: int = 0,
    group: int | tuple[int, ...] = 0,
    min_length: int = 0,
    validator: Validator | None = None,
    refines: tuple[str, ...] = (),
    gate: str | None = None,
    description: str = "",
    fallback: bool = False,
    spec: str = "",
    source: str = "",
    reach: int | None = None,
) -> Detector:
    return Detector(
        name=name,
        entity=entity,
        category=category,
        pattern=re.compile(pattern, flags),
        confidence=confidence,
        hints=hints,
        min_length=min_length,
        group=group,
        validator=validator,
        refines=refines,
        gate=None if gate is None else re.compile(gate),
        description=description,
        fallback=fallback,
        spec=spec,
        source=source,
        reach=reach,
    )


BUILTIN_DETECTORS: tuple[Detector, ...] = (
    _d(
        "cloudg_uri", "cloudg_uri", "identifier", 0.99,
        r"cloudg://(?:assets|datasets)/([^\s\"'<>`&?#]{1,1024}+)",
        hints=("cloudg://",), group=1, min_length=18,
        description="the reference inside an asset or dataset URI of the cloudg estate scheme",
    ),
    _d(
        "private_key", "private_key", "secret", 1.0,
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END)[\s\S])*+"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        hints=("private key",), min_length=27,
        description="a PEM, OpenSSH or PGP private key block, up to its END line or the end of the text",
        spec=_PEM_SPEC, source="RFC 7468 (PEM), OpenSSH PROTOCOL.key, RFC 4880 section 6.2 (OpenPGP armor)",
    ),
    _d(
        "jwt", "jwt", "secret", 0.95,
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,4096}+\.eyJ[A-Za-z0-9_-]{5,8192}+\.[A-Za-z0-9_-]{0,4096}+",
        hints=("eyj",), min_length=20,
        spec="'eyJ' [A-Za-z0-9_-]{20,40} '.eyJ' [A-Za-z0-9_-]{40,200} '.' [A-Za-z0-9_-]{43}",
        source="RFC 7519 (JWT) and RFC 7515 (JWS compact serialisation)",
        description="a JSON Web Token: base64url header and claims starting with eyJ, then a signature",
    ),
    _d(
        "url_credentials", "password", "secret", 0.95,
        # the user may be an e-mail address (`smtps://me@example.com:PASSWORD@smtp.example.com`)
        r"://(?:[^\s:/@\"'<>`\\]{1,256}+@)?[^\s:/@\"'<>`\\]{0,256}+:([^\s/@\"'<>`\\]{1,256})@(?=[\w\[])",
        hints=("://",), group=1, min_length=8, validator=validate_secret,
        spec="('postgres'|'postgresql'|'mysql'|'mongodb+srv'|'redis'|'amqps'|'https') '://' [a-z]{3,10} ':' "
        "<[A-Za-z0-9!*_~.-]{10,30}> '@' [a-z]{3,10} '.internal:5432/app'",
        source="RFC 3986 section 3.2.1 (userinfo); libpq, MySQL, MongoDB and Redis connection URIs",
        description="the password of scheme://user:PASSWORD@host",
    ),
    _d(
        "url_userinfo", "url_username", "pii", 0.9,
        r"://([^\s:/@\"'<>`\\]{1,256}+)@(?=[\w\[])",
        hints=("://",), group=1, min_length=7,
        description="the user of scheme://USER@host when no password is present (so no e-mail is reported)",
    ),
    _d(
        "connection_string_secret", "password", "secret", 0.95,
        _CONNECTION_SECRET,
        hints=("password", "pwd", "accountkey", "sharedaccesskey", "sharedsecret", "clientsecret"),
        group=(1, 2, 3), min_length=6, validator=_validate_assigned,
        spec="('Server=tcp:db.example.net,1433;Database=app;User ID=app;Password='"
        "|'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey='"
        "|'Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=') "
        "<[A-Za-z0-9+/]{20,44}> ';'",
        source="ADO.NET connection strings; Azure Storage and Service Bus connection strings (learn.microsoft.com)",
        description="the value after Password=, Pwd=, AccountKey=, SharedAccessKey=, SharedSecret= or ClientSecret=",
    ),
    _d(
        "aws_secret_access_key", "aws_secret_access_key", "secret", 0.95,
        r"(?i)(?<![a-z0-9])aws[\w. -]{0,24}?(?:secret|_sk\b|sk_)[\w. -]{0,24}" + _SEP
        + r"(?-i:([A-Za-z0-9/+]{40}))(?![A-Za-z0-9/+=])",
        hints=("aws",), group=1, min_length=44, reach=0,
        spec="('aws_secret_access_key = '|'AWS_SECRET_ACCESS_KEY='|'aws_secret_key: ') <[A-Za-z0-9/+]{40}>",
        source="AWS IAM access keys (docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html)",
        description="40 base64 characters shortly after an 'aws ... secret' label",
    ),
    *VENDOR_DETECTORS,
    *GAP_DETECTORS,
    *CLI_DETECTORS,
    _d(
        "secret_assignment", "secret_value", "secret", 0.85,
        _ASSIGNED_SECRET,
        hints=("pass", "pwd", "secret", "key", "token", "bearer", "pswd", "psswd", "psswrd", "paswd"),
        group=(1, 2, 3, 4, 5), min_length=8, validator=_validate_assigned,
        reach=17,  # a match starts at its label, whose hint is at most 17 in (`[a-z0-9]{1,16}[_.-]pass`)
        spec="('password'|'db_pass'|'DB_PASSWORD'|'client_secret'|'api_key'|'PGPASSWORD'|'smtp_pass'|'auth_token') "
        "(': '|'='|' = ') <[A-Za-z0-9!#%^*_+]{10,30}>",
        source="labelled assignments in .env, YAML, INI, JSON, TOML and shell",
        description="the value after password/secret/api_key/token/... and ':' or '='",
    ),
    *ASSIGNMENT_DETECTORS,
    _d(
        "authorization_header", "secret_value", "secret", 0.9,
        r"(?i)(?<![a-z0-9])(?:bearer|basic)[ \t]{1,8}([A-Za-z0-9._~+/=-]{16,4096}+)",
        hints=("bearer", "basic"), group=1, min_length=22, validator=_validate_auth_value,
        spec="'Authorization: ' ('Bearer '|'Basic ') <[A-Za-z0-9._~+/-]{24,60}>",
        source="RFC 6750 (Bearer) and RFC 7617 (Basic)",
        description="the credential after 'Bearer ' or 'Basic ' (16 characters or more)",
    ),
    _d(
        "github_token", "api_token", "secret", 0.99,
        r"gh[pousr]_[A-Za-z0-9]{36,255}+|github_pat_[A-Za-z0-9_]{22,255}+",
        hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), min_length=33, validator=validate_crc32_token,
        spec="('gh' ('p'|'o'|'u'|'s'|'r') '_' [A-Za-z0-9]{30} @crc32b62"
        "|'github_pat_' [A-Za-z0-9]{22} '_' [A-Za-z0-9]{59})",
        source="github.blog 2021-04-05 'Behind GitHub's new authentication token formats'; docs.github.com tokens",
        description="GitHub tokens: ghp_/gho_/ghu_/ghs_/ghr_ + 30 + CRC32 (checked), github_pat_ + 22 + _ + 59",
    ),
    _d(
        "slack_token", "api_token", "secret", 0.99,
        r"(?:xoxe\.)?xox[abposre]-[A-Za-z0-9-]{10,255}+|xapp-\d-[A-Za-z0-9-]{10,255}+",
        hints=("xox", "xapp-"), min_length=15, validator=_validate_slack,
        spec="('xoxb-' [0-9]{11} '-' [0-9]{13} '-' [A-Za-z0-9]{24}|'xoxp-' [0-9]{11} '-' [0-9]{11} '-' [0-9]{13} '-' "
        "[0-9a-f]{32}|'xoxe.xoxp-1-' [A-Za-z0-9]{140,160}|'xapp-1-A' [A-Z0-9]{10} '-' [0-9]{13} '-' [0-9a-f]{64})",
        source="api.slack.com/authentication/token-types",
        description="Slack bot, user, workspace, refresh, rotating (xoxe.) and app-level (xapp-) tokens",
    ),
    _d(
        "google_api_key", "api_token", "secret", 0.99,
        # bounded both sides: `AIza` inside a longer base64 run, or 35 characters that run on, is no key
        r"(?<![0-9A-Za-z_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        hints=("aiza",), min_length=39,
        spec="'AIza' [A-Za-z0-9_-]{35}", source="Google Cloud API keys (cloud.google.com/docs/authentication/api-keys)",
        description="Google API keys: AIza + 35",
    ),
    _d(
        "stripe_key", "api_token", "secret", 0.99,
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,255}+|(?<![A-Za-z0-9_])whsec_[A-Za-z0-9]{32,64}+",
        hints=("_live_", "_test_", "whsec_"), min_length=24,
        spec="(('sk'|'rk') '_' ('live'|'test') '_' [A-Za-z0-9]{24,99}|'whsec_' [A-Za-z0-9]{32})",
        source="docs.stripe.com/keys (secret, restricted and publishable keys); webhook signing secrets",
        description="Stripe keys: sk_/rk_/pk_ + live_/test_ + 16 or more",
    ),
    _d(
        "azure_sas_signature", "secret_value", "secret", 0.95,
        r"(?i)(?<![a-z0-9_])sig=([A-Za-z0-9%+/=]{20,512}+)",
        hints=("sig=",), group=1, min_length=24,
        spec="'https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=' <[A-Za-z0-9]{40,50} '%3D'>",
        source="Azure shared access signatures (learn.microsoft.com/azure/storage/common/storage-sas-overview)",
        description="the signature of an Azure shared access signature (sig=...)",
    ),
    _d(
        "azure_storage_key", "secret_value", "secret", 0.8,
        r"(?<![A-Za-z0-9+/-])[A-Za-z0-9+/]{86}==(?![A-Za-z0-9+/=])",
        hints=("==",), min_length=88,
        spec="[A-Za-z0-9+/]{86} '=='", source="Azure storage account access keys (512-bit, base64)",
        description="an Azure storage account key: exactly 86 base64 characters and '=='",
    ),
    _d(
        "labelled_key", "secret_value", "secret", 0.75,
        _LABELLED_KEY,
        hints=("key", "credential", "auth", "token", "secret"), group=(1, 2, 3), min_length=16,
        reach=8,  # a match starts at its label, whose hint is at most 8 in (`license_key`)
        validator=lambda value, entity: entity if looks_secret(value) else None,
        spec="('DD_API_KEY'|'license_key'|'x-api-key'|'app_key'|'key'|'access_key'|'credential') "
        "(': '|'='|' = ') <[0-9a-f]{32}>",
        source="labelled keys with no vendor prefix (Datadog, Twilio auth tokens, licence keys, X-API-Key headers)",
        description="a secret-looking value (16+ characters, letters and digits, dense) after a key-like label",
    ),
    _d(
        "aws_access_key_id", "aws_access_key_id", "credential", 0.99,
        r"(?<![0-9A-Z])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![0-9A-Z])",
        hints=("akia", "asia", "abia", "acca"), min_length=20,
        spec="('AKIA'|'ASIA'|'ABIA'|'ACCA') [A-Z2-7]{16}",
        source="AWS IAM unique id prefixes (docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html): "
        "AKIA access keys, ASIA temporary keys, ABIA STS service bearer tokens, ACCA context-specific credentials",
        description="AWS access key ids: AKIA, ASIA, ABIA or ACCA + 16, not inside a longer run of capitals and digits",
    ),
    _d(
        "aws_unique_id", "aws_unique_id", "identifier", 0.95,
        r"(?:AIDA|AROA|AGPA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)[0-9A-Z]{16,17}+",
        hints=("aida", "aroa", "agpa", "aipa", "anpa", "anva", "apka", "abia", "acca"), min_length=20,
        description="AWS unique ids of users, roles, groups, profiles, policies and keys (not credentials)",
    ),
    _d(
        "aws_org_id", "aws_org_id", "identifier", 0.85,
        r"(?<![A-Za-z0-9_-])o-[a-z0-9]{10,32}(?![A-Za-z0-9_-])",
        hints=("o-",), min_length=12,
        description="an AWS Organizations organization id (o-...)",
    ),
    _d(
        "aws_ou_id", "aws_ou_id", "identifier", 0.9,
        r"(?<![A-Za-z0-9_-])ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}(?![A-Za-z0-9_-])",
        hints=("ou-",), min_length=16,
        description="an AWS Organizations organizational unit id (ou-xxxx-xxxxxxxx)",
    ),
    _d(
        "aws_root_id", "aws_root_id", "identifier", 0.7,
        r"(?i:root)[\w \"':=,-]{0,24}?(?<![A-Za-z0-9_-])(r-[a-z0-9]{4,32})(?![A-Za-z0-9_-])",
        hints=("root",), group=1, min_length=10,
        description="an AWS Organizations root id (r-...) shortly after the word 'root'",
    ),
    _d(
        "cloudg_iri", "cloudg_iri", "identifier", 0.95,
        r"(?<![A-Za-z0-9_])cmr:[A-Za-z0-9_.:#/-]{2,512}+|https?://cloudg\.io/resource/[^\s\"'<>`]{1,1024}+",
        hints=("cmr:", "cloudg.io/resource/"), min_length=6, validator=_validate_iri,
        description="ontology IRIs of the cloudg estate (cmr:... or https://cloudg.io/resource/...)",
    ),
    _d(
        "aws_arn", "aws_arn", "identifier", 0.99,
        r"(?<![A-Za-z0-9_-])arn:(?:aws|aws-cn|aws-us-gov|aws-iso(?:-[a-z])?):[a-z0-9-]{1,64}:[a-z0-9-]{0,32}:"
        r"(?:\d{12}|aws)?:[^\s\"'<>`,;|(){}\[\]&?#]{1,2048}+",
        hints=("arn:",), min_length=12,
        description="an AWS ARN in the standard, China, GovCloud or ISO partitions",
    ),
    _d(
        "azure_resource_id", "azure_resource_id", "identifier", 0.99,
        r"(?i)/subscriptions/" + GUID + r"(?:/[^\s\"'<>`,;?#&|]{0,2048}+)?",
        hints=("/subscriptions/",), min_length=51,
        description="an Azure resource id: /subscriptions/<GUID> and the path after it",
    ),
    _d(
        "gcp_resource_name", "gcp_resource_name", "identifier", 0.95,
        r"//[a-z0-9-]{1,63}\.googleapis\.com/[^\s\"'<>`,;|&?#]{1,2048}+"
        r"|(?<![A-Za-z0-9_/.-])(?:projects/(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d{6,20})|(?:organizations|folders)/\d{6,20})"
        r"(?![A-Za-z0-9_-])(?:/[^\s\"'<>`,;|&?#]{1,2048}+)?",
        hints=("googleapis.com/", "projects/", "organizations/", "folders/"), min_length=14,
        description="a GCP full resource name (//svc.googleapis.com/...) or a projects/, organizations/, folders/ name",
    ),
    _d(
        "azure_subscription_ref", "azure_subscription_id", "identifier", 0.9,
        r"(?i)(?:subscription|tenant)[ _-]?id" + _SEP + r"(" + GUID + r")(?![0-9A-Fa-f-])",
        hints=("subscription", "tenant"), group=1, min_length=40,
        description="a GUID labelled 'subscription id' or 'tenant id'",
    ),
    _d(
        "email", "email", "pii", 0.95,
        r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])",
        hints=("@",), min_length=6,
        description="an e-mail address",
    ),
    _d(
        "payment_card", "payment_card", "pii", 0.9,
        r"(?<![\w.,+-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5})"
        r"(?![\w-]|[.,]\d)",
        min_length=13, validator=_validate_card, gate=r"\d{4}[ -]?\d{4}[ -]?\d{4}",
        source="ISO/IEC 7812-1 (issuer prefixes, the Luhn check digit); the schemes' published IIN ranges",
        description="a payment card number: an issuer's prefix and length, and a valid Luhn check digit (13-19 "
        "digits, bare or in groups of 4, or 4-6-5)",
    ),
    _d(
        "ipv6", "ip_address", "network", 0.9,
        r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4})?(?::[0-9A-Fa-f]{0,4}){2,7}(?:(?<=:)(?:\d{1,3}\.){3}\d{1,3})?"
        r"(?:/\d{1,3})?(?![\w:]|\.\w)",
        hints=(":",), min_length=2, validator=_validate_ipv6, refines=_IP_CLASSES,
        description="an IPv6 address or CIDR with real structure (checked and classified); '::' only as ::/0",
    ),
    _d(
        "ipv4", "ip_address", "network", 0.9,
        r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?!\w|\.\d)",
        hints=(".",), min_length=7, validator=validate_ip, refines=_IP_CLASSES,
        description="a dotted-quad IPv4 address or CIDR (checked and classified)",
    ),
    _d(
        "mac_address", "mac_address", "network", 0.8,
        r"(?<![\w:-])[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![\w:-])",
        hints=(":", "-"), min_length=17,
        description="a MAC address: six hex pairs separated by ':' or '-'",
    ),
    _d(
        "hostname", "hostname", "network", 0.7,
        r"(?i)(?<![\w.@-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,16}(?:" + _TLDS + r")(?![\w-]|\.[a-z0-9])",
        hints=(".",), min_length=4,
        description="a fully qualified host name under a common or an internal top-level domain",
    ),
    _d(
        "aws_account_id", "aws_account_id", "identifier", 0.7,
        r"(?<![\w.:/-])\d{12}(?!\w|[.:/-]\w)",
        min_length=12, validator=_validate_account, gate=r"(?<!\d)\d{12}(?!\d)",
        description="a bare 12-digit AWS account number (all-same-digit placeholders excluded)",
    ),
    _d(
        "timestamp", "timestamp", "temporal", 0.9,
        r"(?<!\d)\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?(?![\d:])",
        hints=("-",), min_length=16, validator=_validate_timestamp,
        description="an ISO-8601 date-time (bare dates are not timestamps)",
    ),
    _d(
        "uuid", "uuid", "identifier", 0.6,
        r"(?<![0-9A-Fa-f-])" + GUID + r"(?![0-9A-Fa-f-])",
        hints=("-",), min_length=36,
        description="any GUID (opt-in: only acts when a strategy names it)",
    ),
    _d(
        "high_entropy_secret", "secret_value", "secret", 0.5,
        r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,512}+={0,2}(?![A-Za-z0-9+/_=-])",
        min_length=20, validator=lambda value, entity: entity if looks_random(value) else None,
        gate=r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20}",
        description="a token run (24+ characters by the measured rule) with the statistics of random text",
        fallback=True,
    ),
)  # fmt: skip

BUILTIN_BY_NAME: dict[str, Detector] = {d.name: d for d in BUILTIN_DETECTORS}
assert len(BUILTIN_BY_NAME) == len(BUILTIN_DETECTORS)
