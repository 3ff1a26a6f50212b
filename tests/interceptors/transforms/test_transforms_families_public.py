"""Families a measurement on public corpora found caught 0 times (issue 29): each with true and false examples.

Every example here was written for this file from the family's documented format (the `source` of its entry in
`interceptors/transforms/vendors.py`); none is copied from another scanner's test data. True examples must
not come out of the standard pipeline; false examples must not be reported by the family (and, where the
look-alike is common public material, must come out of the standard pipeline unchanged).
"""

# ruff: noqa: E501  (example data reads best one example a line)
from __future__ import annotations

import base64
import binascii
import random
import struct
from typing import Any

import pytest

from interceptors.testing import RedactionTarget, find_leaks
from interceptors.testing.benign import altered
from interceptors.transforms import STANDARD_TRANSFORMS
from interceptors.transforms.catalog import BUILTIN_BY_NAME
from interceptors.transforms.detectors import Scanner

STANDARD = RedactionTarget.load(STANDARD_TRANSFORMS)
RNG = random.Random(29)


def _rand(alphabet: str, size: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(size))


HEX = "0123456789abcdef"
B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER36 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
CRYPT = "./" + B62


def _guid() -> str:
    return "-".join(_rand(HEX, n) for n in (8, 4, 4, 4, 12))


def _b64pem(kind: str) -> str:
    body = base64.b64encode(bytes(RNG.randrange(256) for _ in range(300))).decode()
    pem = f"-----BEGIN {kind}-----\n{body[:64]}\n{body[64:128]}\n{body[128:200]}\n-----END {kind}-----\n"
    return base64.b64encode(pem.encode()).decode()


def _ntlm(message_type: int) -> str:
    body = b"NTLMSSP\x00" + struct.pack("<I", message_type) + bytes(RNG.randrange(256) for _ in range(90))
    return base64.b64encode(body).decode()


