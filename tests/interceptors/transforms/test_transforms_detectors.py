"""The built-in detectors: true positives in many syntaxes, near-misses, placeholders, linear time."""

from __future__ import annotations

import re
import time

import pytest

from interceptors.transforms.catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS
from interceptors.transforms.detectors import Scanner, detector_from_config, merge_detectors, validator_by_name
from interceptors.transforms.entities import classify_ip_text, fold_for_hints, is_placeholder, normalize_key

# Fake credentials are assembled from pieces so secret scanners do not flag this file.
GHP = "gh" + "p_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
XOXB = "xo" + "xb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
AKIA = "AK" + "IA" + "Z3QK7T2LMN4PXR6W"
STRIPE = "sk" + "_live_" + "4eC7aRm9Kx2bNw5pQj8sYd1f"
GOOGLE = "AI" + "za" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
JWT = (
    "ey"
    + "JhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
AZURE_KEY = "Zm9vYmFy" * 10 + "Qk1uT3" + "=="
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\nAbCdEf==\n-----END RSA PRIVATE KEY-----"
HIGH = "Zx8Kq2Lm9Np4Rt7Vw1Yb3Cd6Fg0Hj5Ks"
GUID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"

SCANNER = Scanner(BUILTIN_DETECTORS)


def found(text: str) -> list[tuple[str, str, str]]:
    return [(f.detector.name, f.entity, f.value) for f in SCANNER.scan(text)]


POSITIVES: list[tuple[str, str, str, str]] = [
    # (detector, text, expected entity, expected value)
    ("cloudg_uri", "see cloudg://assets/i-0abc123 now", "cloudg_uri", "i-0abc123"),
    ("cloudg_uri", '{"uri": "cloudg://datasets/prod-2024"}', "cloudg_uri", "prod-2024"),
    ("private_key", f"key:\n{PEM}\ntail", "private_key", PEM),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=", "private_key", None),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\\nlQOYBF\\n-----END PGP PRIVATE KEY BLOCK-----",
     "private_key", None),
    ("private_key", "x -----BEGIN EC PRIVATE KEY-----MHcCAQEE-----END EC PRIVATE KEY----- y", "private_key", None),
    ("jwt", f"token {JWT}", "jwt", JWT),
    ("jwt", f'{{"id_tok": "{JWT}"}}', "jwt", JWT),
    ("url_credentials", "postgres://admin:s3cr3tPass@db.internal:5432/x", "password", "s3cr3tPass"),
    ("url_credentials", "redis://:hunter2hunter2@cache:6379", "password", "hunter2hunter2"),
    ("url_userinfo", "https://bob@github.com/org/repo", "url_username", "bob"),
    ("connection_string_secret", "Server=tcp:x;Password=Hunter2Pass;Encrypt=True", "password", "Hunter2Pass"),
    ("connection_string_secret", "Endpoint=sb://x/;SharedAccessKey=AbCd1234EfGh5678=;", "password", None),
    ("connection_string_secret", 'Pwd="my pass word";', "password", "my pass word"),
    ("aws_secret_access_key", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "aws_secret_access_key", AWS_SECRET),
    ("aws_secret_access_key", f'"aws_secret_access_key": "{AWS_SECRET}"', "aws_secret_access_key", AWS_SECRET),
    ("aws_secret_access_key", f"aws secret key: {AWS_SECRET}", "aws_secret_access_key", AWS_SECRET),
    ("secret_assignment", '{"api_key": "abcd1234efgh"}', "secret_value", "abcd1234efgh"),
    ("secret_assignment", "dbPassword: hunter22", "secret_value", "hunter22"),
    ("secret_assignment", "DB_PASSWORD: correct-horse", "secret_value", "correct-horse"),
    ("connection_string_secret", "DB_PASSWORD=correct-horse", "password", "correct-horse"),
    ("secret_assignment", "password: 'two words here'", "secret_value", "two words here"),
    ("secret_assignment", '{\\"client_secret\\": \\"Zq9Xw8Yv\\"}', "secret_value", "Zq9Xw8Yv"),
    ("secret_assignment", "refresh_token => r3fr3shT0k", "secret_value", "r3fr3shT0k"),
    ("authorization_header", "Authorization: Bearer abcdef0123456789abcdef", "secret_value", "abcdef0123456789abcdef"),
    ("authorization_header", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "secret_value", "dXNlcjpwYXNzd29yZA=="),
    ("github_token", f"export {GHP}", "api_token", GHP),
    ("secret_assignment", f"GITHUB_TOKEN={GHP}", "secret_value", GHP),
    ("github_token", "github_pat_" + "11ABCDEFG0123456789abcdef_xyz", "api_token", None),
    ("slack_token", f"slack: {XOXB}", "api_token", XOXB),
    ("google_api_key", f"maps?key={GOOGLE}", "api_token", GOOGLE),
    ("stripe_key", f"STRIPE={STRIPE}", "api_token", STRIPE),
    ("stripe_key", "rk" + "_test_" + "abcdefghijklmnop1234", "api_token", None),
    ("azure_sas_signature", "https://a.blob.core.windows.net/c?sv=2020&sig=abcdEFGH1234abcdEFGH1234%3D", "secret_value",
     "abcdEFGH1234abcdEFGH1234%3D"),
    ("azure_storage_key", f"key {AZURE_KEY} end", "secret_value", AZURE_KEY),
    ("aws_access_key_id", f"id={AKIA}", "aws_access_key_id", AKIA),
    ("aws_access_key_id", "ASIA" + "Y3QK7T2LMN4PXR6W", "aws_access_key_id", None),
    ("aws_unique_id", "role AROAIOSFODNN7EXAMPLE1", "aws_unique_id", "AROAIOSFODNN7EXAMPLE1"),
    ("aws_org_id", "org o-abc123def45 here", "aws_org_id", "o-abc123def45"),
    ("payment_card", "card 4111 1111 1111 1111 exp", "payment_card", "4111 1111 1111 1111"),
    ("url_credentials", "smtps://me@example.org:Zq8vK2mX9pL4@smtp.example.org:465", "password", "Zq8vK2mX9pL4"),
    ("secret_assignment", "X3_PSWD=d37Yt1Jnv0-z", "secret_value", "d37Yt1Jnv0-z"),
    ("netrc_password", "<c><![CDATA[machine h login u password x1Fh*!zm9tb^RkRM]]></c>", "password",
     "x1Fh*!zm9tb^RkRM"),  # found by the testing kit: the value ran on through `]]></c>` into the next element
    ("secret_assignment", 'def connect(passwd: str = "cq2tPr1a2"):', "secret_value", "cq2tPr1a2"),
    ("secret_assignment", "PSSWRD:=FlUgeGeHeImEn07", "secret_value", "FlUgeGeHeImEn07"),
    ("slack_webhook", "post to http://hooks.slack.com/services/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",
     "api_token", "http://hooks.slack.com/services/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"),  # http too
    ("aws_ou_id", "ou ou-ab12-abcd1234", "aws_ou_id", "ou-ab12-abcd1234"),
    ("aws_root_id", 'RootId: "r-ab12"', "aws_root_id", "r-ab12"),
    ("cloudg_iri", "subject cmr:Asset_1 x", "cloudg_iri", "cmr:Asset_1"),
    ("aws_arn", "arn:aws:iam::123456789012:role/admin", "aws_arn", "arn:aws:iam::123456789012:role/admin"),
    ("aws_arn", "(arn:aws-us-gov:s3:::bucket/key)", "aws_arn", "arn:aws-us-gov:s3:::bucket/key"),
    ("aws_arn", "arn:aws-cn:lambda:cn-north-1:123456789012:function:f", "aws_arn", None),
    ("azure_resource_id", f"/subscriptions/{GUID}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1",
     "azure_resource_id", None),
    ("gcp_resource_name", "//compute.googleapis.com/projects/my-proj-1/zones/us-central1-a/instances/i1",
     "gcp_resource_name", None),
    ("gcp_resource_name", "projects/my-proj-1/topics/t", "gcp_resource_name", "projects/my-proj-1/topics/t"),
    ("gcp_resource_name", "organizations/123456789012", "gcp_resource_name", None),
    ("azure_subscription_ref", f"subscription id: {GUID}", "azure_subscription_id", GUID),
    ("azure_subscription_ref", f'"tenantId": "{GUID}"', "azure_subscription_id", GUID),
    ("email", "mail bob.smith+x@example.co.uk now", "email", "bob.smith+x@example.co.uk"),
    ("ipv6", "fe80::1 link", "special_ip", "fe80::1"),
    ("ipv6", "net 2001:db8::1/64", "public_cidr", "2001:db8::1/64"),
    ("ipv6", "any ::/0", "special_cidr", "::/0"),
    ("ipv6", "ula fd12:3456:789a::1", "private_ip", "fd12:3456:789a::1"),
    ("ipv4", "host 10.0.0.1", "private_ip", "10.0.0.1"),
    ("ipv4", "dns 8.8.8.8.", "public_ip", "8.8.8.8"),
    ("ipv4", "cgnat 100.64.1.1", "private_ip", "100.64.1.1"),
    ("ipv4", "imds 169.254.169.254", "special_ip", "169.254.169.254"),
    ("ipv4", "open 0.0.0.0/0", "special_cidr", "0.0.0.0/0"),
    ("ipv4", "vpc 172.16.0.0/12", "private_cidr", "172.16.0.0/12"),
    ("mac_address", "mac 00:1a:2b:3c:4d:5e", "mac_address", "00:1a:2b:3c:4d:5e"),
    ("mac_address", "mac 00-1A-2B-3C-4D-5E", "mac_address", "00-1A-2B-3C-4D-5E"),
    ("hostname", "see api.example.com and db.corp", "hostname", "api.example.com"),
    ("hostname", "https://web-1.prod.internal/x", "hostname", "web-1.prod.internal"),
    ("aws_account_id", "account 123456789012.", "aws_account_id", "123456789012"),
    ("timestamp", "at 2024-05-06T13:45:00Z", "timestamp", "2024-05-06T13:45:00Z"),
    ("timestamp", "at 2024-05-06 13:45:00.123+02:00", "timestamp", "2024-05-06 13:45:00.123+02:00"),
    ("uuid", f"id {GUID}", "uuid", GUID),
    ("high_entropy_secret", f"token {HIGH}", "secret_value", HIGH),
]  # fmt: skip


