"""Facts about values shared by every transform: categories, entity parents, placeholders, IPs, key names."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

CATEGORIES: tuple[str, ...] = ("secret", "credential", "identifier", "network", "pii", "temporal", "free_text")

# A strategy keyed by a parent also covers its children (a policy says `ip_address: keep` once).
ENTITY_PARENTS: dict[str, str] = {
    "cloud_account": "aws_account_id",
    "private_ip": "ip_address",
    "public_ip": "ip_address",
    "special_ip": "ip_address",
    "private_cidr": "cidr",
    "public_cidr": "cidr",
    "special_cidr": "cidr",
    "aws_unique_id": "aws_access_key_id",
    "azure_tenant_id": "azure_subscription_id",
    "gcp_project_number": "gcp_project_id",
}

IP_ENTITIES: frozenset[str] = frozenset(
    f"{cls}_{kind}" for cls in ("private", "public", "special") for kind in ("ip", "cidr")
) | {"ip_address", "cidr"}


def entity_chain(entity: str) -> list[str]:
    """The entity and its ancestors, nearest first (the order strategies are looked up in)."""
    chain = [entity]
    seen = {entity}
    while (parent := ENTITY_PARENTS.get(chain[-1])) is not None and parent not in seen:
        chain.append(parent)
        seen.add(parent)
    return chain


# --- placeholders: values that look like a secret's slot but hold no secret ---------------------------

_PLACEHOLDER_WORDS = frozenset(
    {"", "null", "none", "nil", "true", "false", "undefined", "redacted", "n/a", "na", "empty", "string",
     "required", "optional", "****", "xxx"}
)  # fmt: skip
_PLACEHOLDER_PREFIXES = ("[redacted", "${", "{{", "<", "%(", "$(")
_PLACEHOLDER_CHARS = frozenset("*x#-.,\u2026")


_SENTENCE_END = ".,;:!?"


def _is_placeholder_text(text: str) -> bool:
    if text in _PLACEHOLDER_WORDS or text.startswith(_PLACEHOLDER_PREFIXES):
        return True
    return all(char in _PLACEHOLDER_CHARS for char in text)


def is_placeholder(value: str) -> bool:
    """Whether a secret-shaped slot holds a template, an empty marker or a redaction instead of a secret.

    Punctuation that ends a sentence is not part of the slot: `none.` and `n/a;` are placeholders."""
    text = value.strip().strip("\"'`").strip().lower()
    if _is_placeholder_text(text):
        return True
    trimmed = text.rstrip(_SENTENCE_END).rstrip("\"'`")
    return bool(trimmed) and trimmed != text and _is_placeholder_text(trimmed)


def is_template(value: str) -> bool:
    """A slot filled elsewhere (`${DB_PASSWORD}`, `{{ secrets.X }}`, `<token>`, `%(pw)s`, `[REDACTED]`): what a
    sensitive key may hold without holding a secret."""
    text = value.strip().lower()
    return len(text) >= 3 and text.startswith(_PLACEHOLDER_PREFIXES)


# --- IP classification ------------------------------------------------------------------------------

_PRIVATE_V4 = tuple(
    ipaddress.IPv4Network(net) for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
_PRIVATE_V6 = ipaddress.IPv6Network("fc00::/7")


def ip_class(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """`special` (not routable anywhere that matters), `private` (an internal range) or `public`."""
    if (
        address.is_unspecified
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or (address.version == 4 and (address.is_reserved or int(address) == 0xFFFFFFFF))
    ):
        return "special"
    if isinstance(address, ipaddress.IPv4Address):
        return "private" if any(address in net for net in _PRIVATE_V4) else "public"
    mapped = address.ipv4_mapped
    if mapped is not None:
        return ip_class(mapped)
    return "private" if address in _PRIVATE_V6 else "public"


@lru_cache(maxsize=4096)
def classify_ip_text(text: str) -> str | None:
    """`{class}_ip` or `{class}_cidr` for an address or a CIDR (classified by its network), else None."""
    try:
        if "/" in text:
            network = ipaddress.ip_network(text, strict=False)
            if network.prefixlen == 0:
                return "special_cidr"
            return f"{ip_class(network.network_address)}_cidr"
        return f"{ip_class(ipaddress.ip_address(text))}_ip"
    except ValueError:
        return None


# --- key names ----------------------------------------------------------------------------------------

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=65536)
def normalize_key(key: str) -> str:
    """`SecretAccessKey` → `secret_access_key`: split camelCase, lower-case, runs of other characters → `_`."""
    split = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", key))
    return _NON_ALNUM.sub("_", split.lower()).strip("_")


# --- entropy ------------------------------------------------------------------------------------------


def shannon_entropy(text: str) -> float:
    """Bits per character; random base64 sits near 6, English words near 4 and below."""
    if not text:
        return 0.0
    size = len(text)
    return -sum((n / size) * math.log2(n / size) for n in Counter(text).values())


_LETTER_RUN = re.compile(r"[A-Za-z]{4,}")
_CAPITALISED_WORD = re.compile(r"[A-Z][a-z]{3,}")
_HEX = re.compile(r"[0-9a-fA-F]+")


def looks_high_entropy(text: str, bits: float = 4.0) -> bool:
    """An opaque token: mixed case and digits, not hex, few word-like runs, not mostly capitalised words
    (`HttpRequestHandlerFactoryBean42` is a CamelCase name: one letter run, but over three quarters of it in
    runs of three or more lower-case letters after a capital), and dense in information."""
    if len(text) < 32 or _HEX.fullmatch(text):
        return False
    if not (any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)):
        return False
    if len(_LETTER_RUN.findall(text)) >= 3:
        return False
    if 4 * sum(len(word) for word in _CAPITALISED_WORD.findall(text)) > 3 * len(text):
        return False  # of the random base62 tokens accepted here, about 1 in 40,000 is this wordy
    return shannon_entropy(text) >= bits


_GUID_SHAPE = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


_NOT_SECRET_PREFIXES = ("/", "./", "http:", "https:", "file:", "ssh-", "ecdsa-", "AAAA")


def looks_secret(value: str) -> bool:
    """A labelled value that could be a credential: 16+ characters, no blanks, letters and digits, not a
    placeholder, a path, a URL or a GUID, and dense (3 bits per character or more)."""
    text = value.strip("\"'")
    if len(text) < 16 or is_placeholder(text) or any(c.isspace() for c in text):
        return False
    if text.startswith(_NOT_SECRET_PREFIXES) or _GUID_SHAPE.fullmatch(text):
        return False
    if not (any(c.isdigit() for c in text) and any(c.isalpha() for c in text)):
        return False
    return shannon_entropy(text) >= 3.0


_SEPARATORS = re.compile(r"[/_.-]")
_NO_VOWELS = str.maketrans("", "", "aeiouyAEIOUY")
_ASCII_DIGIT = re.compile("[0-9]")
_LETTER_RUNS = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{4,}")
_CONSONANTS_5 = re.compile(r"[b-df-hj-np-tv-xz]{5}", re.IGNORECASE)


def _wordy_share(token: str) -> float:
    """The share of `token` in pronounceable letter runs (`config`, `Handler`, `LINUX`): a quarter to two thirds
    vowels and no five consonants in a row, as words have and runs of random letters mostly do not."""
    wordy = 0
    for run in _LETTER_RUNS.findall(token):
        vowels = len(run) - len(run.translate(_NO_VOWELS))
        if 0.25 <= vowels / len(run) <= 0.67 and not _CONSONANTS_5.search(run):
            wordy += len(run)
    return wordy / len(token)


def random_letters(token: str) -> bool:
    """Whether a token of letters only reads as random rather than as words: 20+ letters of both cases, and fewer
    than half of them in pronounceable runs or 4.2 bits per character (a random token of 32 letters has 4.5, a
    PascalCase name under 4.2). A random key with no digit is rare but real (one in 280 of 32 base62 characters)."""
    if len(token) < 20 or not token.isalpha() or token.islower() or token.isupper():
        return False
    return _wordy_share(token) < 0.5 or shannon_entropy(token) >= 4.2


_NOT_RANDOM_SHAPES = re.compile(
    r"[0-9a-fA-F]+"  # hex: digests, git SHAs, trace ids (a hex key is found by its label, not by its shape)
    r"|[0-9a-fA-F]+(?:-[0-9a-fA-F]+)+"  # GUIDs and other dashed hex
    r"|[A-Za-z]{1,12}[_-](?:[A-Za-z0-9]{1,12}[_-])?[0-9a-fA-F]+"  # a short name and hex (`build_3f9a…`)
    r"|sha(?:1|224|256|384|512)-.*"  # Subresource Integrity values
    r"|AAAA[A-Za-z0-9+/]*"  # the base64 blob of an SSH public key
)


def _text_of_base64(token: str) -> str | None:
    """The printable UTF-8 text `token` is base64 (standard or URL-safe) of, or gzip+base64 of, else None."""
    if len(token) < 16 or len(token) % 4 == 1:
        return None
    padded = token + "=" * (-len(token) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        if raw.startswith(b"\x1f\x8b"):  # gzip, then base64: the text inside (bounded)
            raw = zlib.decompressobj(wbits=31).decompress(raw, _MAX_INFLATED)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError, zlib.error):
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
    return text if printable >= 0.97 * len(text) else None


def _text_of_hex(token: str) -> str | None:
    """The printable UTF-8 text `token` is hex of (40 digits at least), else None."""
    if len(token) < 40 or len(token) % 2:
        return None
    try:
        text = bytes.fromhex(token).decode("utf-8")
    except ValueError:
        return None
    return text if text.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in text) else None


_MAX_INFLATED = 1 << 16
"""The most bytes a gzip+base64 token is inflated to when judged (a bomb stays small)."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/_-]{20,512}={0,2}")