MAPBOX = "sk.eyJ1IjoiYWNtZS1vcHMiLCJhIjoi" + _rand(B62, 30) + "In0." + _rand(B62 + "_-", 22)
PEM_B64 = _b64pem("RSA PRIVATE KEY")
SHA512CRYPT = "$6$" + _rand(CRYPT, 16) + "$" + _rand(CRYPT, 86)
POSITIVES: list[tuple[str, str, str]] = [
    ("mapbox_secret_token", f"MAPBOX_ACCESS_TOKEN={MAPBOX}", MAPBOX),
    ("base64_pem_private_key", f"users:\n- name: admin\n  user:\n    client-key-data: {PEM_B64}\n", PEM_B64),
    ("base64_pem_private_key", f'{{"data": {{"tls.key": "{(pk := _b64pem("PRIVATE KEY"))}"}}}}', pk),
    ("sentry_dsn", "SENTRY_DSN=https://" + (k := _rand(HEX, 32)) + "@o4504.ingest.us.sentry.io/45067", k),
    ("pgpass_password", "db.internal.example.com:5432:orders:app_rw:" + (pw := "Vq8#mLx2!pR7"), pw),
    ("pgpass_password", f"*:*:*:postgres:{(pw2 := 'n0t-The-Default-9')}\n", pw2),
    ("crypt_password_hash", f"root:{SHA512CRYPT}:19700:0:99999:7:::", SHA512CRYPT),
    ("crypt_password_hash", "hash = '$2b$12$" + (bc := _rand(CRYPT, 53)) + "'", bc),
    ("sidekiq_credentials", "export BUNDLE_ENTERPRISE__CONTRIBSYS__COM=" + (sk := f"{_rand(HEX, 8)}:{_rand(HEX, 8)}"), sk),
    ("sidekiq_credentials", f"source 'https://{(sk2 := _rand(HEX, 8) + ':' + _rand(HEX, 8))}@gems.contribsys.com/'", sk2),
    ("sourcegraph_token", "SRC_ACCESS_TOKEN=sgp_" + (sg := _rand(HEX, 16) + "_" + _rand(HEX, 40)), sg),
    ("hubspot_token", "Authorization: Bearer pat-na1-" + (hs := _guid()), hs),
    ("plaid_token", '{"access_token": "access-production-' + (pl := _guid()) + '"}', pl),
    ("shippo_token", "Authorization: ShippoToken shippo_live_" + (sh := _rand(HEX, 40)), sh),
    ("flutterwave_key", "FLW_SECRET_KEY=FLWSECK_TEST-" + (fw := _rand(HEX, 32)) + "-X", fw),
    ("onepassword_secret_key", "Secret Key: " + (op := "A3-" + "-".join(_rand(UPPER36, n) for n in (6, 6, 5, 5, 5, 5))), op),
    ("cloudflare_origin_ca_key", "X-Auth-User-Service-Key: v1.0-" + (cf := _rand(HEX, 24) + "-" + _rand(HEX, 146)), cf),
    ("aws_mws_key", "mws_auth_token: amzn.mws." + (mws := _guid()), mws),
    ("deepseek_api_key", "client = OpenAI(api_key='sk-" + (ds := _rand(HEX, 32)) + "', base_url=URL)", ds),
    ("together_api_key", "TOGETHER_API_KEY=tgp_v1_" + (tg := _rand(B62 + "_-", 43)), tg),
    ("salesforce_access_token", "Authorization: Bearer 00D5g000004Xyz1!" + (sf := _rand(B62, 20) + "." + _rand(B62, 84)), sf),
    ("github_installation_token", "token ghs_20260301_eyJ" + (gh := _rand(B62, 60) + ".eyJ" + _rand(B62, 90) + "." + _rand(B62, 43)), gh),
    ("ntlm_authenticate_message", "Authorization: NTLM " + (nt := _ntlm(3)), nt),
    ("ntlm_hash_dump", "svc_backup:1107:aad3b435b51404eeaad3b435b51404ee:" + (nh := _rand(HEX, 32)) + ":::", nh),
    ("otpauth_secret", "otpauth://totp/Acme:bob@example.com?secret=" + (otp := _rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 32)) + "&issuer=Acme", otp),
    ("powershell_secure_string", '$pw = ConvertTo-SecureString "' + (ps := "Pl41n-T3xt!pw") + '" -AsPlainText -Force', ps),
    ("powershell_secure_string", "ConvertTo-SecureString -String " + (ps2 := "u7Yq#Lm3Zx") + " -AsPlainText -Force", ps2),
    ("sonarqube_token", "sonar.login=squ_" + (sq := _rand(HEX, 40)), sq),
    ("intra42_client_secret", "FT_SECRET=s-s4t2ud-" + (ft := _rand(HEX, 64)), ft),
    ("flyio_token", "FLY_API_TOKEN=fo1_" + (fo := _rand(B62 + "_-", 43)), fo),
    ("flyio_token", "Authorization: FlyV1 fm2_" + (fm := _rand(B62 + "+/", 160)), fm),
    ("new_relic_browser_key", "licenseKey: 'NRJS-" + (nr := _rand(HEX, 19)) + "'", nr),
    ("frameio_token", "FRAMEIO_TOKEN=fio-u-" + (fio := _rand(B62 + "_-", 64)), fio),
    ("settlemint_token", "SETTLEMINT_ACCESS_TOKEN=sm_pat_" + (sm := _rand(B62, 16)), sm),
    ("duffel_token", "Authorization: Bearer duffel_live_" + (du := _rand(B62 + "_-", 43)), du),
    ("twitter_bearer_token", "TWITTER_BEARER=" + (tw := "A" * 21 + "Q" + _rand("abcdefghijklmnopqrstuvwxyz", 4) + "AAAAAAAA" + _rand(B62, 30) + "%2B" + _rand(B62, 50)), tw),
    ("airtable_token", "AIRTABLE_TOKEN=pat" + (at := _rand(B62, 14) + "." + _rand(HEX, 64)), at),
    ("defined_networking_key", "DN_API_KEY=dnkey-" + (dn := _rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 26) + "-" + _rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 52)), dn),
    ("aws_bedrock_api_key", "AWS_BEARER_TOKEN_BEDROCK=" + (br := "ABSK" + base64.b64encode(b"BedrockAPIKey-" + bytes(RNG.randrange(256) for _ in range(90))).decode().rstrip("=")), br),
    ("dropbox_token", "DROPBOX_TOKEN=sl." + (db := _rand(B62 + "_-", 140)), db),
    ("cli_secret_flag", "gpg --batch --passphrase " + (gp := "Qm4x!Tz8Lw") + " -d backup.gpg", gp),
    ("cli_secret_flag", "Connect-VIServer -Server vc01 -User admin -Password '" + (vc := "Vc3nter#2026") + "'", vc),
    ("cli_secret_flag", "deploy --api-key=" + (ak := "k7Hq2Zp9Wm4R") + " --env prod", ak),
    ("grafana_provisioned_key", "GF_KEY=" + (gf := base64.b64encode(b'{"k":"' + _rand(B62, 32).encode() + b'","n":"ci-bot","id":7}').decode()), gf),
    ("new_relic_license_key", "NEW_RELIC_LICENSE_KEY=eu01x" + (nl := _rand(HEX, 31) + "NRAL"), nl),
    ("new_relic_license_key", "browser: NRBR-" + (nb := _rand(HEX, 19)), nb),
    ("wundergraph_key", "COSMO_API_KEY=cosmo_" + (wg := _rand(HEX, 32)), wg),
    ("openssl_pass_argument", "openssl pkcs12 -export -passout pass:" + (osp := "Pk12!Exp0rt") + " -out c.p12", osp),
    ("curlopt_password", 'curl_easy_setopt(h, CURLOPT_USERPWD, "svc:' + (cu := "Cu7l!Pw9z") + '");', cu),
    ("aws_bedrock_api_key", "AWS_BEARER_TOKEN_BEDROCK=bedrock-api-key-" + (bs := base64.b64encode(b"bedrock.amazonaws.com/?Action=CallWithBearerToken&X=" + _rand(B62, 40).encode()).decode()), bs),
    ("call_argument_secret", 'System.setProperty("KAFKA_PASSWORD", "' + (kp := "kf-Pa55-w0rd") + '");', kp),
    ("call_argument_secret", "define('AUTH_SECRET', '" + (ws := "q9!Zr2@Lm5#x") + "');", ws),
    ("sidekiq_credentials", "<BUNDLE_GEMS__CONTRIBSYS__COM>\n  " + (sk3 := f"{_rand(HEX, 8)}:{_rand(HEX, 8)}") + "\n</BUNDLE_GEMS__CONTRIBSYS__COM>", sk3),
    ("sourcegraph_labelled_token", "SOURCEGRAPH_TOKEN=" + (sg2 := _rand("0123456789abcdefABCDEF", 40)), sg2),
    ("sumologic_access_id", 'SUMO_ACCESS_ID = "' + (sl := "su" + _rand(B62, 12)) + '"', sl),
    ("sumologic_access_id", "sumologic.accessId: " + (sl2 := "su" + _rand(B62, 12)), sl2),
    ("curl_authorization_header", 'curl -H "Authorization: Api-Token ' + (ah := _rand(HEX, 40)) + '" https://api.example.com/v1', ah),
    ("curl_authorization_header", "curl --header 'Authorization: " + (ah2 := _guid()) + "'", ah2),
    # a random key of letters only (1 in 280 of 32 base62 characters has no digit)
    ("curl_authorization_header", 'curl --header "Authorization: LVNAeYEneWCLBwGNJFWOKPZmWIIASsrC"', "LVNAeYEneWCLBwGNJFWOKPZmWIIASsrC"),
    ("curl_user_credentials", 'curl -u ":' + (cp := "Zq8!mW2xKp4") + '" https://search.internal:9200', cp),
    ("curl_user_credentials", "curl -u " + (ck := "rk_" + _rand(B62, 24)) + ": https://api.example.com/v1/charges", ck),
    ("curl_user_credentials", "curl --user deploy:'" + (cq := "Hq7vT2m9Lp4x") + "' -X PATCH", cq),
    ("call_argument_secret", 'token = os.getenv("API_TOKEN", "' + (gd := "d3v-T0ken-9xQ") + '")', gd),
    ("vercel_token", "VERCEL_TOKEN=" + (vc := "vcp_" + _rand(B62, 56)), vc),
    ("posthog_personal_api_key", '{"personal_api_key": "' + (ph := "phx_" + _rand(B62, 60)) + '"}', ph),
    ("notion_token", "Authorization: Bearer " + (nt := "ntn_" + _rand("0123456789", 11) + _rand(B62, 35)), nt),
    ("tavily_api_key", "client = TavilyClient(api_key='" + (tv := "tvly-dev-" + _rand(B62, 32)) + "')", tv),
    ("llamacloud_api_key", "export LLAMA_CLOUD_API_KEY=" + (ll := "llx-" + _rand(B62, 48)), ll),
    ("cloudflare_api_token", "CLOUDFLARE_API_TOKEN: " + (cu := "cfut_" + _rand(B62, 48)), cu),
    ("netlify_access_token", "netlify deploy --auth " + (nf := "nfp_" + _rand(B62, 36)), nf),
    ("postman_collection_token", "https://api.getpostman.com/collections/1?access_key=" + (pm := "PMAT-" + _rand(UPPER36, 26)), pm),
    ("docker_swarm_secret", "docker swarm join --token " + (sw := "SWMTKN-1-" + _rand("abcdefghijklmnopqrstuvwxyz0123456789", 50) + "-" + _rand("abcdefghijklmnopqrstuvwxyz0123456789", 25)) + " 10.0.0.5:2377", sw),
    ("nats_nkey_seed", "seed: " + (nk := "SU" + _rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 56)), nk),
]  # fmt: skip

