"""Callback URLs: every notation of a forbidden address is refused, allow-listed origins pass, names are resolved
and every address they resolve to is checked (a resolver stands in for DNS: no network)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from longhaul.core.addresses import (
    UnsafeCallback,
    check_addresses,
    check_url,
    parse_address,
    parse_allowlist,
)

HOSTILE = [
    # loopback in every notation
    "https://127.0.0.1/hook",
    "https://127.1/hook",
    "https://127.0.1/hook",
    "https://2130706433/hook",  # decimal
    "https://0x7f000001/hook",  # hex
    "https://0x7f.0x0.0x0.0x1/hook",
    "https://0177.0.0.1/hook",  # octal
    "https://017700000001/hook",
    "https://127.0.0.1./hook",  # trailing dot
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",  # IPv4-mapped
    "https://[::ffff:7f00:1]/hook",
    "https://[0:0:0:0:0:ffff:127.0.0.1]/hook",
    "https://[::127.0.0.1]/hook",  # IPv4-compatible
    "https://[64:ff9b::127.0.0.1]/hook",  # NAT64
    "https://[2002:7f00:1::]/hook",  # 6to4
    "https://localhost/hook",
    "https://LOCALHOST./hook",
    "https://api.localhost/hook",
    # unspecified
    "https://0.0.0.0/hook",
    "https://0/hook",
    "https://[::]/hook",
    # private
    "https://10.0.0.1/hook",
    "https://172.16.5.4/hook",
    "https://192.168.1.1/hook",
    "https://0xc0a80101/hook",
    "https://[fd00::1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    # link-local and metadata
    "https://169.254.169.254/latest/meta-data/",
    "https://2852039166/latest/meta-data/",  # 169.254.169.254 as one number
    "https://0xa9fea9fe/",
    "https://0251.0376.0251.0376/",
    "https://[fe80::1]/hook",
    "https://[fe80::1%25eth0]/hook",
    "https://[fd00:ec2::254]/latest/meta-data/",
    "https://[::ffff:169.254.169.254]/",
    "https://metadata.google.internal/computeMetadata/v1/",
    # CGNAT
    "https://100.64.0.1/hook",
    "https://100.127.255.254/hook",
    # multicast, broadcast, reserved, documentation
    "https://224.0.0.1/hook",
    "https://[ff02::1]/hook",
    "https://255.255.255.255/hook",
    "https://240.0.0.1/hook",
    "https://192.0.2.10/hook",
    "https://198.18.0.1/hook",
    # schemes, credentials, shapes
    "http://hooks.example.com/hook",  # plain http, not allow-listed
    "ftp://hooks.example.com/hook",
    "file:///etc/passwd",
    "gopher://hooks.example.com/",
    "javascript:alert(1)",
    "https://user:secret@hooks.example.com/hook",
    "https://user@hooks.example.com/hook",
    "https://hooks.example.com@127.0.0.1/hook",
    "https:///hook",
    "https://hooks.example.com:99999/hook",
    "https://hooks.example.com/ho ok",
    "https://hooks.example.com\\@127.0.0.1/",
    "https://intranet/hook",  # a single-label name is local
]


@pytest.mark.parametrize("url", HOSTILE)
def test_a_hostile_callback_is_refused(url: str) -> None:
    with pytest.raises(UnsafeCallback):
        check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/longhaul",
        "https://hooks.example.com:8443/a/b?tenant=alpha",
        "https://93.184.215.14/hook",
        "https://[2606:4700:4700::1111]/hook",
    ],
)
def test_https_to_a_public_host_is_accepted(url: str) -> None:
    target = check_url(url)
    assert target.scheme == "https" and not target.allow_listed


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("10.1.2", "10.1.0.2"),
        ("[::ffff:7f00:1]", "::ffff:7f00:1"),
        ("hooks.example.com", None),
        ("1.2.3.4.5", None),
        ("256.1.1.1", None),
    ],
)
def test_addresses_are_read_the_way_the_c_library_reads_them(text: str, address: str | None) -> None:
    parsed = parse_address(text)
    assert (str(parsed) if parsed else None) == address


def test_an_allow_listed_origin_skips_the_checks_and_may_use_plain_http() -> None:
    allowlist = parse_allowlist("http://127.0.0.1:9000, https://hooks.internal.example")

    local = check_url("http://127.0.0.1:9000/receiver", allowlist=allowlist)
    private = check_url("https://hooks.internal.example/x", allowlist=allowlist)

    assert local.allow_listed and local.port == 9000 and local.path == "/receiver"
    assert private.allow_listed and private.port == 443
    with pytest.raises(UnsafeCallback):  # another port of the same host is another origin
        check_url("http://127.0.0.1:9001/receiver", allowlist=allowlist)
    with pytest.raises(UnsafeCallback):  # allow-listing never admits credentials
        check_url("http://user:pw@127.0.0.1:9000/receiver", allowlist=allowlist)


def test_a_name_that_resolves_to_a_forbidden_address_is_refused() -> None:
    answers = {"rebind.example.com": ["93.184.215.14", "127.0.0.1"], "public.example.com": ["93.184.215.14"]}

    def resolver(host: str, port: int) -> Sequence[str]:
        return answers[host]

    assert check_url("https://public.example.com/h", resolver=resolver).host == "public.example.com"
    with pytest.raises(UnsafeCallback, match=r"127\.0\.0\.1"):
        check_url("https://rebind.example.com/h", resolver=resolver)


def test_a_name_that_does_not_resolve_yet_is_checked_again_at_delivery() -> None:
    def resolver(host: str, port: int) -> Sequence[str]:
        raise OSError("no such name")

    assert check_url("https://not-yet.example.com/h", resolver=resolver).host == "not-yet.example.com"
    with pytest.raises(UnsafeCallback):
        check_addresses("not-yet.example.com", [])


def test_the_allowlist_refuses_what_is_not_an_origin() -> None:
    with pytest.raises(ValueError):
        parse_allowlist("ftp://127.0.0.1:21")
