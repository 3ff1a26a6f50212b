"""Format-preserving tokens: a pseudonym looks like what it replaces, so tools and models keep working.

Each formatter receives the real value and a `FormatRequest`: a keyed byte stream derived from
(key, namespace, entity, attempt, value), the attempt number, and `sub(value, entity)`, which tokenises a
component through the vault itself (so every component is registered and reversible on its own). A
formatter returns the token, or None when the value must stay as it is (special addresses, wildcards,
variables, service-only hostnames): such values are neither pseudonymised nor registered.

Composite formats (ARNs, Azure and GCP resource names, cloud hostnames, e-mails of service accounts) are
built from component tokens, so a collision cannot be solved by drawing again: they append `#<attempt>`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .keys import fields_message
from .netclass import IPAddress, IPNetwork, block_of, classify, parse_ip

HEX = "0123456789abcdef"
DIGITS = "0123456789"
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


class KeyStream:
    """Deterministic pseudo-random bytes: HMAC-SHA256 of the seed, then of the seed and a block counter."""

    __slots__ = ("_buffer", "_counter", "_key", "_seed")

    def __init__(self, key: bytes, seed: bytes) -> None:
        self._key = key
        self._seed = seed
        self._buffer = hmac.new(key, seed, hashlib.sha256).digest()
        self._counter = 0

    def take(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._counter += 1
            block = hmac.new(self._key, self._seed + self._counter.to_bytes(8, "big"), hashlib.sha256).digest()
            self._buffer += block
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    def below(self, bound: int) -> int:
        """A number in [0, bound); the bias is below 2^-64."""
        size = (bound.bit_length() + 7) // 8 + 8
        return int.from_bytes(self.take(size), "big") % bound

    def text(self, alphabet: str, length: int) -> str:
        return "".join(alphabet[self.below(len(alphabet))] for _ in range(length))

    def hex(self, length: int) -> str:
        return self.take((length + 1) // 2).hex()[:length]


Sub = Callable[[str, str], str]


@dataclass(slots=True)
class FormatRequest:
    namespace: str
    entity: str
    attempt: int
    stream: KeyStream
    sub: Sub
    """Tokenise a component through the vault (registered on its own)."""
    prefix_base: Callable[[IPNetwork], Any]
    """The keyed hasher of this namespace and a private block (`prefix_hasher`), for `permute_prefix`."""

    def suffix(self) -> str:
        return f"#{self.attempt}" if self.attempt else ""


Formatter = Callable[[str, FormatRequest], str | None]

# --- generic ---------------------------------------------------------------------------------------------

PREFIXES: dict[str, str] = {
    "resource_name": "res",
    "resource_ref": "res",
    "dataset_name": "ds",
    "cloud_account": "acct",
    "url_username": "user",
    "tag_value": "tag",
    "person": "person",
    "hostname_label": "h",
    "email_domain": "d",
    "azure_resource_group": "rg",
    "rag_chunk_id": "chunk",
    "rag_content": "text",
    "free_text": "text",
    "secret_value": "secret",
    "password": "secret",
    "api_token": "secret",
    "private_key": "secret",
    "aws_secret_access_key": "secret",
    "jwt": "secret",
    "sensitive_field": "secret",
}


def generic_prefix(entity: str) -> str:
    known = PREFIXES.get(entity)
    if known is not None:
        return known
    cleaned = re.sub(r"[^a-z0-9]", "", entity.lower())[:10]
    return cleaned or "tok"


def generic(value: str, req: FormatRequest) -> str:
    """`<prefix>-<10 hex>`."""
    return f"{generic_prefix(req.entity)}-{req.stream.hex(10)}"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _is_variable(value: str) -> bool:
    return value in ("", "*", "-") or value.startswith("$")


# --- digits, GUIDs, key ids ---------------------------------------------------------------------------------


def digits(value: str, req: FormatRequest) -> str | None:
    """The same number of digits; the first is non-zero unless the original's was zero."""
    if not value.isascii() or not value.isdigit():
        return generic(value, req)
    first = req.stream.text(DIGITS if value[0] == "0" else DIGITS[1:], 1)
    return first + req.stream.text(DIGITS, len(value) - 1)


_GUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def guid(value: str, req: FormatRequest) -> str | None:
    """A UUIDv8 (version nibble 8, RFC variant); upper case stays upper case."""
    if not _GUID.fullmatch(value):
        return generic(value, req)
    raw = bytearray(req.stream.take(16))
    raw[6] = (raw[6] & 0x0F) | 0x80
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    out = f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
    return out.upper() if value.upper() == value and any(c.isalpha() for c in value) else out


_AKID = re.compile(r"(A3T[A-Z0-9]|AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)([A-Z0-9]{12,124})")


def access_key_id(value: str, req: FormatRequest) -> str | None:
    """The four-letter prefix, then base32 characters (the original length)."""
    match = _AKID.fullmatch(value)
    if not match:
        return generic(value, req)
    return match.group(1) + req.stream.text(BASE32, len(value) - 4)


_ORG = {
    "aws_org_id": re.compile(r"o-[a-z0-9]{10,32}"),
    "aws_ou_id": re.compile(r"ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}"),
    "aws_root_id": re.compile(r"r-[a-z0-9]{4,32}"),
}


def organizations_id(value: str, req: FormatRequest) -> str | None:
    """`o-…`, `ou-…-…`, `r-…`: the prefix and every part's length stay."""
    pattern = _ORG.get(req.entity)
    if pattern is None or not pattern.fullmatch(value):
        return generic(value, req)
    head, _, rest = value.partition("-")
    return head + "-" + "".join(c if c == "-" else req.stream.text(LOWER_ALNUM, 1) for c in rest)


_MAC = re.compile(r"[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}")
_MAC_DOTTED = re.compile(r"[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}")


def mac_address(value: str, req: FormatRequest) -> str | None:
    """A locally administered unicast address with the original separators and case."""
    if not (_MAC.fullmatch(value) or _MAC_DOTTED.fullmatch(value)):
        return generic(value, req)
    raw = bytearray(req.stream.take(6))
    raw[0] = (raw[0] & 0xFC) | 0x02
    hexed = iter(raw.hex())
    out = "".join(c if c in ":-." else next(hexed) for c in value)
    return out.upper() if any(c.isupper() for c in value) else out


# --- names -----------------------------------------------------------------------------------------------

AWS_ID_PREFIXES = _words(
    "i sg vpc subnet eni ami snap vol rtb igw eigw nat acl eipalloc eipassoc vpce tgw tgw-attach tgw-rtb pcx "
    "dopt lt fs fsmt r sir key vgw cgw vpn elb lb fp ipam pl prefix cvpn-endpoint rtbassoc srv db cluster"
)
_AWS_ID = re.compile(r"([a-z]+(?:-[a-z]+)?)-([0-9a-f]{8,40})")


def resource_name(value: str, req: FormatRequest) -> str | None:
    """AWS `prefix-hex` ids keep the prefix and the length; other names become `res-<hex>`."""
    if _is_variable(value):
        return None
    match = _AWS_ID.fullmatch(value)
    if match and match.group(1) in AWS_ID_PREFIXES:
        return f"{match.group(1)}-{req.stream.hex(len(match.group(2)))}"
    return generic(value, req)


def gcp_project_id(value: str, req: FormatRequest) -> str | None:
    """`proj-<8 hex>`; a project number keeps its digits."""
    if _is_variable(value):
        return None
    if value.isascii() and value.isdigit():
        return digits(value, req)
    return f"proj-{req.stream.hex(8)}"


