"""The operator's page in HTTP mode (issue 24 item 4): ``GET /``, its assets and ``/ui/libraries``.

In process through the ASGI app for the HTTP rules (no key for the page itself, a key for its data,
Host/Origin checks, the Content-Security-Policy), and in a real headless Chromium driven by Playwright
against ``docbundle serve --transport http`` for what a person does: load the page, see the libraries,
search, read the hit; and, with keys, be asked for one. The browser tests need Debian's ``chromium``
and the ``playwright`` package: they skip without them, unless ``DOCBUNDLE_REQUIRE_BROWSER=1`` (set by
``.ci/run``, which installs the browser), where a missing browser fails them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from asgikit import serving
from browserkit import browser_fixture, page_fixture  # noqa: F401  (the browser and page fixtures)
from docbundle.server.catalog import Catalog
from docbundle.server.http.options import HttpOptions
from docbundle.server.http.page import CONTENT_SECURITY_POLICY, MAX_LIBRARY_ROWS
from docbundle.server.keys import KeyStore, create_key, revoke_key
from httpkit import client
from serverkit import HttpServerProcess
from treekit import build

pytestmark = pytest.mark.anyio

HOSTILE = "<img src=x onerror=\"document.title='pwned'\"> <script>document.title='pwned'</script>"


@pytest.fixture(scope="module")
def keyfile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A keys file with one active key and one revoked; (path, active key, revoked key)."""
    path = tmp_path_factory.mktemp("page-keys") / "keys.toml"
    active = create_key(path, "operator")[1]
    revoked_key = create_key(path, "gone")
    revoke_key(path, revoked_key[0].id)
    return path, active, revoked_key[1]


