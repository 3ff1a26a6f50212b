"""The `tool_outputs` corpus: realistic benign tool results built at run time from public material.

Sources are read where they already are, never committed: bare git snapshots of public repositories under
`--tool-sources DIR` (one `owner+name/repo` git directory each, read with `git show`/`git log`), and the
machine's own public files (`/etc/ssl/certs`, `/etc/apt/trusted.gpg.d`, `/usr/share/postgresql`, PNGs under
`/usr/share`, the interpreter's standard library). Each item is what a tool would return: a file's text, an
excerpt of a lockfile, a JSON API object, `git log` output, an HTTP response dump, an email with an attached
image. Where a format's values are per-response random (a CSP nonce, an S3 `x-amz-id-2`, a ULID), they are
drawn from a seeded generator in the documented shape. An item that holds anything shaped like a live
credential (a private key block, a cloud key id, a Stripe client secret) is left out and counted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import subprocess
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MAX_ITEM = 6000
PER_CATEGORY = 14
_CREDENTIAL = re.compile(
    r"PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|github_pat_|\b[sr]k_(?:live|test)_[0-9A-Za-z]"
    r"|_secret_[0-9A-Za-z]{10,}|\bxox[abposr]-|\bAIza[0-9A-Za-z_-]{30}|\bglpat-|\bnpm_[A-Za-z0-9]{30}|\bek_test_"
    r"|\bwhsec_|\bpst_(?:live|test)_|\"client_secret\":\s*\"[^\"]"
    # a TOTP seed in an AWS MFA response; a Ceph key (`AQ…==`) or its base64 (`QVFB…`) in Kubernetes' examples
    r"|<Base32StringSeed>[A-Z2-7]|\bAQ[A-Za-z0-9+/]{38}==|\bQVFB[A-Za-z0-9+/]{48,}"
)


class Sources:
    """The snapshots found under a folder (`owner+name/repo` bare git directories) and the skipped count."""

    def __init__(self, folder: Path | None) -> None:
        self.repos: dict[str, Path] = {}
        if folder is not None and folder.is_dir():
            for path in sorted(folder.iterdir()):
                gitdir = path / "repo" if (path / "repo").is_dir() else path
                if (gitdir / "HEAD").is_file():
                    self.repos[path.name.replace("+", "/")] = gitdir
        self.skipped: dict[str, int] = {}
        self.used: set[str] = set()

    def git(self, repo: str, *args: str) -> str | None:
        gitdir = self.repos.get(repo)
        if gitdir is None:
            return None
        done = subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, timeout=120)
        if done.returncode != 0:
            return None
        self.used.add(repo)
        return done.stdout.decode("utf-8", "replace")

    def files(self, repo: str, pattern: str) -> list[str]:
        listing = self.git(repo, "ls-tree", "-r", "--name-only", "HEAD") or ""
        return [p for p in listing.splitlines() if re.search(pattern, p)]

    def show(self, repo: str, path: str, rev: str = "HEAD") -> str | None:
        return self.git(repo, "show", f"{rev}:{path}")


def _pick(values: list[Any], count: int, salt: str) -> list[Any]:
    """A stable sample: the values whose hash (with a salt) is lowest, in their original order."""
    keyed = sorted(range(len(values)), key=lambda i: hashlib.sha256(f"{salt}:{values[i]}".encode()).digest())
    return [values[i] for i in sorted(keyed[:count])]


def _excerpts(text: str, count: int, lines: int, salt: str) -> list[str]:
    rows = text.splitlines(keepends=True)
    starts = list(range(0, max(1, len(rows) - lines), max(1, lines)))
    return ["".join(rows[s : s + lines])[:MAX_ITEM] for s in _pick(starts, count, salt)]


# --- certificates and public keys -----------------------------------------------------------------------------


def _certs() -> list[tuple[str, Any]]:
    from cryptography import x509

    warnings.filterwarnings("ignore", message="Parsed a serial number", module=__name__)
    out = []
    for path in sorted(Path("/etc/ssl/certs").glob("*.pem")):
        try:
            pem = path.read_text()
            out.append((pem, x509.load_pem_x509_certificate(pem.encode())))
        except (OSError, ValueError):
            continue
    return _pick(out, 60, "certs") if out else []


def _cn(cert: Any) -> str:
    return str(cert.subject.rfc4514_string())


def tls_chain(src: Sources) -> Iterator[str]:
    certs = _certs()
    for n in range(0, min(len(certs), PER_CATEGORY * 2), 2):
        pair = certs[n : n + 2]
        body = ["---", "Certificate chain"]
        for depth, (pem, cert) in enumerate(pair):
            body += [f" {depth} s:{_cn(cert)}", f"   i:{cert.issuer.rfc4514_string()}", pem.strip()]
        yield "\n".join(body) + "\n---\n"


def x509_text(src: Sources) -> Iterator[str]:
    for pem, _ in _certs()[:PER_CATEGORY]:
        done = subprocess.run(["openssl", "x509", "-text", "-noout"], input=pem.encode(), capture_output=True)
        if done.returncode == 0:
            yield done.stdout.decode()[:MAX_ITEM]


def x509_json(src: Sources) -> Iterator[Any]:
    from cryptography.hazmat.primitives import hashes

    for pem, cert in _certs()[20 : 20 + PER_CATEGORY]:
        digest = cert.fingerprint(hashes.SHA256()).hex().upper()
        yield {"subject": _cn(cert), "issuer": cert.issuer.rfc4514_string(), "serial": format(cert.serial_number, "x"),
               "not_after": cert.not_valid_after_utc.isoformat(), "sha256_fingerprint": ":".join(
                   digest[i : i + 2] for i in range(0, len(digest), 2)), "pem": pem}  # fmt: skip


def public_key_pem(src: Sources) -> Iterator[str]:
    from cryptography.hazmat.primitives import serialization

    for _, cert in _certs()[30 : 30 + PER_CATEGORY]:
        key = cert.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        yield f"Public key of {_cn(cert)}:\n{key.decode()}"


def jwks(src: Sources) -> Iterator[Any]:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    def b64u(number: int) -> str:
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    certs = _certs()
    for n in range(0, min(len(certs), PER_CATEGORY * 2), 2):
        keys = []
        for _, cert in certs[n : n + 2]:
            pub = cert.public_key()
            der = cert.public_bytes(serialization.Encoding.DER)
            kid = base64.urlsafe_b64encode(cert.fingerprint(hashes.SHA1())).rstrip(b"=").decode()
            common = {"kid": kid, "use": "sig", "x5t": kid, "x5c": [base64.b64encode(der).decode()]}
            if isinstance(pub, rsa.RSAPublicKey):
                nums = pub.public_numbers()
                keys.append({"kty": "RSA", "alg": "RS256", "n": b64u(nums.n), "e": b64u(nums.e), **common})
            elif isinstance(pub, ec.EllipticCurvePublicKey):
                point = pub.public_numbers()
                curve = {"secp256r1": "P-256", "secp384r1": "P-384"}.get(pub.curve.name, pub.curve.name)
                keys.append({"kty": "EC", "crv": curve, "x": b64u(point.x), "y": b64u(point.y), **common})
        yield {"keys": keys}


def ssh_public(src: Sources) -> Iterator[str]:
    from cryptography.hazmat.primitives import serialization

    certs = _certs()
    for n in range(0, min(len(certs), PER_CATEGORY * 3), 3):
        lines = []
        for index, (_, cert) in enumerate(certs[n : n + 3]):
            try:
                key = cert.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            except (ValueError, TypeError):
                continue
            host = f"git{index}.example.org"
            lines.append(f"{host} {key.decode()}" if n % 2 else f"{key.decode()} deploy@{host}")
        yield ("# ~/.ssh/known_hosts\n" if n % 2 else "# ~/.ssh/authorized_keys\n") + "\n".join(lines) + "\n"


def pgp_public(src: Sources) -> Iterator[str]:
    for path in sorted(Path("/etc/apt/trusted.gpg.d").glob("*.asc")):
        yield path.read_text()[:MAX_ITEM]


def pgp_listing(src: Sources) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as home:
        for path in sorted(Path("/etc/apt/trusted.gpg.d").glob("*.asc")):
            done = subprocess.run(["gpg", "--homedir", home, "--show-keys", "--with-fingerprint", str(path)],
                                  capture_output=True)  # fmt: skip
            if done.returncode == 0:
                yield done.stdout.decode()


# --- lockfiles and manifests ----------------------------------------------------------------------------------


def go_sum(src: Sources) -> Iterator[str]:
    for repo in ("gitleaks/gitleaks", "hashicorp/terraform-json", "oklog/ulid", "segmentio/ksuid"):
        text = src.show(repo, "go.sum")
        if text:
            yield from _excerpts(text, 4, 30, repo)


def pip_record(src: Sources) -> Iterator[str]:
    root = Path(sysconfig.get_paths()["stdlib"]) / "site-packages"
    records = sorted(root.glob("*.dist-info/RECORD"))
    for path in _pick(records, PER_CATEGORY, "record"):
        yield from _excerpts(path.read_text(), 1, 40, str(path))


def lock_excerpts(repo: str, path: str, lines: int, count: int = PER_CATEGORY) -> Callable[[Sources], Iterator[str]]:
    def build(src: Sources) -> Iterator[str]:
        text = src.show(repo, path)
        if text:
            yield from _excerpts(text, count, lines, path)

    return build


def npm_integrity(src: Sources) -> Iterator[str]:
    text = src.show("panva/jose", "package-lock.json") or src.show(
        "modelcontextprotocol/conformance", "package-lock.json"
    )
    if not text:
        return
    entries = [(k, v) for k, v in json.loads(text).get("packages", {}).items() if k and "integrity" in v]
    for name, entry in _pick(entries, PER_CATEGORY, "npm"):
        pkg = name.rsplit("node_modules/", 1)[-1]
        yield (f"{pkg}@{entry.get('version')} | {entry.get('license', 'MIT')}\n\ndist\n"
               f".tarball: {entry.get('resolved')}\n.integrity: {entry['integrity']}\n")  # fmt: skip


def manifests(pattern: str, repos: tuple[str, ...], count: int = PER_CATEGORY) -> Callable[[Sources], Iterator[str]]:
    def build(src: Sources) -> Iterator[str]:
        found = [(repo, path) for repo in repos for path in src.files(repo, pattern)]
        for repo, path in _pick(found, count, pattern):
            text = src.show(repo, path)
            if text and text.strip():
                yield text[:MAX_ITEM]

    return build


# --- API objects ----------------------------------------------------------------------------------------------


def _stripe(src: Sources) -> dict[str, Any]:
    text = src.show("stripe/openapi", "openapi/fixtures3.json")
    return dict(json.loads(text)["resources"]) if text else {}


def stripe_object(src: Sources) -> Iterator[Any]:
    resources = _stripe(src)
    for name in _pick(sorted(resources), PER_CATEGORY * 2, "stripe"):
        yield resources[name]


def stripe_list(src: Sources) -> Iterator[Any]:
    resources = _stripe(src)
    for name in _pick(sorted(resources), PER_CATEGORY, "stripe-list"):
        obj = resources[name]
        yield {"object": "list", "data": [obj], "has_more": False, "url": f"/v1/{name.replace('.', '/')}s"}


def stripe_event(src: Sources) -> Iterator[Any]:
    resources = _stripe(src)
    event = resources.get("event")
    if not event:
        return
    for name in _pick(sorted(resources), PER_CATEGORY, "stripe-event"):
        yield {**event, "type": f"{name}.updated", "data": {"object": resources[name]}}


def aws_xml(src: Sources) -> Iterator[str]:
    repo = "boto/botocore"
    paths = src.files(repo, r"tests/unit/response_parsing/xml/(responses|errors)/.*\.xml$")
    for path in _pick(paths, PER_CATEGORY * 2, "awsxml"):
        text = src.show(repo, path)
        if text:
            yield text[:MAX_ITEM]


def aws_parsed(src: Sources) -> Iterator[Any]:
    repo = "boto/botocore"
    paths = src.files(repo, r"tests/unit/response_parsing/xml/responses/.*\.json$")
    for path in _pick(paths, PER_CATEGORY, "awsjson"):
        text = src.show(repo, path)
        if text:
            yield json.loads(text)


def aws_headers(src: Sources) -> Iterator[str]:
    repo = "boto/botocore"
    ids = sorted(set(re.findall(r"<RequestId>([^<]+)", src.git(repo, "grep", "-h", "<RequestId>", "HEAD", "--",
                                                                  "tests") or "")))  # fmt: skip
    rng = random.Random(29)
    for request_id in _pick(ids, PER_CATEGORY, "awshdr"):
        host_id = base64.b64encode(rng.randbytes(48)).decode()
        yield (f"HTTP/1.1 200 OK\nx-amz-id-2: {host_id}\nx-amz-request-id: {request_id[:16].upper()}\n"
               f"Date: Tue, 03 Nov 2026 10:{rng.randrange(60):02d}:00 GMT\nETag: \"{rng.randbytes(16).hex()}\"\n"
               f"Content-Type: application/xml\nServer: AmazonS3\n\n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               f"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
               f"<RequestId>{request_id}</RequestId><HostId>{host_id}</HostId></Error>\n")  # fmt: skip


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def ids_json(src: Sources) -> Iterator[Any]:
    rng = random.Random(2029)
    names = [p for p in (src.files("kubernetes/examples", r"\.ya?ml$") or ["item"])]
    for n in range(PER_CATEGORY):
        rows = []
        for k in range(4):
            ulid = "".join(rng.choice(_CROCKFORD[:8] if i == 0 else _CROCKFORD) for i in range(26))
            ksuid = "".join(rng.choice(_BASE62) for _ in range(27))
            uid = str(__import__("uuid").UUID(bytes=rng.randbytes(16), version=4))
            rows.append({"id": [ulid, ksuid, uid][(n + k) % 3], "request_id": uid,
                         "name": names[(n * 4 + k) % len(names)],
                         "created_at": f"2026-0{1 + n % 9}-1{k}T08:1{k}:00Z"})  # fmt: skip
        yield {"data": rows, "next_cursor": rows[-1]["id"], "has_more": n % 2 == 0}


def otel(src: Sources) -> Iterator[Any]:
    repo = "open-telemetry/opentelemetry-proto"
    for name in ("logs", "trace", "metrics", "events"):
        for rev in (src.git(repo, "log", "--format=%H", "-n", "3", "--", f"examples/{name}.json") or "").split():
            text = src.show(repo, f"examples/{name}.json", rev)
            if text:
                yield text[:MAX_ITEM]


def trace_logs(src: Sources) -> Iterator[str]:
    rng = random.Random(4129)
    paths = src.files("kubernetes/examples", r"\.ya?ml$") or ["/"]
    for n in range(PER_CATEGORY):
        lines = []
        for k in range(8):
            trace, span = rng.randbytes(16).hex(), rng.randbytes(8).hex()
            lines.append(f"2026-11-0{1 + n % 9}T12:{k:02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z INFO "
                         f"http.server GET /{paths[(n * 8 + k) % len(paths)]} 200 "
                         f"trace_id={trace} span_id={span} traceparent=00-{trace}-{span}-01")  # fmt: skip
        yield "\n".join(lines) + "\n"


# --- web pages ------------------------------------------------------------------------------------------------


def html_sri(src: Sources) -> Iterator[str]:
    repo = "panva/jose"
    paths = src.files(repo, r"^src/.*\.ts$")
    for index, group in enumerate(range(0, min(len(paths), PER_CATEGORY * 3), 3)):
        tags = []
        for path in paths[group : group + 3]:
            body = (src.show(repo, path) or "").encode()
            sri = "sha384-" + base64.b64encode(hashlib.sha384(body).digest()).decode()
            tags.append(f'  <script src="https://cdn.jsdelivr.net/npm/jose@6/dist/{path[4:-3]}.js" integrity="{sri}" '
                        f'crossorigin="anonymous"></script>')  # fmt: skip
        yield (
            f"<!doctype html>\n<html>\n<head>\n  <title>page {index}</title>\n"
            + "\n".join(tags)
            + "\n</head>\n</html>\n"
        )


def csp_nonce(src: Sources) -> Iterator[str]:
    rng = random.Random(929)
    for n in range(PER_CATEGORY):
        nonce = base64.b64encode(rng.randbytes(16)).decode()
        yield (f"HTTP/2 200\ncontent-type: text/html; charset=utf-8\ncontent-security-policy: default-src 'self'; "
               f"script-src 'self' 'nonce-{nonce}' 'strict-dynamic'; object-src 'none'; base-uri 'none'\n\n"
               f"<!doctype html><html><head><script nonce=\"{nonce}\">window.__page = {n};</script>"
               f"<style nonce=\"{nonce}\">body{{margin:0}}</style></head><body></body></html>\n")  # fmt: skip


def _pngs() -> list[Path]:
    found = [p for p in Path("/usr/share").rglob("*.png") if 200 < p.stat().st_size < 40_000]
    return _pick(found, PER_CATEGORY * 2, "png")


def mime_png(src: Sources) -> Iterator[str]:
    for n, path in enumerate(_pngs()[:PER_CATEGORY]):
        data = base64.encodebytes(path.read_bytes()).decode()
        yield (f"From: builds@example.org\nTo: team@example.org\nSubject: screenshot {n}\nMIME-Version: 1.0\n"
               f"Content-Type: multipart/mixed; boundary=\"b{n}\"\n\n--b{n}\nContent-Type: text/plain\n\n"
               f"See attached.\n\n--b{n}\nContent-Type: image/png; name=\"{path.name}\"\n"
               f"Content-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=\"{path.name}\"\n\n"
               f"{data}\n--b{n}--\n")  # fmt: skip


def data_url(src: Sources) -> Iterator[str]:
    for path in _pngs()[PER_CATEGORY:]:
        data = base64.b64encode(path.read_bytes()).decode()
        yield f'<p>Icon: <img alt="{path.stem}" src="data:image/png;base64,{data}"></p>\n'


# --- source, history, configuration ---------------------------------------------------------------------------

_NAMED = re.compile(r"\b\w*(?:secret|password|passwd|token|api_?key|credential)\w*\b", re.I)


def code_identifiers(src: Sources) -> Iterator[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")) if "test" not in p.as_posix()]
    windows = []
    for path in files:
        try:
            lines = path.read_text().splitlines(keepends=True)
        except (OSError, UnicodeDecodeError):
            continue
        hits = [i for i, line in enumerate(lines) if _NAMED.search(line)]
        if len(hits) >= 3:
            start = max(0, hits[len(hits) // 2] - 12)
            windows.append((path.name, "".join(lines[start : start + 30])))
    for name, text in _pick(windows, PER_CATEGORY * 2, "code"):
        yield f"# {name}\n{text}"


_PLAIN_REPOS = ("BurntSushi/ripgrep", "oklog/ulid", "segmentio/ksuid", "hashicorp/terraform-json",
                "kubernetes/examples", "open-telemetry/opentelemetry-proto", "OAI/OpenAPI-Specification")  # fmt: skip


def _shas(src: Sources, repo: str, count: int) -> list[str]:
    return (src.git(repo, "log", "--format=%H", "-n", str(count)) or "").split()


def git_log(src: Sources) -> Iterator[str]:
    for repo in _PLAIN_REPOS:
        for sha in _pick(_shas(src, repo, 200), 2, repo):
            text = src.git(repo, "log", "--stat", "-n", "4", sha)
            if text:
                yield text[:MAX_ITEM]


def git_show(src: Sources) -> Iterator[str]:
    for repo in _PLAIN_REPOS:
        for sha in _pick(_shas(src, repo, 200), 2, repo + "show"):
            text = src.git(repo, "show", sha)
            if text:
                yield text[:MAX_ITEM]


def git_signed(src: Sources) -> Iterator[str]:
    for repo in _PLAIN_REPOS:
        signed = [s for s in _shas(src, repo, 60) if "gpgsig" in (src.git(repo, "cat-file", "-p", s) or "")]
        for sha in signed[:2]:
            yield src.git(repo, "cat-file", "-p", sha) or ""


def commit_urls(src: Sources) -> Iterator[str]:
    for repo in _PLAIN_REPOS:
        text = src.git(repo, "log", "--name-only", "--format=%H %s", "-n", "6") or ""
        lines, sha = [], ""
        for line in text.splitlines():
            if re.match(r"[0-9a-f]{40} ", line):
                sha, subject = line.split(" ", 1)
                lines.append(f"- [{subject[:60]}](https://github.com/{repo}/commit/{sha})")
            elif line.strip() and sha:
                lines.append(f"  - https://github.com/{repo}/blob/{sha}/{line.strip()}#L1-L20")
        if lines:
            yield "\n".join(lines[:40]) + "\n"


def checksums(src: Sources) -> Iterator[str]:
    for repo in _PLAIN_REPOS:
        paths = src.files(repo, r"\.(go|rs|ya?ml|md|json)$")[:25]
        rows = [f"{hashlib.sha256((src.show(repo, p) or '').encode()).hexdigest()}  {p}" for p in paths]
        if rows:
            yield "\n".join(rows) + "\n"


def sql_schema(src: Sources) -> Iterator[str]:
    files = sorted(Path("/usr/share/postgresql").rglob("*.sql"))
    for path in _pick(files, PER_CATEGORY, "sql"):
        yield from _excerpts(path.read_text(errors="replace"), 1, 60, str(path))


def k8s_manifest(src: Sources) -> Iterator[str]:
    repo = "kubernetes/examples"
    paths = src.files(repo, r"\.ya?ml$")
    count = 0
    for path in _pick(paths, PER_CATEGORY * 3, "k8s"):
        text = src.show(repo, path) or ""
        if re.search(r"^kind:\s*Secret", text, re.M) or not text.strip() or count >= PER_CATEGORY * 2:
            continue
        count += 1
        yield text[:MAX_ITEM]


def openapi_docs(src: Sources) -> Iterator[str]:
    repo = "OAI/OpenAPI-Specification"
    for path in src.files(repo, r"schemas/v3\.0/pass/.*\.yaml$"):
        yield from _excerpts(src.show(repo, path) or "", 2, 80, path)
    spec = src.show("stripe/openapi", "latest/openapi.spec3.json")
    if spec:
        doc = json.loads(spec)
        yield json.dumps({"openapi": doc.get("openapi"), "info": doc.get("info"), "servers": doc.get("servers"),
                          "security": doc.get("security"), "components": {"securitySchemes": doc["components"].get(
                              "securitySchemes")}}, indent=2)  # fmt: skip


def json_schemas(src: Sources) -> Iterator[str]:
    spec = src.show("stripe/openapi", "latest/openapi.spec3.json")
    if spec:
        schemas = json.loads(spec)["components"]["schemas"]
        named = [n for n, s in schemas.items() if any(_NAMED.search(p) for p in (s.get("properties") or {}))]
        for name in _pick(named, PER_CATEGORY, "schemas"):
            yield json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": name,
                              **schemas[name]}, indent=2)[:MAX_ITEM]  # fmt: skip
    service = src.show("boto/botocore", "botocore/data/secretsmanager/2017-10-17/service-2.json")
    if service:
        shapes = json.loads(service)["shapes"]
        named = [n for n in shapes if _NAMED.search(n)]
        for name in _pick(named, PER_CATEGORY, "botoshapes"):
            yield json.dumps({name: shapes[name]}, indent=4)[:MAX_ITEM]


def terraform_plan(src: Sources) -> Iterator[str]:
    repo = "hashicorp/terraform-json"
    for path in _pick(src.files(repo, r"testdata/.*/plan\.json$"), PER_CATEGORY, "tf"):
        text = src.show(repo, path)
        if text and "sensitive" not in path:
            yield json.dumps(json.loads(text), indent=2)[:MAX_ITEM]


CATEGORIES: dict[str, Callable[[Sources], Iterator[Any]]] = {
    "tls_chain": tls_chain, "x509_text": x509_text, "x509_json": x509_json, "public_key_pem": public_key_pem,
    "jwks_public": jwks, "ssh_public_keys": ssh_public, "pgp_public_block": pgp_public, "pgp_listing": pgp_listing,
    "go_sum": go_sum, "pip_record": pip_record,
    "package_lock": lock_excerpts("panva/jose", "package-lock.json", 40),
    "yarn_lock": lock_excerpts("emotion-js/emotion", "yarn.lock", 40),
    "poetry_lock": lock_excerpts("python-poetry/poetry-core", "poetry.lock", 40),
    "cargo_lock": lock_excerpts("BurntSushi/ripgrep", "Cargo.lock", 40),
    "npm_integrity": npm_integrity,
    "package_json": manifests(r"(^|/)package\.json$", ("emotion-js/emotion", "panva/jose",
                                                        "modelcontextprotocol/conformance")),
    "readme": manifests(r"(^|/)README\.md$", _PLAIN_REPOS),
    "dockerfile": manifests(r"(^|/)Dockerfile$", ("kubernetes/examples", "gitleaks/gitleaks")),
    "ci_yaml": manifests(r"^\.github/workflows/.*\.ya?ml$", (*_PLAIN_REPOS, "emotion-js/emotion", "panva/jose")),
    "k8s_manifest": k8s_manifest, "stripe_object": stripe_object, "stripe_list": stripe_list,
    "stripe_event": stripe_event, "aws_xml_response": aws_xml, "aws_parsed_response": aws_parsed,
    "aws_http_headers": aws_headers, "ids_json": ids_json, "otel_json": otel, "trace_logs": trace_logs,
    "html_sri": html_sri, "csp_nonce": csp_nonce, "mime_png": mime_png, "data_url_png": data_url,
    "code_identifiers": code_identifiers, "git_log": git_log, "git_show": git_show, "git_signed_commit": git_signed,
    "commit_urls": commit_urls, "checksums": checksums, "sql_schema": sql_schema, "openapi_security": openapi_docs,
    "json_schema_credentials": json_schemas, "terraform_plan": terraform_plan,
}  # fmt: skip
"""Each category and how its items are built."""

STRUCTURED = ("stripe_object", "aws_parsed_response", "ids_json", "x509_json")
"""Categories whose JSON objects also travel as `structuredContent` (every other item of them)."""


def tool_output_items(folder: Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The items (`{"id", "family", "text", "structured"?}`) and a summary of sources and skipped items."""
    src = Sources(folder)
    items: list[dict[str, Any]] = []
    for category, build in CATEGORIES.items():
        try:
            produced = list(build(src))
        except (OSError, ValueError, KeyError, subprocess.SubprocessError, ImportError):
            produced = []
        for index, value in enumerate(produced):
            text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
            if not text.strip():
                continue
            if _CREDENTIAL.search(text):
                src.skipped[category] = src.skipped.get(category, 0) + 1
                continue
            item: dict[str, Any] = {"id": f"to:{category}:{index}", "family": category, "text": text}
            if not isinstance(value, str) and category in STRUCTURED and index % 2 and isinstance(value, dict):
                item["structured"] = value
            items.append(item)
    summary = {"repositories": {r: str(p) for r, p in src.repos.items() if r in src.used},
               "system": ["/etc/ssl/certs", "/etc/apt/trusted.gpg.d", "/usr/share/postgresql", "/usr/share (PNG)",
                          sysconfig.get_paths()["stdlib"]],
               "left_out_as_credential_shaped": src.skipped}  # fmt: skip
    return items, summary