def shape_entity(value: str) -> str:
    """The entity a reference looks like, so it gets the same token it would get under that entity."""
    if value.startswith("arn:"):
        return "aws_arn"
    if value.lower().startswith("/subscriptions/") or value.lower().startswith("/providers/"):
        return "azure_resource_id"
    if value.startswith("//") or value.startswith("projects/") or value.startswith("organizations/"):
        return "gcp_resource_name"
    if _GUID.fullmatch(value):
        return "uuid"
    if value.isascii() and value.isdigit() and len(value) == 12:
        return "aws_account_id"
    if parse_ip(value) is not None:
        return "ip_address"
    for entity, pattern in _ORG.items():
        if pattern.fullmatch(value):
            return entity
    return "resource_name"


_PLAIN_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}")


def _kept(segment: str, req: FormatRequest) -> str:
    """A segment a composite format keeps as it is (a collection, a zone, a resource type, a provider
    namespace) stays only when it is a plain name or a variable. Anything else (an address, a query string a
    looser pattern let in) is a token of what it looks like, so a value never rides through unchanged."""
    if _is_variable(segment) or _PLAIN_SEGMENT.fullmatch(segment):
        return segment
    return req.sub(segment, shape_entity(segment))


def resource_ref(value: str, req: FormatRequest) -> str | None:
    if _is_variable(value):
        return None
    target = shape_entity(value)
    if target == "resource_name":
        return resource_name(value, req)
    token = req.sub(value, target)
    return None if token == value else token


# --- cloud resource identifiers ---------------------------------------------------------------------------------

_ARN = re.compile(r"arn:(aws[a-z-]*):([a-z0-9-]+):([a-z0-9-]*):([^:]*):(.+)", re.S)
_SPLIT_RESOURCE = re.compile(r"([/:])")


def _segment(value: str, req: FormatRequest) -> str:
    if _GUID.fullmatch(value):
        return req.sub(value, "uuid")
    if value.isascii() and value.isdigit() and len(value) == 12:
        return req.sub(value, "aws_account_id")
    return req.sub(value, "resource_name")


def aws_arn(value: str, req: FormatRequest) -> str | None:
    """Partition, service and region stay; the account and each resource segment are tokens of their own (a
    resource type stays when it is a plain name)."""
    match = _ARN.fullmatch(value)
    if not match:
        return generic(value, req)
    partition, service, region, account, resource = match.groups()
    if account and not _is_variable(account) and account != "aws":
        account = req.sub(account, "aws_account_id" if account.isdigit() and len(account) == 12 else "cloud_account")
    pieces = _SPLIT_RESOURCE.split(resource)
    segments = pieces[0::2]
    keep_type = service != "s3" and len(segments) > 1
    out: list[str] = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(piece)
            continue
        position = index // 2
        short_number = position > 0 and piece.isdigit() and len(piece) <= 4
        if _is_variable(piece) or short_number:
            out.append(piece)
        elif position == 0 and keep_type:
            out.append(_kept(piece, req))
        else:
            out.append(_segment(piece, req))
    return f"arn:{partition}:{service}:{region}:{account}:{''.join(out)}{req.suffix()}"


def azure_resource_id(value: str, req: FormatRequest) -> str | None:
    """Subscriptions and tenants become GUID tokens, resource groups `rg-…`, names `res-…`; the rest stays
    (collections and provider namespaces that are plain names)."""
    segments = value.split("/")
    if segments[0] != "" or len(segments) < 3:
        return generic(value, req)
    out = [""]
    index = 1
    while index < len(segments):
        collection = segments[index]
        out.append(_kept(collection, req))
        if index + 1 >= len(segments):
            break
        name = segments[index + 1]
        lower = collection.lower()
        if lower == "providers" or _is_variable(name):
            out.append(_kept(name, req))  # the provider namespace stays
        elif lower == "subscriptions":
            out.append(req.sub(name, "azure_subscription_id"))
        elif lower == "tenants":
            out.append(req.sub(name, "azure_tenant_id"))
        elif lower == "resourcegroups":
            out.append(req.sub(name, "azure_resource_group"))
        else:
            out.append(req.sub(name, "resource_name"))
        index += 2
    return "/".join(out) + req.suffix()


