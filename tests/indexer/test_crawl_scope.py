"""The crawl scope: address classification, allow_hosts entries, resolution pinned to the connect.

Through the real crawler on 127.0.0.1 with an injected resolver, so names can resolve to chosen
addresses without any DNS (the ``.test`` names below do not resolve anywhere else).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from docbundle.indexer.config import load_config
from docbundle.indexer.errors import ConfigError, FetchError
from docbundle.indexer.pipeline.crawl import ERROR_KINDS, CrawlOptions, crawl, fetch_one
from docbundle.indexer.pipeline.scope import AddressGate, CrawlScope, HostRule, address_problem
from sitesrv import Site

FAST = CrawlOptions(timeout=2.0, retries=0)

REFUSED = {
    "127.0.0.1": "a loopback address",
    "127.8.9.10": "a loopback address",
    "::1": "a loopback address",
    "10.1.2.3": "a private address",
    "172.16.0.1": "a private address",
    "192.168.1.1": "a private address",
    "fd00::1": "a private address",
    "169.254.169.254": "a link-local address",
    "fe80::1": "a link-local address",
    "224.0.0.1": "a multicast address",
    "ff02::1": "a multicast address",
    "0.0.0.0": "an unspecified address",
    "::": "an unspecified address",
    "100.64.0.1": "a shared (CGNAT) address",
    "240.0.0.1": "a reserved address",
    "255.255.255.255": "a reserved address",
    "192.0.2.1": "a private address",  # documentation range: never a real server
    "::ffff:127.0.0.1": "a loopback address (in IPv6 form)",
    "::ffff:169.254.169.254": "a link-local address (in IPv6 form)",
    "::ffff:10.0.0.1": "a private address (in IPv6 form)",
    "2002:7f00:1::": "a loopback address (in IPv6 form)",  # 6to4 of 127.0.0.1
    "64:ff9b::a9fe:a9fe": "a link-local address (in IPv6 form)",  # NAT64 of 169.254.169.254
}


@pytest.mark.parametrize(("address", "problem"), sorted(REFUSED.items()))
def test_internal_addresses_are_named(address: str, problem: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "::ffff:93.184.216.34"])
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_host_rules_parse_names_addresses_networks_and_ports() -> None:
    v4, v6 = ipaddress.ip_address("10.0.0.5"), ipaddress.ip_address("::1")
    assert HostRule.parse("Docs.Internal:8443").matches("docs.internal", 8443, v4)
    assert not HostRule.parse("docs.internal:8443").matches("docs.internal", 443, v4)
    assert HostRule.parse("docs.internal").matches("DOCS.internal.", 1, v4)
    assert HostRule.parse("10.0.0.5").matches("any.name", 80, v4)
    assert HostRule.parse("10.0.0.0/8").matches("x", 80, v4)
    assert not HostRule.parse("10.0.0.0/8").matches("x", 80, v6)
    assert HostRule.parse("[::1]:8080").matches("x", 8080, v6)
    assert HostRule.parse("::1").matches("x", 1, v6)
    for bad in (
        "http://docs.internal",
        "docs.internal/path",
        "docs.internal:0",
        "a b",
        "",
        "[::1",
        "x:99999",
    ):
        with pytest.raises(ValueError, match="e.g."):
            HostRule.parse(bad)


def _config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "libraries.toml"
    path.write_text(f'[[library]]\nid = "demo"\nllms_txt = "https://docs.example/llms.txt"\n{extra}\n')
    return path


def test_allow_hosts_is_validated_with_the_library_and_key(tmp_path: Path) -> None:
    ok = load_config(_config(tmp_path, 'allow_hosts = ["docs.internal:8443", "10.0.0.5"]'))
    assert ok.libraries[0].allow_hosts == ["docs.internal:8443", "10.0.0.5"]
    with pytest.raises(
        ConfigError, match=r"library 'demo': key 'allow_hosts.1': 'http://x' is not a host name"
    ):
        load_config(_config(tmp_path, 'allow_hosts = ["ok.internal", "http://x"]'))
    with pytest.raises(ConfigError, match=r"library 'demo': key 'allow_host': unknown key"):
        load_config(_config(tmp_path, 'allow_host = ["docs.internal"]'))
    with pytest.raises(ConfigError, match=r"key 'allow_hosts'.*Expected `array`"):
        load_config(_config(tmp_path, 'allow_hosts = "docs.internal"'))


class _Resolver:
    """Answers from a table, counting the lookups."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        answers = self.table[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def _port(site: Site) -> int:
    return int((site.base_url or "").rsplit(":", 1)[1])


@pytest.mark.anyio
async def test_a_name_resolving_to_loopback_is_refused_without_a_request(site: Site) -> None:
    site.add("/a.md", "# A\n")
    port = _port(site)
    resolver = _Resolver({"internal.test": [["127.0.0.1"]], "mixed.test": [["93.184.216.34", "127.0.0.1"]]})
    scope = CrawlScope(AddressGate(lookup=resolver))
    one, mixed = await crawl(
        [f"http://internal.test:{port}/a.md", f"http://mixed.test:{port}/a.md"], scope=scope, options=FAST
    )
    assert one.error_kind == "refused" and one.error == (
        f"internal.test:{port} resolves to 127.0.0.1, which is a loopback address, not the llms.txt's own "
        "origin; allow it with allow_hosts in the library's config"
    )
    # One internal address among public ones refuses the name: nothing is tried, not even the public one.
    assert mixed.error_kind == "refused" and "127.0.0.1" in (mixed.error or "")
    assert "refused" in ERROR_KINDS
    assert not site.requests