@pytest.mark.parametrize(("detector", "text", "entity", "value"), POSITIVES)
def test_detector_finds(detector: str, text: str, entity: str, value: str | None) -> None:
    hits = [hit for hit in found(text) if hit[0] == detector]
    assert hits, found(text)
    assert hits[0][1] == entity
    if value is not None:
        assert hits[0][2] == value


def test_every_detector_has_a_positive_case() -> None:
    """Hand-written cases here; the vendor families are drawn from their specs in test_transforms_families.py."""
    with_spec = {d.name for d in BUILTIN_DETECTORS if d.spec}
    assert {row[0] for row in POSITIVES} | with_spec == set(BUILTIN_BY_NAME)
    assert len(BUILTIN_DETECTORS) == len(BUILTIN_BY_NAME)


NEGATIVES = [
    "foo::bar std::vector",
    "password_last_used: 2024-01-01",
    "version 1.2",
    "12:30:45",
    "1234567890123",
    "000000000000",
    "111111111111",
    "sha256:" + "ab" * 32,
    "projects-list",
    "config.yaml",
    "password = null",
    "token: ${TOKEN}",
    "api_key: <your-api-key>",
    "secret: {{ vault.secret }}",
    "password: ********",
    "pwd=[REDACTED]",
    "999.1.1.1",
    "1.2.3.4.5",
    "The quick brown fox jumps over the lazy dog, every day, in the morning.",
    "Basic understanding_of_the_material_here",
    "tokens: 1500",
    "max_tokens=4096",
    "arn:aws",
    "AKIA123",
    "ghp_short",
    "see section 3.2.1 of the spec",
    "MAKIA",
    "postgres://user@",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_near_misses_and_placeholders_do_not_match(text: str) -> None:
    secretish = {"secret", "credential"}
    hits = [hit for hit in SCANNER.scan(text) if hit.detector.category in secretish or hit.detector.name in (
        "aws_account_id", "ipv4", "ipv6", "gcp_resource_name", "hostname", "azure_resource_id")]  # fmt: skip
    assert hits == [], [(h.detector.name, h.value) for h in hits]


def test_bare_uuid_is_not_an_azure_id_and_arn_swallows_its_account() -> None:
    assert [h[0] for h in found(GUID)] == ["uuid"]
    assert [h[0] for h in found("arn:aws:iam::123456789012:user/bob")] == ["aws_arn"]


def test_leftmost_non_overlapping_and_priority_at_equal_start() -> None:
    text = f"a {AKIA} b {GHP} c"
    hits = found(text)
    assert [h[0] for h in hits] == ["aws_access_key_id", "github_token"]
    # url_userinfo (5) and email (26) start at the same place: the earlier detector wins.
    assert found("https://bob@example.com/x")[0][0] == "url_userinfo"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.1.2.3", "private_ip"),
        ("192.168.0.0/16", "private_cidr"),
        ("100.64.0.1", "private_ip"),
        ("127.0.0.1", "special_ip"),
        ("255.255.255.255", "special_ip"),
        ("224.0.0.1", "special_ip"),
        ("8.8.8.0/24", "public_cidr"),
        ("0.0.0.0/0", "special_cidr"),
        ("::1", "special_ip"),
        ("fc00::/7", "private_cidr"),
        ("2600:1f18::1", "public_ip"),
        ("nonsense", None),
    ],
)
def test_ip_classification(text: str, expected: str | None) -> None:
    assert classify_ip_text(text) == expected