_GCP_KEEP_AFTER = frozenset({"zones", "regions", "locations"})
_GCP_NUMBERED = frozenset({"organizations", "folders", "billingAccounts"})


def gcp_resource_name(value: str, req: FormatRequest) -> str | None:
    """Collections, zones, regions and locations stay (when they are plain names); projects and names become
    tokens."""
    head, body = "", value
    if value.startswith("//"):
        host, _, body = value[2:].partition("/")
        head = f"//{host}/"
    segments = body.split("/")
    if len(segments) < 2:
        return generic(value, req)
    out: list[str] = []
    for index, segment in enumerate(segments):
        if index % 2 == 0:
            out.append(_kept(segment, req))
            continue
        collection = segments[index - 1]
        if collection in _GCP_KEEP_AFTER or _is_variable(segment):
            out.append(_kept(segment, req))
        elif collection == "projects":
            out.append(req.sub(segment, "gcp_project_number" if segment.isdigit() else "gcp_project_id"))
        elif collection in _GCP_NUMBERED and segment.isdigit():
            out.append(req.sub(segment, "number"))
        else:
            out.append(req.sub(segment, "resource_name"))
    return head + "/".join(out) + req.suffix()


# --- e-mail and hostnames -------------------------------------------------------------------------------------

_EMAIL = re.compile(r"([^@\s]{1,256})@([A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9-]{1,63})+)")
_SA_SUFFIX = ".iam.gserviceaccount.com"
_GOOGLE_SA_DOMAIN = ".gserviceaccount.com"


def email(value: str, req: FormatRequest) -> str | None:
    """`user-<8 hex>@<domain token>`: every user of a domain shares its domain token. Service accounts of
    GCP keep their shape with a project token."""
    match = _EMAIL.fullmatch(value)
    if not match:
        return generic(value, req)
    local, domain = match.groups()
    lower = domain.lower()
    if lower.endswith(_SA_SUFFIX):
        project = domain[: -len(_SA_SUFFIX)]
        if project.startswith("gcp-sa-"):  # a Google-managed service agent: `service-<project number>@…`
            number = local.removeprefix("service-")
            if number.isdigit():
                return f"service-{req.sub(number, 'gcp_project_number')}@{domain}{req.suffix()}"
            return f"sa-{req.stream.hex(8)}@{domain}"
        new_local = req.sub(local, "gcp_project_number") if local.isdigit() else f"sa-{req.stream.hex(8)}"
        return f"{new_local}@{req.sub(project, 'gcp_project_id')}{domain[len(project) :]}"
    if lower.endswith(_GOOGLE_SA_DOMAIN):  # `<number>-compute@developer…`, `<number>@cloudservices…`
        number, dash, rest = local.partition("-")
        if number.isdigit():
            return f"{req.sub(number, 'gcp_project_number')}{dash}{rest}@{domain}{req.suffix()}"
    return f"user-{req.stream.hex(8)}@{req.sub(domain, 'email_domain')}"


def email_domain(value: str, req: FormatRequest) -> str | None:
    return f"d-{req.stream.hex(8)}.example"