@dataclass(frozen=True, slots=True)
class RandomnessRule:
    """When a run of token characters is random enough to be a secret nobody wrote a detector for.

    The parameters were chosen by `bench/quality.py` (the `entropy` rows) from two measured numbers: the share of
    random tokens (20 to 128 characters; base62, base64, base64url, base36 and base32 alphabets) caught, and the
    share of items of the benign corpus altered; doc/TRANSFORMS.md has the table."""

    min_length: int = 24
    slack: float = 0.5
    """How far (bits per character) below a random string's expected entropy a token may fall."""
    max_wordy: float = 0.6
    """The largest share of a token in word-like runs (`Handler`, `config`, `HTTP`)."""


RANDOMNESS = RandomnessRule()


def _path_of_names(token: str) -> bool:
    """`instance/i-0ec4d37eef29972d5`, `commit/<sha>`, `key-pair/kp-1f9a…`: a resource path (an ARN's tail, a URL's)
    whose every part is a word or an id of a known non-secret shape. A random base64 run has slashes too, but
    between them random pieces, which are almost never all hex or all words."""
    if _PATH_SHAPE.fullmatch(token) is None:  # (one C-speed look rules out almost every other token)
        return False
    parts = [part for part in token.split("/") if part]
    return len(parts) >= 2 and all(_NOT_RANDOM_SHAPES.fullmatch(part) or _is_name(part) for part in parts)