def test_placeholder_and_key_normalisation() -> None:
    assert is_placeholder("${X}") and is_placeholder("'null'") and is_placeholder("xxxx") and is_placeholder("…")
    assert not is_placeholder("hunter22")
    assert normalize_key("SecretAccessKey") == "secret_access_key"
    assert normalize_key("APIKey") == "api_key"
    assert normalize_key("x-api-key") == "x_api_key"


def test_hint_folding_catches_the_letters_case_insensitive_regexes_fold() -> None:
    sneaky = "pa\u017f\u017fword: hunter22"  # long s: re.IGNORECASE matches it as 's'
    assert "password" in fold_for_hints(sneaky)
    assert ("secret_assignment", "secret_value", "hunter22") in found(sneaky)


def test_custom_detectors_validators_and_disabling() -> None:
    custom = detector_from_config(
        {"name": "ticket", "pattern": r"TKT-(\d{6})", "group": 1, "hints": ["tkt-"], "category": "identifier"}, "d"
    )
    scanner = Scanner(tuple(merge_detectors(BUILTIN_DETECTORS, [custom], ["email"])))
    assert [(f.detector.name, f.value) for f in scanner.scan("TKT-123456 bob@example.com")] == [("ticket", "123456")]
    entropy = detector_from_config({"name": "e", "pattern": r"\w+", "validator": "entropy:2.0"}, "d")
    assert [f.value for f in Scanner((entropy,)).scan("aaaa abcd")] == ["abcd"]
    replaced = detector_from_config({"name": "email", "pattern": r"@@", "entity": "x"}, "d")
    merged = merge_detectors(BUILTIN_DETECTORS, [replaced], [])
    assert [d.name for d in merged].index("email") == [d.name for d in BUILTIN_DETECTORS].index("email")
    assert merged[[d.name for d in merged].index("email")].entity == "x"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"name": "x", "pattern": "("}, "pattern: not a valid regular expression"),
        ({"name": "x", "pattern": "(?P<n>a)"}, "numbered groups only"),
        ({"name": "x", "pattern": "a", "validator": "nope"}, "validator"),
        ({"name": "x", "pattern": "a", "group": 3}, "group"),
        ({"name": "x", "pattern": "a", "category": "weird"}, "category"),
        ({"name": "x", "pattern": "a", "colour": "red"}, "unknown field"),
        ({"pattern": "a"}, "name"),
    ],
)
def test_bad_custom_detectors_name_the_field_not_the_value(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        detector_from_config(config, "policy.detectors[0]")
    assert str(info.value).startswith("policy.detectors[0]")
    assert "(?P<n>" not in str(info.value)


def test_validator_names() -> None:
    assert validator_by_name("high_entropy:3.5")("Zx8Kq2Lm9Np4Rt7Vw1Yb3Cd6Fg0Hj5Ks", "e") == "e"
    with pytest.raises(ValueError):
        validator_by_name("entropy:zero")


# --- linear time on hostile input ---------------------------------------------------------------------------

MIB = 1 << 20
SEGMENT = 128 * 1024
GENERIC_UNITS = ("a", "A1b2", "1", "a.", "a-", "1:", "a@", "/", "=", "1.", '\\"', "a b ")


def _units(hints: tuple[str, ...]) -> list[str]:
    units = list(GENERIC_UNITS)
    for hint in hints:
        units += [hint, hint + "a1", hint.upper() + "A=", hint + '="', hint + "://a:"]
    return units


def _hostile_strings(hints: tuple[str, ...]) -> list[str]:
    """1 MiB strings, each made of 128 KiB runs of one repeated unit: a quadratic pattern would take minutes."""
    segments = [(u * (SEGMENT // len(u) + 1))[:SEGMENT] for u in _units(hints)]
    per = MIB // SEGMENT
    return ["".join(segments[i : i + per]).ljust(MIB, "a") for i in range(0, len(segments), per)]


@pytest.mark.parametrize("detector", BUILTIN_DETECTORS, ids=lambda d: d.name)
def test_detector_is_linear_on_one_mebibyte_of_hostile_input(detector: object) -> None:
    from interceptors.transforms.detectors import Detector

    assert isinstance(detector, Detector)
    # CPU time with wide bounds (a busy machine must not fail it): linear scans take well under a second,
    # a quadratic one on one MiB takes minutes.
    started = time.process_time()
    for text in _hostile_strings(detector.hints):
        assert len(text) == MIB
        begun = time.process_time()
        for _ in detector.pattern.finditer(text):
            pass
        assert time.process_time() - begun < 15.0, detector.name
    assert time.process_time() - started < 60.0, detector.name