CLOUD_SUFFIXES = tuple(
    sorted(
        (
            "amazonaws.com", "amazonaws.com.cn", "cloudfront.net", "awsglobalaccelerator.com", "aws.dev",
            "azurewebsites.net", "cloudapp.net", "cloudapp.azure.com", "windows.net", "azure.net", "azure.com",
            "azurecr.io", "azure-api.net", "azureedge.net", "azurefd.net", "azure-devices.net",
            "servicebus.windows.net",
            "googleapis.com", "run.app", "appspot.com", "cloudfunctions.net", "googleusercontent.com", "gcr.io",
            "pkg.dev", "compute.internal", "ec2.internal", "internal", "svc.cluster.local", "cluster.local",
        ),
        key=len,
        reverse=True,
    )
)  # fmt: skip
SERVICE_LABELS = _words(
    "s3 s3-website s3-accesspoint s3-control dualstack ec2 elb rds lambda execute-api dynamodb sqs sns es eks ecr dkr "
    "api apigateway cloudfront kinesis firehose logs monitoring sts iam kms secretsmanager ssm elasticache redshift "
    "blob file queue table dfs web core vault database documents search servicebus azurecr scm privatelink "
    "compute storage a www cache redis mysql postgres svc default kube-system"
)
AZURE_REGIONS = _words(
    "eastus eastus2 westus westus2 westus3 centralus northcentralus southcentralus westcentralus canadacentral "
    "canadaeast brazilsouth brazilsoutheast northeurope westeurope uksouth ukwest francecentral francesouth "
    "germanywestcentral germanynorth norwayeast norwaywest switzerlandnorth switzerlandwest swedencentral "
    "polandcentral italynorth spaincentral eastasia southeastasia japaneast japanwest koreacentral koreasouth "
    "centralindia southindia westindia australiaeast australiasoutheast australiacentral uaenorth uaecentral "
    "southafricanorth qatarcentral israelcentral mexicocentral newzealandnorth"
)
_REGION = re.compile(
    r"(?:us|eu|ap|sa|ca|me|af|il|mx|cn)(?:-gov|-iso[a-z]?)?-(?:north|south|east|west|central|northeast|southeast"
    r"|northwest|southwest)-\d{1,2}[a-z]?"
    r"|(?:us|europe|asia|australia|northamerica|southamerica|me|africa)-(?:north|south|east|west|central"
    r"|northeast|southeast|northwest|southwest)\d{1,2}(?:-[a-z])?"
    r"|compute-\d"
)
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def hostname(value: str, req: FormatRequest) -> str | None:
    """Under a cloud suffix, region and service labels stay and the others become `h-<hex>` tokens of their
    own; other hostnames become `host-<8 hex>.example`."""
    host = value[:-1] if value.endswith(".") else value
    labels = host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return generic(value, req)
    lower = host.lower()
    suffix = next((s for s in CLOUD_SUFFIXES if lower == s or lower.endswith("." + s)), None)
    if suffix is None:
        return f"host-{req.stream.hex(8)}.example"
    count = suffix.count(".") + 1
    head = labels[: len(labels) - count]
    out = []
    for label in head:
        low = label.lower()
        keep = low in SERVICE_LABELS or low in AZURE_REGIONS or _REGION.fullmatch(low)
        out.append(label if keep else req.sub(label, "hostname_label"))
    if out == head:
        return None  # a service endpoint names no one
    return ".".join([*out, *labels[len(labels) - count :]]) + ("." if value.endswith(".") else "") + req.suffix()


# --- addresses --------------------------------------------------------------------------------------------------

PUBLIC_V4 = ipaddress.IPv4Network("198.18.0.0/15")
WIDE_PUBLIC_V4 = ipaddress.IPv4Network("240.0.0.0/4")
PUBLIC_V6 = ipaddress.IPv6Network("2001:db8::/32")


def prefix_hasher(key: bytes, namespace: str, block: IPNetwork) -> Any:
    """A keyed BLAKE2b already fed with the namespace and the block; each bit of `permute_prefix` copies it."""
    return hashlib.blake2b(fields_message(namespace, str(block)), key=key, digest_size=1)


def permute_prefix(base: Any, block: IPNetwork, value: int, until: int) -> int:
    """Flip each bit in [block prefix, until) by a keyed function of the bits before it (Crypto-PAn style).

    Addresses sharing their first n bits give results sharing their first n bits, and the map is a
    bijection inside the block; bits from `until` on (a host part) are left as they are."""
    width = block.max_prefixlen
    out = value
    for position in range(block.prefixlen, until):
        prf = base.copy()
        prf.update(position.to_bytes(1, "big") + (value >> (width - position)).to_bytes(16, "big"))
        if prf.digest()[0] & 1:
            out ^= 1 << (width - 1 - position)
    return out