def _is_name(part: str) -> bool:
    """`security-group`, `key_pair`, `README`: pronounceable words, joined by `-`, `_` or `.`."""
    return _NAME.fullmatch(part) is not None and all(_wordy_share(word) >= 0.5 for word in _WORDS.findall(part))


_NAME = re.compile(r"[A-Za-z]+(?:[-_.]+[A-Za-z]+)*")
_WORDS = re.compile("[A-Za-z]+")
_PART = f"(?:{_NAME.pattern}|{_NOT_RANDOM_SHAPES.pattern})"
_PATH_SHAPE = re.compile(f"/*{_PART}(?:/+{_PART})+/*")
"""What every path of names and ids looks like, and more (a quick test before the exact one)."""


def looks_random(text: str, rule: RandomnessRule = RANDOMNESS) -> bool:
    """A token with the statistics of random characters: at least two of lower case, upper case and digits (a
    digit or a base64 symbol among them), not mostly word-like runs, not a known non-secret shape (hex, SRI, an
    SSH public key), and a Shannon entropy within `slack` of what random text of its length and alphabet has."""
    token = text.rstrip("=")
    size = len(token)
    if size < rule.min_length:
        return False
    if _NOT_RANDOM_SHAPES.fullmatch(token):
        decoded = _text_of_hex(token)  # hex of text is judged by what it says, like base64 of text (below)
        return decoded is not None and any(looks_random(run.group(0), rule) for run in _TOKEN_RUN.finditer(decoded))
    if "/" in token and _path_of_names(token):
        return False
    if token.isascii():  # (the same answers at C speed: a case change shows a letter of the other case)
        lower, upper, digit = token.upper() != token, token.lower() != token, _ASCII_DIGIT.search(token) is not None
    else:
        lower = any(c.islower() for c in token)
        upper = any(c.isupper() for c in token)
        digit = any(c.isdigit() for c in token)
    symbols = set(token) & set("+/-_")
    if lower + upper + digit < 2 or not (digit or symbols & {"+", "/"}):
        return False
    separators = sum(token.count(c) for c in "/-_")
    if separators >= 3 and size <= 8 * (separators + 1):
        return False  # a path or an identifier: short segments between separators (random base64 has few)
    segments = [part for part in _SEPARATORS.split(token) if part]
    if len(segments) >= 3 and 3 * sum(_wordy_share(part) >= 0.5 for part in segments) >= 2 * len(segments):
        return False  # `/subscriptions/x/resourceGroups/rg`: mostly words between separators
    if _wordy_share(token) > rule.max_wordy or 4 * sum(map(len, _CAPITALISED_WORD.findall(token))) > 3 * size:
        # mostly pronounceable runs, or mostly capitalised words (`SingletonHttpProxy90`: CamelCase, not random)
        return False
    decoded = _text_of_base64(token)
    if decoded is not None:
        # Base64 of text is encoded content, judged by what it says: random only when the text holds a random run
        # (`config:\n<key>` encoded), and never by its own statistics (the decoder reads it where marked).
        # A PEM block's body is base64 by nature: its kind (a certificate, a private key) is the decoder's call.
        runs = _TOKEN_RUN.finditer(decoded)
        return "-----BEGIN " not in decoded and any(looks_random(m.group(0), rule) for m in runs)
    alphabet = 26 * lower + 26 * upper + 10 * digit + len(symbols)
    expected = math.log2(alphabet) - (alphabet - 1) / (2 * size * math.log(2))
    return shannon_entropy(token) >= expected - rule.slack


# Characters outside ASCII that Python's case-insensitive matching treats as an ASCII letter: folded
# before a literal prefilter so `pa\u017f\u017fword` cannot slip past a hint while the regex would still match it.
CASE_FOLD_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def fold_for_hints(text: str) -> str:
    """Lower-case text for hint lookups, safe against the few non-ASCII letters `re.I` folds to ASCII."""
    if text.isascii() or not any(letter in text for letter in _FOLDED_TO_ASCII):  # (four substring tests: C speed)
        return text.lower()
    return text.translate(CASE_FOLD_TO_ASCII).lower()


_FOLDED_TO_ASCII = tuple(map(chr, CASE_FOLD_TO_ASCII))