@pytest.fixture(scope="module")
def page_root(bundles_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server tests' libraries plus ``hostile``, whose one page holds HTML that must stay text."""
    root = tmp_path_factory.mktemp("page-bundles")
    shutil.copytree(bundles_root, root, dirs_exist_ok=True)
    work = tmp_path_factory.mktemp("page-work")
    site = work / "hostile"
    site.mkdir()
    (site / "page.md").write_text(
        f"# Escaping guide\n\nThe escaping guide shows this markup as text: {HOSTILE}\n", encoding="utf-8"
    )
    (site / "llms.txt").write_text("# hostile\n\n## Docs\n\n- [Escaping guide](page.md)\n", encoding="utf-8")
    config = '[[library]]\nid = "hostile"\nllms_txt = "hostile/llms.txt"\n[library.chunking]\nmin_words = 3\n'
    build(work / "hostile.toml", root, config)
    return root


def _options(**kw: Any) -> HttpOptions:
    return HttpOptions(**{"host": "127.0.0.1", **kw})


# -- HTTP rules, in process ---------------------------------------------------------------------------


async def test_the_page_is_served_without_a_key_with_a_strict_policy(
    page_root: Path, keyfile: tuple[Path, str, str]
) -> None:
    catalog = Catalog.load(page_root)
    async with serving(catalog, _options(), keys=KeyStore(keyfile[0])) as app, client(app) as http:
        for path, kind in (
            ("/", "text/html"),
            ("/ui/page.js", "text/javascript"),
            ("/ui/page.css", "text/css"),
        ):
            r = await http.get(path)
            assert r.status_code == 200, path
            assert r.headers["content-type"].startswith(kind)
            assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert (
                "script-src 'self'" in CONTENT_SECURITY_POLICY
                and "unsafe-inline" not in CONTENT_SECURITY_POLICY
            )
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["referrer-policy"] == "no-referrer"
            assert r.headers["cache-control"] == "no-store"
        head = await http.head("/")
        assert head.status_code == 200 and head.content == b""
        page = (await http.get("/")).text
        assert (
            "<script>" not in page and "http://" not in page and "https://" not in page
        )  # no inline, no external
        assert (await http.post("/", content=b"")).status_code == 405


async def test_the_library_list_needs_a_key_when_keys_are_on(
    page_root: Path, keyfile: tuple[Path, str, str]
) -> None:
    path, active, revoked = keyfile
    catalog = Catalog.load(page_root)
    async with serving(catalog, _options(), keys=KeyStore(path)) as app, client(app) as http:
        assert (await http.get("/ui/libraries")).status_code == 401
        assert (await http.get("/ui/libraries", headers={"Authorization": "Bearer x.y"})).status_code == 401
        assert (
            await http.get("/ui/libraries", headers={"Authorization": f"Bearer {revoked}"})
        ).status_code == 403
        r = await http.get("/ui/libraries", headers={"Authorization": f"Bearer {active}"})
        assert r.status_code == 200
        body = r.json()
        assert body["total"] == len(catalog.library_ids())
        ids = [row["id"] for row in body["libraries"]]
        assert ids == catalog.library_ids()
        row = next(row for row in body["libraries"] if row["id"] == "hostile")
        # Never used, but listed: a listing checks what it shows against its CURRENT, as a page of
        # list_libraries does, so the build and counts are the manifest's, never only what
        # catalog.json claims (issue 31), and the same whichever worker answers (issue 35).
        assert row["checked"] is True and row["documents"] == 1
        assert row["health"] == "serving" and row["vectors"] is False
        assert isinstance(row["buildId"], str) and row["ageSeconds"] >= 0
        # A filter narrows, and says how many matched.
        r = await http.get("/ui/libraries?q=HOSTILE", headers={"Authorization": f"Bearer {active}"})
        assert [row["id"] for row in r.json()["libraries"]] == ["hostile"]
        assert r.json()["matched"] == 1
        assert (
            await http.post("/ui/libraries", headers={"Authorization": f"Bearer {active}"})
        ).status_code == 405


async def test_the_page_follows_the_host_and_origin_rules(page_root: Path) -> None:
    catalog = Catalog.load(page_root)
    async with serving(catalog, _options()) as app, client(app) as http:
        assert (await http.get("/", headers={"Host": "evil.example"})).status_code == 421
        assert (await http.get("/ui/libraries", headers={"Host": "evil.example"})).status_code == 421
        assert (
            await http.get("/ui/libraries", headers={"Origin": "https://evil.example"})
        ).status_code == 403
        assert (
            await http.get("/ui/libraries", headers={"Origin": "http://127.0.0.1:8000"})
        ).status_code == 200


async def test_the_library_list_is_bounded(tmp_path: Path) -> None:
    """More libraries than one answer shows: the page gets the first rows and the counts."""
    from serverkit import install_golden

    for i in range(MAX_LIBRARY_ROWS + 3):
        install_golden(tmp_path, f"lib{i:04d}")
    catalog = Catalog.load(tmp_path)
    async with serving(catalog, _options()) as app, client(app) as http:
        body = (await http.get("/ui/libraries")).json()
        assert body["shown"] == len(body["libraries"]) == MAX_LIBRARY_ROWS
        assert body["matched"] == body["total"] == MAX_LIBRARY_ROWS + 3


# -- a real browser -----------------------------------------------------------------------------------


def _search(pg: Any, library: str, question: str) -> str:
    pg.select_option("#library", library)
    pg.fill("#question", question)
    pg.click("#search-form button")
    pg.wait_for_function("() => !document.getElementById('answer').textContent.startsWith('Searching')")
    return str(pg.text_content("#answer"))


def test_a_browser_lists_the_libraries_and_searches_as_the_model_does(page_root: Path, page: Any) -> None:
    with HttpServerProcess(page_root, "--no-auth") as srv:
        page.goto(srv.url.rsplit("/mcp", 1)[0] + "/")
        page.wait_for_selector("#libraries tbody tr")
        rows = page.locator("#libraries tbody tr")
        ids = [rows.nth(i).locator("td").first.text_content() for i in range(rows.count())]
        assert "hostile" in ids and "demo" in ids
        assert "Serving" in str(page.text_content("#status"))

        answer = _search(page, "demo", "how long does the client wait between retry attempts")
        assert "max_retry_after" in answer  # the retries page's text, as the tool returned it
        sources = page.locator("#sources li")
        assert sources.count() >= 1 and "Retries" in str(sources.first.text_content())

        # Bundle text is text: the markup arrives in the answer and runs nowhere.
        answer = _search(page, "hostile", "escaping guide markup shown as text")
        assert "onerror" in answer and "<script>" in answer
        assert page.title() == "docbundle"
        assert page.locator("#answer img, #answer script").count() == 0
        assert page.problems == []


def test_a_browser_is_asked_for_a_key_and_keeps_it_out_of_urls(
    page_root: Path, page: Any, keyfile: tuple[Path, str, str]
) -> None:
    path, active, _revoked = keyfile
    requests: list[tuple[str, str | None]] = []
    page.on("request", lambda r: requests.append((r.url, r.headers.get("authorization"))))
    with HttpServerProcess(page_root, "--keys", str(path)) as srv:
        page.goto(srv.url.rsplit("/mcp", 1)[0] + "/")
        page.wait_for_selector("#key-form:not([hidden])")
        assert page.is_hidden("#main")

        page.fill("#key", "nobody.wrongsecret")
        page.click("#key-form button")
        page.wait_for_function("() => document.getElementById('key-error').textContent.length > 0")
        assert "invalid API key" in str(page.text_content("#key-error"))

        page.fill("#key", active)
        page.click("#key-form button")
        page.wait_for_selector("#libraries tbody tr")
        answer = _search(page, "demo", "how long does the client wait between retry attempts")
        assert "max_retry_after" in answer
        assert page.context.cookies() == []
        assert page.evaluate("() => localStorage.length + sessionStorage.length") == 0
    secret = active.split(".", 1)[1]
    assert all(secret not in url for url, _ in requests)
    assert any(auth == f"Bearer {active}" for url, auth in requests if url.endswith("/mcp"))