def _in_network(network: IPNetwork, prefixlen: int, req: FormatRequest) -> int:
    """A random aligned network of `prefixlen` inside `network` (as an integer)."""
    bits = prefixlen - network.prefixlen
    chosen = req.stream.below(1 << bits) if bits > 0 else 0
    return int(network.network_address) | (chosen << (network.max_prefixlen - prefixlen))


def _address(version: int, number: int) -> IPAddress:
    return ipaddress.IPv4Address(number) if version == 4 else ipaddress.IPv6Address(number)


def ip_token(value: str, req: FormatRequest) -> str | None:
    """Private addresses stay in their block (prefix-preserving); public ones go to documentation and
    benchmark ranges; special ones stay as they are."""
    parsed = parse_ip(value)
    if parsed is None:
        return generic(value, req)
    address, prefixlen = parsed
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        inner = str(address.ipv4_mapped) + ("" if prefixlen is None else f"/{prefixlen - 96}")
        token = req.sub(inner, "ip_address") if prefixlen is None or prefixlen >= 96 else None
        return None if token is None or token == inner else f"::ffff:{token}"
    kind = classify(address, prefixlen)
    if kind == "special":
        return None
    width = address.max_prefixlen
    length = width if prefixlen is None else prefixlen
    number = int(address)
    host_mask = (1 << (width - length)) - 1
    host = number & host_mask
    if kind == "private":
        block = block_of(_address(address.version, number - host))
        if length <= block.prefixlen:
            return None  # as wide as its block: says nothing
        if req.attempt == 0:
            mapped = permute_prefix(req.prefix_base(block), block, number - host, length) | host
        else:  # a collision (another spelling of the same address, or an imported token): not prefix-preserving
            mapped = _in_network(block, length, req) | host
    else:
        if address.version == 4:
            if length < 4:
                return None
            target: IPNetwork = PUBLIC_V4 if length >= PUBLIC_V4.prefixlen + 1 else WIDE_PUBLIC_V4
        else:
            if length < PUBLIC_V6.prefixlen:
                return None
            target = PUBLIC_V6
        if length <= target.prefixlen:
            mapped = int(target.network_address) | host
        else:
            mapped = _in_network(target, length, req) | host
    text = str(_address(address.version, mapped))
    if any(c.isupper() for c in value):
        text = text.upper()
    return text if prefixlen is None else f"{text}/{prefixlen}"


# --- the table ----------------------------------------------------------------------------------------------------

FORMATTERS: dict[str, Formatter] = {
    "aws_account_id": digits,
    "gcp_project_number": digits,
    "number": digits,
    "azure_subscription_id": guid,
    "azure_tenant_id": guid,
    "uuid": guid,
    "gcp_project_id": gcp_project_id,
    "resource_name": resource_name,
    "resource_ref": resource_ref,
    "aws_arn": aws_arn,
    "azure_resource_id": azure_resource_id,
    "gcp_resource_name": gcp_resource_name,
    "email": email,
    "email_domain": email_domain,
    "hostname": hostname,
    "mac_address": mac_address,
    "aws_access_key_id": access_key_id,
    "aws_unique_id": access_key_id,
    "aws_org_id": organizations_id,
    "aws_ou_id": organizations_id,
    "aws_root_id": organizations_id,
    **{name: ip_token for name in ("private_ip", "public_ip", "private_cidr", "public_cidr")},
}


def formatter_for(entity: str) -> Formatter:
    return FORMATTERS.get(entity, generic)


def cloud_account_like(value: str) -> str | None:
    """A `cloud_account` that is really a number or a GUID is formatted as one."""
    if value.isascii() and value.isdigit():
        return "aws_account_id" if len(value) == 12 else "gcp_project_number"
    if _GUID.fullmatch(value):
        return "azure_subscription_id"
    return None