NEGATIVES: list[tuple[str, str]] = [
    ("mapbox_secret_token", "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGV4YW1wbGUifQ.public-token-part-here"),
    ("mapbox_secret_token", "see sk.eyJ for the prefix"),
    ("base64_pem_private_key", f"certificate-authority-data: {_b64pem('CERTIFICATE')}"),
    ("base64_pem_private_key", f"cert: {_b64pem('PUBLIC KEY')}"),
    ("sentry_dsn", "https://sentry.io/organizations/acme/issues/4503/"),
    ("pgpass_password", "main.go:12:5: undefined: foo"),
    ("pgpass_password", "10:30:45:12:99:88"),
    ("pgpass_password", "localhost:5432"),
    ("crypt_password_hash", "It costs $5$ and $6$ less."),
    ("crypt_password_hash", "$6$saltonly$"),
    ("sidekiq_credentials", "BUNDLE_GEMS__CONTRIBSYS__COM=${SIDEKIQ_CREDENTIALS}"),
    ("sourcegraph_token", "sgp_ is the prefix of Sourcegraph tokens"),
    ("hubspot_token", "pat-na1-<your token here>"),
    ("plaid_token", "access-sandbox-TOKEN"),
    ("shippo_token", "shippo_live_<token>"),
    ("flutterwave_key", "FLWPUBK_TEST-" + _rand(HEX, 32) + "-X"),
    ("onepassword_secret_key", "A3-ABC123 is an account"),
    ("cloudflare_origin_ca_key", "v1.0-beta release notes"),
    ("aws_mws_key", "amzn.mws.example"),
    ("deepseek_api_key", "scan-disk-" + _rand(HEX, 32)),
    ("deepseek_api_key", "sk-00000000000000000000000000000000"),
    ("together_api_key", "tgp_v1_short"),
    ("salesforce_access_token", "org id 00D5g000004Xyz1EAA"),
    ("github_installation_token", "ghs_20260301_notajwt"),
    ("ntlm_authenticate_message", "WWW-Authenticate: NTLM " + _ntlm(2)),
    ("ntlm_authenticate_message", "Authorization: NTLM " + _ntlm(1)),
    ("ntlm_hash_dump", "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash"),
    ("otpauth_secret", "otpauth://totp/Acme:bob@example.com?issuer=Acme&digits=6"),
    ("powershell_secure_string", "$s = ConvertTo-SecureString $env:DB_PASSWORD -AsPlainText -Force"),
    ("powershell_secure_string", "Read-Host -AsSecureString | ConvertFrom-SecureString | ConvertTo-SecureString"),
    ("powershell_secure_string", "$p = ConvertTo-SecureString (Get-Content .\\pw.txt)"),
    ("sonarqube_token", "squ_ tokens are shown once"),
    ("intra42_client_secret", "s-s4t2ud-" + "0" * 10),
    ("flyio_token", "fo1_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("new_relic_browser_key", "NRJS-xxxxxxxxxxxxxxxxxxx"),
    ("frameio_token", "fio-u-<token>"),
    ("settlemint_token", "sm_pat_XXXXXXXXXXXXXXXX"),
    ("duffel_token", "duffel_test_EXAMPLEexampleEXAMPLEexampleEXAMPLEexamp"),
    ("twitter_bearer_token", "A" * 120),
    ("airtable_token", "patterns.example.com"),
    ("defined_networking_key", "dnkey-EXAMPLE"),
    ("aws_bedrock_api_key", "ABSKQmVkcm9ja0FQSUtleS1EXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLE="),
    ("dropbox_token", "sl.no 4 in the table"),
    ("cli_secret_flag", "kubectl --token $KUBE_TOKEN get pods"),
    ("cli_secret_flag", "tool --token file.txt --secret my-secret-name"),
    ("cli_secret_flag", "aws secretsmanager get-secret-value --secret arn:aws:secretsmanager:eu-west-1:1:secret:x"),
    ("cli_secret_flag", "app --password-file /run/secrets/db --token-file ~/.tok"),
    ("cli_secret_flag", "pin --pwd 12345678"),
    ("call_argument_secret", 'props.put("token", tokenFromVault());'),
    ("grafana_provisioned_key", "eyJrIjoi" + base64.b64encode(b"nothing json here at all, really not").decode()),
    ("new_relic_license_key", "see the NRAL suffix"),
    ("wundergraph_key", "cosmo_router"),
    ("openssl_pass_argument", "openssl enc -aes256 -pass env:BACKUP_PW -in x"),
    ("curlopt_password", "curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);"),
    ("aws_bedrock_api_key", "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29x"),
    ("call_argument_secret", 'System.setProperty("API_KEY", "${API_KEY}")'),
    ("call_argument_secret", 'fields = ("token", "password")'),
    ("sourcegraph_labelled_token", "sourcegraph: see the docs for a token"),
    ("sumologic_access_id", "sumObj = suGyK5imvQDdvU"),
    ("sumologic_access_id", "export SUMOLOGIC_ACCESSID=${SUMOLOGIC_ACCESSID}"),
    ("curl_authorization_header", 'curl -H "Authorization: Token $API_TOKEN" https://api.example.com'),
    ("curl_authorization_header", 'curl -H "Authorization: NegotiateAuthenticationScheme" https://intranet'),
    ("curl_authorization_header", 'curl -H "Authorization: Bearer <your token>" https://api.example.com'),
    ("curl_user_credentials", "curl -u 'test:test' https://localhost"),
    ("curl_user_credentials", 'curl --user "${USER}:${PASSWORD}" https://ci'),
    ("curl_user_credentials", "curl --user neo4j:[PASSWORD] http://db:7474/"),
    ("curl_user_credentials", "curl -u <user:password> https://api.example.com/endpoint"),
    ("vercel_token", "vcp_" + "Q7b" * 16 + "ThisIsAnExample1"),
    ("posthog_personal_api_key", "POSTHOG_PROJECT_KEY=phc_" + "Qm4" * 15),  # the public project key
    ("notion_token", "ntn_ is the prefix of Notion's integration tokens"),
    ("tavily_api_key", "tvly-dev-Wm3kP9dQz7LrT2vN8xH4" + "abcdef012345"),
    ("llamacloud_api_key", "llx-your-key-here"),
    ("cloudflare_api_token", "cfut_" + "Hq2Lm" * 7 + "yourtokenexample"),
    ("netlify_access_token", "nfp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("postman_collection_token", "PMAT-XXXXXXXXXXXXXXXXXXXXXXXXXX"),
    ("docker_swarm_secret", "SWMKEY-1-" + "Dk4" * 9 + "PlaceholderKey01"),
    ("nats_nkey_seed", "UAML2GCZ7IK7E7UD4VZ7ELPZW7DK2ZNL35WSMW3IORHC3BWBSDQXUQRBU is a public user key"),
]

PUBLIC_MATERIAL = [  # look-alikes that are public: the whole standard pipeline leaves them as they are
    f"clusters:\n- cluster:\n    certificate-authority-data: {_b64pem('CERTIFICATE')}\n    server: https://k8s:6443\n",
    "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGV4YW1wbGUifQ.public-token-part-here",
    "main.go:12:5: undefined: foo",
]


def _tool(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@pytest.mark.parametrize(("family", "text", "secret"), POSITIVES, ids=[f"{p[0]}-{i}" for i, p in enumerate(POSITIVES)])
def test_true_example_is_found_by_its_family_and_redacted(family: str, text: str, secret: str) -> None:
    alone = Scanner((BUILTIN_BY_NAME[family],))
    at = text.find(secret)
    assert at >= 0
    assert [f for f in alone.scan(text) if f.start <= at and f.end >= at + len(secret)], family
    assert not find_leaks(STANDARD.transform("tools/call", _tool(text)), [secret]), family


@pytest.mark.parametrize(("family", "text"), NEGATIVES, ids=[f"{n[0]}-{i}" for i, n in enumerate(NEGATIVES)])
def test_false_example_is_not_reported_by_the_family(family: str, text: str) -> None:
    assert Scanner((BUILTIN_BY_NAME[family],)).scan(text) == []


@pytest.mark.parametrize("text", PUBLIC_MATERIAL)
def test_public_look_alikes_pass_the_standard_pipeline_unchanged(text: str) -> None:
    payload = _tool(text)
    assert not altered(payload, STANDARD.transform("tools/call", payload))


def test_every_new_family_has_a_source_a_spec_and_examples_both_ways() -> None:
    families = {p[0] for p in POSITIVES}
    assert families == {n[0] for n in NEGATIVES}
    for name in families:
        detector = BUILTIN_BY_NAME[name]
        assert detector.spec and detector.source, name


@pytest.mark.parametrize(
    ("family", "value"),
    [
        ("onepassword_secret_key", "A3-XXXXXX-XXXXXXXXXXX-XXXXX-XXXXX-XXXXX"),
        ("together_api_key", "tgp_v1_LRvIfXDN2VjuqCi5zcGzrMx3oIwIOhhIZxxxxxxxxxx"),
        ("sourcegraph_token", "sgp_5555555dAAAAA7777777CcccCFaaaaaaaaaaaaaa"),
        (
            "ntlm_authenticate_message",
            "TlRMTVNTUAADAAAAGAAYAFYAAAAYABgAbgAAAAAAAABIAAAADgAOAEgAAAAAAAAAVgAAAAAAAACGAAAARmThisIsAnExample",
        ),
        ("hubspot_token", "pat-na1-00000000-0000-0000-0000-000000000000"),
        ("gitlab_token", "glrt-tx_xxxxxxxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxx"),
        ("supabase_token", "sbp_v0_7558c5a93d6f38dd038df5cc2a7c3d4d7babcdef"),
        ("wundergraph_key", "cosmo_abcdef123455678908359f980be71580"),
    ],
)
def test_documentation_values_are_not_reported_by_the_new_families(family: str, value: str) -> None:
    """EXAMPLE spelled out (also in base64), runs of x or of one character, "ThisIs…": documentation, not keys."""
    assert Scanner((BUILTIN_BY_NAME[family],)).scan(value) == []


def test_verification_decodes_what_the_prefix_promises() -> None:
    """The base64-PEM and NTLM families decode their match: a header that is not a private key, or an NTLM
    message that is not an AUTHENTICATE, is not reported even with the right first characters."""
    pem = Scanner((BUILTIN_BY_NAME["base64_pem_private_key"],))
    fake = base64.b64encode(b"-----BEGIN X509 CRL-----\n" + bytes(range(80))).decode()
    assert fake.startswith("LS0tLS1CRUdJTi") and pem.scan(fake) == []
    ntlm = Scanner((BUILTIN_BY_NAME["ntlm_authenticate_message"],))
    broken = "TlRMTVNTUAAD" + "BBBB" + base64.b64encode(bytes(60)).decode()
    assert ntlm.scan(broken) == []
    with pytest.raises(binascii.Error):
        base64.b64decode("TlRMTVNTUAAD!", validate=True)


def test_random_letters_are_told_from_names() -> None:
    """A header's credential may be letters only: random letters of both cases are a key, PascalCase names not."""
    from interceptors.transforms.entities import random_letters

    rng = random.Random(2624)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    drawn = ["".join(rng.choice(letters) for _ in range(rng.randint(32, 40))) for _ in range(5000)]
    assert sum(map(random_letters, drawn)) >= 0.995 * len(drawn)
    names = [
        "NegotiateAuthenticationScheme",
        "XMLHttpRequestEventTarget",
        "getAuthorizationHeaderValue",
        "InternalServerErrorExceptionHandlerFactory",
        "PleaseReplaceWithYourOwnToken",
        "abcdefghijklmnopqrstuvwx",
    ]
    assert not any(map(random_letters, names))