@pytest.mark.anyio
async def test_the_connection_goes_to_the_address_that_was_checked(site: Site) -> None:
    site.add("/a.md", "# A\n")
    port = _port(site)
    # Allowed by address, not by name: the only way to reach the site is to connect to the checked
    # 127.0.0.1 (the system resolver knows nothing of "pinned.test"), keeping the URL's Host header.
    resolver = _Resolver({"pinned.test": [["127.0.0.1"]]})
    scope = CrawlScope(AddressGate(allow=(HostRule.parse(f"127.0.0.1:{port}"),), lookup=resolver))
    (result,) = await crawl([f"http://pinned.test:{port}/a.md"], scope=scope, options=FAST)
    assert result.ok and result.text == "# A\n", result.error
    (request,) = site.requests
    assert request.headers["host"] == f"pinned.test:{port}"
    assert request.headers["accept"].startswith("text/markdown")
    assert resolver.calls == ["pinned.test"]


def test_the_origin_exemption_holds_only_for_the_addresses_it_first_resolved_to(site: Site) -> None:
    site.add("/llms.txt", "# Lib\n\n- [A](a.md)\n", content_type="text/plain")
    site.add("/a.md", "# A\n")
    port = _port(site)
    # The origin's name resolves to the site first; later it is rebound to another loopback address.
    resolver = _Resolver({"docs.rebind.test": [["127.0.0.1"], ["127.0.0.2"]]})
    base = f"http://docs.rebind.test:{port}"
    scope = CrawlScope.for_source(f"{base}/llms.txt")
    scope = CrawlScope(AddressGate(scope.policy.origins, lookup=resolver))
    assert fetch_one(f"{base}/llms.txt", scope=scope, options=FAST).ok
    with pytest.raises(FetchError) as caught:
        fetch_one(f"{base}/a.md", scope=scope, options=FAST)
    assert caught.value.kind == "refused"
    assert "127.0.0.2, which is a loopback address, not one the llms.txt's origin resolved to before" in str(
        caught.value
    )
    assert [r.path for r in site.requests] == ["/llms.txt"]


def test_another_scheme_on_the_origin_port_is_not_the_origin(site: Site) -> None:
    site.add("/a.md", "# A\n")
    scope = CrawlScope.for_source(site.url("/llms.txt"))
    assert fetch_one(site.url("/a.md"), scope=scope, options=FAST).ok
    with pytest.raises(FetchError) as caught:
        fetch_one(site.url("/a.md").replace("http:", "https:"), scope=scope, options=FAST)
    assert caught.value.kind == "refused" and "loopback" in str(caught.value)


def test_a_redirect_to_a_file_url_is_refused(site: Site, tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("# Secret\n")
    site.fault("/a.md", "redirect", to=(tmp_path / "secret.md").as_uri())
    with pytest.raises(FetchError) as caught:
        fetch_one(site.url("/a.md"), scope=CrawlScope.for_source(site.url("/llms.txt")), options=FAST)
    assert caught.value.kind == "refused" and "only http(s) is fetched" in str(caught.value)


def test_a_remote_source_reads_no_local_file_and_other_schemes_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    remote = CrawlScope.for_source("https://docs.example/llms.txt")
    for url in ((tmp_path / "a.md").as_uri(), str(tmp_path / "a.md"), "ftp://docs.example/a.md"):
        with pytest.raises(FetchError) as caught:
            fetch_one(url, scope=remote, options=FAST)
        assert caught.value.kind == "refused", url


def test_local_root_must_hold_the_llms_txt_and_is_only_for_local_sources(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    path = tmp_path / "libraries.toml"
    path.write_text('[[library]]\nid = "demo"\nllms_txt = "docs/llms.txt"\nlocal_root = "."\n')
    (target,) = load_config(path).targets(load_config(path).get("demo"))
    assert target.local_root == str(tmp_path.resolve())
    path.write_text('[[library]]\nid = "demo"\nllms_txt = "docs/llms.txt"\nlocal_root = "elsewhere"\n')
    with pytest.raises(
        ConfigError, match=r"library 'demo': key 'local_root': 'elsewhere' must be a folder holding"
    ):
        load_config(path)
    with pytest.raises(ConfigError, match=r"key 'local_root': a remote llms.txt .* reads no local files"):
        load_config(_config(tmp_path, 'local_root = "."'))


def test_https_keeps_the_url_host_for_tls_while_connecting_to_the_checked_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate below is valid for "tls.test" only: the TLS handshake can succeed only if the
    server name sent and verified is the URL's host, although the connection goes to 127.0.0.1."""
    import datetime
    import http.server
    import ssl
    import threading

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    from docbundle.indexer.pipeline import session as crawl_module

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tls.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("tls.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    hosts: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(self.headers["Host"])
            body = b"# Over TLS\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/markdown; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = server_ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    port = server.server_address[1]
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    resolver = _Resolver({"tls.test": [["127.0.0.1"]]})
    origin = CrawlScope.for_source(f"https://tls.test:{port}/llms.txt").policy.origins
    scope = CrawlScope(AddressGate(origin, lookup=resolver))
    monkeypatch.setattr(crawl_module, "_ssl_context", lambda: client_ctx)
    try:
        result = fetch_one(f"https://tls.test:{port}/a.md", scope=scope, options=FAST)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert result.ok and result.text == "# Over TLS\n", result.error
    assert hosts == [f"tls.test:{port}"] and resolver.calls == ["tls.test"]
