"""Which addresses a server may connect to on a user's behalf (SSRF): a host name is resolved
once, every address it gives is checked, and the caller connects to a checked address, so a
second DNS answer cannot swap in a private one (media fetched by URL, webhooks)."""

from __future__ import annotations

import ipaddress
import socket


class AddressRefused(Exception):
    """The host cannot be resolved, or resolves to an address that is not allowed."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def address_is_public(address: IPAddress) -> bool:
    """True for globally routable unicast addresses; False for loopback, private, link-local
    (cloud metadata at 169.254.169.254), shared, reserved, multicast and unspecified ones."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return address_is_public(embedded)
        if address.teredo is not None:
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_reserved
        or address.is_unspecified
    )


def resolve_checked(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Every address ``host`` resolves to, refusing the host if any one of them is not public
    (unless ``allow_private``: loopback and private addresses, for tests and closed networks)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressRefused(f"cannot resolve host {host!r}: {exc}") from None
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        host_text = sockaddr[0]
        if not isinstance(host_text, str):  # only IPv4 and IPv6 answers come back for a host
            raise AddressRefused(
                f"host {host!r} resolves to {host_text!r}, which is not an IP address"
            )
        text = host_text.split("%", 1)[0]  # drop an IPv6 zone id
        address = ipaddress.ip_address(text)
        if not allow_private and not address_is_public(address):
            raise AddressRefused(
                f"host {host!r} resolves to {address}, which is not a public address"
            )
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise AddressRefused(f"host {host!r} has no address")
    return addresses
