"""One delivery attempt over HTTP(S), connected to an address that was checked just before.

The host is resolved here, every address it resolves to is checked (`addresses.check_addresses`), and the socket
connects to one of those addresses (TLS still verifies the certificate for the host name, sent as SNI): a resolver
that answers differently a moment later cannot redirect the connection. Redirects are never followed: a 3xx is a
failed attempt, whatever its `Location` says.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass

from longhaul.core.addresses import CallbackTarget, Resolver, UnsafeCallback, check_addresses, system_resolver

USER_AGENT = "Longhaul-Webhooks/1"
MAX_RESPONSE_BYTES = 4096  # the body of the answer is not used; read a little so the connection closes cleanly


class DeliveryFailed(Exception):
    """The attempt did not end with a 2xx answer; the message is safe to show (no secret, no body)."""


@dataclass(frozen=True)
class Delivered:
    status: int
    address: str


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, *, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


def post(
    target: CallbackTarget,
    body: bytes,
    headers: dict[str, str],
    *,
    resolver: Resolver = system_resolver,
    timeout: float = 10.0,
    tls: ssl.SSLContext | None = None,
) -> Delivered:
    """POST `body` to the target; `Delivered` on a 2xx, else `DeliveryFailed` (3xx included, never followed)."""
    try:
        resolved = list(resolver(target.host, target.port))
    except OSError as error:
        raise DeliveryFailed(f"could not resolve {target.host}: {error.strerror or error}") from None
    if target.allow_listed:
        candidates = resolved
    else:
        try:
            candidates = [str(a) for a in check_addresses(target.host, resolved)]
        except UnsafeCallback as unsafe:
            raise DeliveryFailed(f"refused: {unsafe}") from None
    if not candidates:
        raise DeliveryFailed(f"{target.host} resolves to no address")
    failures = []
    for address in candidates:
        connection: http.client.HTTPConnection
        if target.scheme == "https":
            context = tls or ssl.create_default_context()
            connection = _PinnedHTTPSConnection(
                target.host, target.port, address=address, timeout=timeout, context=context
            )
        else:
            connection = _PinnedHTTPConnection(target.host, target.port, address=address, timeout=timeout)
        try:
            connection.request(
                "POST",
                target.path,
                body=body,
                headers={**headers, "Content-Type": "application/json", "User-Agent": USER_AGENT},
            )
            response = connection.getresponse()
            response.read(MAX_RESPONSE_BYTES)
        except (OSError, http.client.HTTPException) as error:
            failures.append(f"{address}: {type(error).__name__}: {error}")
            continue
        finally:
            connection.close()
        if 200 <= response.status < 300:
            return Delivered(status=response.status, address=address)
        if 300 <= response.status < 400:
            raise DeliveryFailed(f"HTTP {response.status}: redirects are not followed")
        raise DeliveryFailed(f"HTTP {response.status}")
    raise DeliveryFailed("could not connect: " + "; ".join(failures)[:400])
