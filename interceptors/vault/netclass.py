"""Address classes as the vault sees them: special (left alone), private (kept in its block) or public.

The classes are the transforms' detectors' own (`interceptors.transforms.entities.ip_class`), so an
address the redactor calls `private_ip` is formatted here as a private address.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from ..transforms.entities import ip_class

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

PRIVATE_BLOCKS: tuple[IPNetwork, ...] = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
    ipaddress.IPv4Network("100.64.0.0/10"),
    ipaddress.IPv6Network("fc00::/7"),
)

IP_ENTITIES = frozenset(
    {"ip_address", "cidr", "ip", "ipv4", "ipv6"}
    | {f"{cls}_{kind}" for cls in ("private", "public", "special") for kind in ("ip", "cidr")}
)


@lru_cache(maxsize=8192)
def parse_ip(text: str) -> tuple[IPAddress, int | None] | None:
    """`(address, prefix length or None)` for an address, a CIDR or an interface address, else None."""
    if not text or len(text) > 64 or text != text.strip():
        return None
    address_text, slash, prefix_text = text.partition("/")
    try:
        address = ipaddress.ip_address(address_text)
    except ValueError:
        return None
    if not slash:
        return address, None
    if not prefix_text.isascii() or not prefix_text.isdigit() or len(prefix_text) > 3:
        return None
    prefixlen = int(prefix_text)
    if prefixlen > address.max_prefixlen:
        return None
    return address, prefixlen


def classify(address: IPAddress, prefixlen: int | None) -> str:
    """`special`, `private` or `public`; a CIDR is classified by its network address, and /0 is special."""
    if prefixlen is None:
        return ip_class(address)
    if prefixlen == 0:
        return "special"
    network = ipaddress.ip_network(f"{address}/{prefixlen}", strict=False)
    return ip_class(network.network_address)


def block_of(address: IPAddress) -> IPNetwork:
    """The private block holding a private address."""
    for block in PRIVATE_BLOCKS:
        if address.version == block.version and address in block:
            return block
    raise ValueError("not a private address")


def ip_entity(value: str) -> str | None:
    """`{class}_ip` or `{class}_cidr` for an address or CIDR text, else None."""
    parsed = parse_ip(value)
    if parsed is None:
        return None
    address, prefixlen = parsed
    return f"{classify(address, prefixlen)}_{'ip' if prefixlen is None else 'cidr'}"
