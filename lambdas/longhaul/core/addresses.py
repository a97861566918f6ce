"""Where a callback may go: `https` to a public address, never to this platform's neighbours.

Checked twice: at submit (the URL as written: a host that is an address in any notation, or a name that resolves
to a forbidden address, is a 422) and at delivery (the host is resolved again, every address is checked and the
connection is pinned to one of them, so a name that changes its answer in between gains nothing).

An address is refused unless it is globally routable: loopback, private, link-local (the metadata service),
CGNAT, multicast, unspecified, reserved, documentation and benchmark ranges, and IPv6 forms that embed such an
IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo). Hosts written as integers, in hex or octal,
or with fewer than four parts (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) are read the way the C library
reads them, because that is how an HTTP client would connect to them.

Origins listed in `LONGHAUL_CALLBACK_ALLOWLIST` (e.g. `http://127.0.0.1:9000`) skip the address checks and may use
plain `http`: they are for local receivers and private endpoints an operator vouches for.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]

SCHEMES = ("https", "http")
DEFAULT_PORTS = {"https": 443, "http": 80}
MAX_URL_CHARS = 2048
# Names that mean this machine or a cloud's metadata service whatever a resolver says.
FORBIDDEN_NAMES = frozenset({"localhost", "metadata", "metadata.google.internal", "instance-data"})
FORBIDDEN_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain")
# Ranges that Python's `is_global` still counts as global but that no callback should reach.
EXTRA_FORBIDDEN: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("100.64.0.0/10"),  # CGNAT (shared address space)
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments
    ipaddress.ip_network("198.18.0.0/15"),  # benchmarking
    ipaddress.ip_network("fd00:ec2::/32"),  # the EC2 metadata service over IPv6 (also in fc00::/7)
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class UnsafeCallback(ValueError):
    """The callback URL (or an address its host resolves to) is not allowed; the message says why."""


class CallbackTarget(NamedTuple):
    """A checked callback URL: where to connect (`host`, `port`) and whether its origin is allow-listed."""

    url: str
    scheme: str
    host: str  # as written (a name, or an address without brackets)
    port: int
    path: str  # path and query, as sent in the request line
    allow_listed: bool

    @property
    def origin(self) -> str:
        return origin_of(self.scheme, self.host, self.port)


def origin_of(scheme: str, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown.lower()}:{port}"


def parse_allowlist(value: str | Iterable[str]) -> frozenset[str]:
    """`"http://127.0.0.1:9000, https://hooks.internal.example"` -> normalised origins (default ports filled in)."""
    entries = value.split(",") if isinstance(value, str) else value
    origins = set()
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        parts = urlsplit(entry)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError(f"not an http(s) origin: {entry!r}")
        origins.add(origin_of(parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]))
    return frozenset(origins)


def parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address `inet_aton` would read in `host` (1-4 parts, each decimal, 0x-hex or 0-octal), or None."""
    parts = host.split(".")
    if host.endswith("."):  # a trailing dot is still the same address to a resolver
        parts = parts[:-1]
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part, 10) if part.isdigit() else -1)
        except ValueError:
            return None
    if any(n < 0 for n in numbers):
        return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value)


def parse_address(host: str) -> IPAddress | None:
    """`host` as an IP address in any notation (an IPv6 zone is dropped), or None when it is a name."""
    literal = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(literal)
    except ValueError:
        return parse_legacy_ipv4(literal)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address.sixtofour:
        return address.sixtofour
    if address.teredo:
        return address.teredo[1]
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if int(address) >> 32 == 0 and int(address) > 1:  # IPv4-compatible (deprecated), e.g. ::127.0.0.1
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden_reason(address: IPAddress) -> str | None:
    """Why a connection to `address` is refused, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = forbidden_reason(embedded)
            return f"embeds {embedded}, which {inner}" if inner else None
    checks = (
        ("is_unspecified", "is unspecified"),
        ("is_loopback", "is loopback"),
        ("is_link_local", "is link-local (cloud metadata services live there)"),
        ("is_multicast", "is multicast"),
        ("is_private", "is private"),
        ("is_reserved", "is reserved"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if any(address in network for network in EXTRA_FORBIDDEN if network.version == address.version):
        return "is shared (CGNAT), benchmarking or a metadata range"
    if not address.is_global:
        return "is not a public address"
    return None


def _split(url: str) -> SplitResult:
    if len(url) > MAX_URL_CHARS:
        raise UnsafeCallback(f"the URL is longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise UnsafeCallback("the URL contains whitespace or control characters")
    if "\\" in url:
        raise UnsafeCallback("the URL contains a backslash")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for its check: a port out of range or not a number raises)
    except ValueError as unreadable:  # an unbalanced `[` (an IPv6 literal), a port that is not one
        raise UnsafeCallback(f"the URL cannot be read: {unreadable}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise UnsafeCallback("only https URLs are accepted (plain http only for allow-listed origins)")
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise UnsafeCallback("the URL must not carry credentials")
    if not parts.hostname:
        raise UnsafeCallback("the URL has no host")
    if "#" in url:  # an empty fragment too: the URL is delivered to as given
        raise UnsafeCallback("the URL must not have a fragment")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError as error:
        raise UnsafeCallback(f"the URL's port is not valid ({error})") from None
    return parts


def check_url(url: str, *, allowlist: frozenset[str] = frozenset(), resolver: Resolver | None = None) -> CallbackTarget:
    """The callback target, or `UnsafeCallback`. With a `resolver`, a name must resolve only to public addresses
    (a name that does not resolve passes here: delivery checks again and fails then)."""
    parts = _split(url)
    scheme, host = parts.scheme.lower(), str(parts.hostname)
    port = parts.port or DEFAULT_PORTS[scheme]
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    target = CallbackTarget(url=url, scheme=scheme, host=host, port=port, path=path, allow_listed=False)
    if target.origin in allowlist:
        return CallbackTarget(url=url, scheme=scheme, host=host, port=port, path=path, allow_listed=True)
    if scheme != "https":
        raise UnsafeCallback("plain http is only accepted for origins in LONGHAUL_CALLBACK_ALLOWLIST")
    address = parse_address(host)
    if address is not None:
        reason = forbidden_reason(address)
        if reason:
            raise UnsafeCallback(f"the host {host} {reason}")
        return target
    name = host.rstrip(".").lower()
    if not name or name in FORBIDDEN_NAMES or name.endswith(FORBIDDEN_SUFFIXES) or "." not in name:
        raise UnsafeCallback(f"the host {host!r} is a local or internal name")
    try:
        name.encode("idna")  # what a resolver sends: a name IDNA cannot encode is no domain name
    except UnicodeError:
        raise UnsafeCallback(f"the host {host!r} is not a domain name (IDNA cannot encode it)") from None
    if resolver is not None:
        try:
            resolved = resolver(host, port)
        except OSError:
            return target
        check_addresses(host, resolved)
    return target


def check_addresses(host: str, addresses: Sequence[str]) -> list[IPAddress]:
    """Every address a name resolved to must be public; the parsed addresses."""
    if not addresses:
        raise UnsafeCallback(f"the host {host!r} resolves to no address")
    parsed = []
    for text in addresses:
        address = parse_address(text)
        if address is None:
            raise UnsafeCallback(f"the host {host!r} resolved to {text!r}, not an address")
        reason = forbidden_reason(address)
        if reason:
            raise UnsafeCallback(f"the host {host!r} resolves to {address}, which {reason}")
        parsed.append(address)
    return parsed


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (TCP)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})
