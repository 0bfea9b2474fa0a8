"""Which network addresses docbundle refuses to connect to: the one address policy of its downloads.

Two commands fetch from addresses someone else chose: the indexer's crawl (``docbundle-index``, through
``docbundle.indexer.pipeline.scope``) and ``docbundle pull``. Both resolve a host once, check every
address here, and connect only to an address that passed. Refused: loopback, private, link-local (the
cloud metadata service 169.254.169.254 among them), multicast, unspecified, shared (CGNAT), site-local
and reserved addresses, and the IPv4-mapped, 6to4 and NAT64 forms of those. The other numeric forms of
an IPv4 address (``2130706433``, ``0x7f.1``, ``017700000001``) are not literals to ``ipaddress``: they
reach the resolver, which turns them into the address that is then checked. Each caller decides its own
exemptions (the llms.txt's origin and ``allow_hosts``; the release ``pull`` was pointed at).

Pure standard library, no socket: ``docbundle serve`` never imports it (only the commands that fetch do).
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_problem(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public unicast address (e.g. ``"a loopback address"``), or None if it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_problem(embedded)
            return f"{inner} (in IPv6 form)" if inner else None
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a shared (CGNAT) address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "a site-local address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    return None


def host_key(host: str) -> str:
    """A URL host as compared: lower case, no trailing dot, no IPv6 brackets."""
    return host.lower().rstrip(".").strip("[]")


def parse_ip(text: str) -> IPAddress | None:
    """``text`` as an IP address (an IPv6 zone ``%eth0`` dropped), or None when it is not a literal."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def shown_host(host: str, port: int) -> str:
    """``host:port`` as a URL writes it (``[::1]:8080`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
