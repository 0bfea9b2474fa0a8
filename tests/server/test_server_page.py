"""The operator's page in HTTP mode (issue 24 item 4): ``GET /``, its assets and ``/ui/libraries``.

In process through the ASGI app for the HTTP rules (no key for the page itself, a key for its data,
Host/Origin checks, the Content-Security-Policy), and in a real headless Chromium driven by Playwright
against ``docbundle serve --transport http`` for what a person does: load the page, see the libraries,
search, read the hit; and, with keys, be asked for one. The browser tests need Debian's ``chromium``
and the ``playwright`` package: they skip without them, unless ``DOCBUNDLE_REQUIRE_BROWSER=1`` (set by
``.ci/run``, which installs the browser), where a missing browser fails them.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgikit import serving
from browserkit import browser_fixture, page_fixture  # noqa: F401  (the browser and page fixtures)
from docbundle.server.catalog import Catalog
from docbundle.server.http.options import HttpOptions
from docbundle.server.http.page import CONTENT_SECURITY_POLICY, MAX_LIBRARY_ROWS, REQUESTS_PATH, quantile
from docbundle.server.keys import KeyStore, create_key, revoke_key
from httpkit import MCP_HEADERS, client
from metricskit import tool_call
from serverkit import HttpServerProcess
from treekit import build

pytestmark = pytest.mark.anyio

BROWSER_WAIT = 20.0  # seconds a browser test waits for what it expects to see (bounded polling)
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


async def test_the_request_figures_need_a_key_and_count_every_call(
    page_root: Path, keyfile: tuple[Path, str, str]
) -> None:
    """``/ui/requests``: behind the key like ``/metrics``; per tool, the calls, errors and latency
    quantiles the scrape holds (issue 35: the page had no request, error or latency view)."""
    path, active, _revoked = keyfile
    catalog = Catalog.load(page_root)
    auth = {"Authorization": f"Bearer {active}"}
    async with serving(catalog, _options(), keys=KeyStore(path)) as app, client(app) as http:
        assert (await http.get(REQUESTS_PATH)).status_code == 401
        for i in range(3):
            call = tool_call(i, "search_documents", libraryId="demo", query="retry attempts")
            assert (await http.post("/mcp", content=call, headers={**MCP_HEADERS, **auth})).status_code == 200
        bad = tool_call(9, "search_documents", libraryId="demo", query="x", mode="sideways")
        await http.post("/mcp", content=bad, headers={**MCP_HEADERS, **auth})
        r = await http.get(REQUESTS_PATH, headers=auth)
        assert r.status_code == 200 and r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        rows = {row["labels"]["tool"]: row for row in r.json()["tools"]}
    search = rows["search_documents"]
    assert search["requests"] == 4 and search["outcomes"].get("ok") == 3
    # The bad mode is the one failure, counted as the scrape's outcome label says (metrics.OUTCOMES).
    assert search["errors"] == search["outcomes"].get("error", 0)
    assert search["clientErrors"] == search["outcomes"].get("client_error", 0)
    assert search["errors"] + search["clientErrors"] == 1
    assert 0 < search["p50"] <= search["p99"]


def test_latency_quantiles_read_a_histogram_as_prometheus_does() -> None:
    """histogram_quantile's estimate: linear within the bucket the rank falls in; the highest finite
    bound when it falls in +Inf; nothing before the first observation."""
    buckets = [(0.01, 50.0), (0.1, 90.0), (1.0, 100.0), (math.inf, 100.0)]
    assert quantile(0.5, buckets) == 0.01
    assert quantile(0.7, buckets) == pytest.approx(0.01 + 0.09 * 20 / 40)
    assert quantile(0.99, buckets) == pytest.approx(0.1 + 0.9 * 9 / 10)
    assert quantile(0.99, [(0.01, 1.0), (math.inf, 10.0)]) == 0.01
    assert quantile(0.5, [(0.01, 0.0), (math.inf, 0.0)]) is None and quantile(0.5, []) is None


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


def _until(check: Callable[[], Any], what: str, timeout: float = BROWSER_WAIT) -> Any:
    """Poll ``check`` from Python until it returns something true (``wait_for_function`` evaluates a
    string, which the page's Content-Security-Policy forbids); fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout:g} s: {what}")
        time.sleep(0.05)


def _search(pg: Any, library: str, question: str, **choices: str) -> str:
    """Search from the page's form (``choices``: ``version``, ``mode``, ``limit``); the answer's text."""
    pg.select_option("#library", library)
    for name, chosen in choices.items():
        if name == "limit":
            pg.fill("#limit", chosen)
        else:
            pg.select_option(f"#{name}", chosen)
    pg.fill("#question", question)
    pg.click("#search-form button")
    _until(lambda: not str(pg.text_content("#answer")).startswith("Searching"), "the search's answer")
    return str(pg.text_content("#answer"))


def _home(srv: HttpServerProcess) -> str:
    return srv.url.rsplit("/mcp", 1)[0] + "/"


def test_a_browser_lists_the_libraries_and_searches_as_the_model_does(page_root: Path, page: Any) -> None:
    with HttpServerProcess(page_root, "--no-auth") as srv:
        page.goto(_home(srv))
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
        page.goto(_home(srv))
        page.wait_for_selector("#key-form:not([hidden])")
        assert page.is_hidden("#main")

        page.fill("#key", "nobody.wrongsecret")
        page.click("#key-form button")
        _until(lambda: page.text_content("#key-error"), "the key's refusal")
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


# -- what a person sees (issue 35, item 1) ------------------------------------------------------------


def _box(pg: Any, selector: str) -> dict[str, float]:
    box = pg.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not laid out"
    return dict(box)


def _rows(pg: Any, selector: str) -> list[list[str]]:
    """The text of each cell of a table's body, row by row, as shown."""
    return [
        [str(c) for c in row.locator("td").all_inner_texts()]
        for row in pg.locator(f"{selector} tbody tr").all()
    ]


def _facts(pg: Any) -> dict[str, str]:
    """The structured result as shown: each term of ``#result`` and its value."""
    terms, values = pg.locator("#result dt").all_inner_texts(), pg.locator("#result dd").all_inner_texts()
    return dict(zip(terms, values, strict=True))


def _request_row(pg: Any, tool: str) -> list[str] | None:
    return next((row for row in _rows(pg, "#requests") if row[0] == tool), None)


def test_with_no_auth_the_page_asks_for_nothing_and_links_its_endpoints(page_root: Path, page: Any) -> None:
    """docs/deployment.md: "With --no-auth, it asks for nothing" (the key form stayed on screen: a
    form's ``display: flex`` beat its ``hidden`` attribute)."""
    with HttpServerProcess(page_root, "--no-auth") as srv:
        page.goto(_home(srv))
        page.wait_for_selector("#libraries tbody tr")
        assert page.is_visible("#main") and page.is_hidden("#key-form") and page.is_hidden("#key")
        assert "API key" not in page.inner_text("body")
        assert page.is_hidden("#forget-key")  # no key, nothing to forget
        assert page.problems == []
        for path, shows in (
            ("/readyz", '"status"'),
            ("/info", '"formatVersions"'),
            ("/metrics", "docbundle_requests"),
        ):
            link = page.locator(f"nav a[href='{path}']")
            assert link.is_visible(), path
            link.click()  # followed, it shows the endpoint's answer (no key needed here)
            _until(lambda p=path, t=shows: page.url.endswith(p) and t in page.inner_text("body"), path)
            page.go_back()
            page.wait_for_selector("#libraries tbody tr")


def test_a_key_form_of_one_line_forgets_a_refusal_and_then_the_key(
    page_root: Path, page: Any, keyfile: tuple[Path, str, str]
) -> None:
    """The key input is one line beside its button (it was ~330 px tall), a refusal goes once a key works
    (a stale "invalid API key" stayed), /metrics opens with the key, and "Forget key" drops it."""
    path, active, _revoked = keyfile
    with HttpServerProcess(page_root, "--keys", str(path)) as srv:
        page.goto(_home(srv))
        _until(lambda: page.is_visible("#key-form"), "the key form")
        key, button = _box(page, "#key"), _box(page, "#key-form button")
        assert key["height"] <= 1.5 * button["height"], (key, button)  # one line, as tall as its button
        assert key["width"] >= 4 * key["height"] and abs(key["y"] - button["y"]) < button["height"]
        assert page.is_hidden("#main") and page.is_hidden("#forget-key")

        page.fill("#key", "nobody.wrongsecret")
        page.click("#key-form button")
        _until(lambda: page.is_visible("#key-error") and page.text_content("#key-error"), "the refusal")
        assert "invalid API key" in page.inner_text("body")

        page.fill("#key", active)
        page.click("#key-form button")
        page.wait_for_selector("#libraries tbody tr")
        assert page.is_hidden("#key-form") and "invalid API key" not in page.inner_text("body")
        assert "API key is needed" not in page.inner_text("body")

        page.click("#metrics-link")  # a link sends no key: the page fetches it with the key and shows it
        _until(lambda: page.is_visible("#metrics-text"), "the metrics text")
        assert "docbundle_requests_total" in page.inner_text("#metrics-text")

        assert page.is_visible("#forget-key")
        page.click("#forget-key")
        _until(lambda: page.is_visible("#key-form"), "the key form again")
        assert page.is_hidden("#main") and page.is_hidden("#forget-key")
        assert _rows(page, "#libraries") == [] and page.inner_text("#metrics-text") == ""
        assert page.evaluate("() => apiKey") is None
        page.fill("#key", "nobody.wrongsecret")  # the form works again
        page.click("#key-form button")
        _until(lambda: "invalid API key" in str(page.text_content("#key-error")), "the refusal again")
        assert [p for p in page.problems if "status of 401" not in p] == []  # refusals are the only errors


def test_a_search_with_version_mode_and_limit_shows_scores_why_and_each_page_once(
    page_root: Path, page: Any
) -> None:
    """The form sends the version, mode and limit chosen; the result is shown as data (mode and why,
    terms, one score per hit) beside the model's text; a source names its page once (it read "Retries ›
    Retries › …": the heading path already starts with the title)."""
    with HttpServerProcess(page_root, "--no-auth") as srv:
        page.goto(_home(srv))
        page.wait_for_selector("#libraries tbody tr")
        assert page.input_value("#limit") == "5" and page.input_value("#mode") == ""
        question = "how long does the client wait between retry attempts"
        answer = _search(page, "demo", question, version="2.x", mode="broad", limit="2")
        assert "max_retry_after" in answer
        facts = _facts(page)
        assert facts["mode"] == "broad" and "demo 2.x" in facts["library"]
        assert "attempt" in facts["terms"].split(", ")
        hits = page.locator("#sources li")
        assert 1 <= hits.count() <= 2 and facts["hits"].startswith(str(hits.count()))
        for hit in hits.all():
            assert float(hit.locator(".score").inner_text()) > 0  # each hit shows its score first
            label = hit.locator(".label").inner_text()
            parts = label.split(" › ")
            assert all(a != b for a, b in itertools.pairwise(parts)), label
        assert "Retries" in hits.first.inner_text()
        assert hits.first.inner_text().count("Retries") == 1

        _search(page, "demo", question, mode="", limit="5")  # the default mode says why it ran
        facts = _facts(page)
        assert facts["mode"] == "balanced" and facts.get("why")
        assert page.locator("#sources li").count() <= 5

        _search(page, "", question)  # every library: the result says how they were chosen
        facts = _facts(page)
        assert "library" not in facts and facts["libraries"].startswith(("all", "routed", "unrouted"))
        assert "demo" in page.inner_text("#sources")
        assert page.problems == []


def _workers(srv: HttpServerProcess, path: str) -> set[int]:
    """The workers whose access log shows a request for ``path``."""
    found = set()
    for line in srv.lines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("path") == path and "worker" in record:
                found.add(record["worker"])
    return found


AGE = 4  # the libraries table's age column: it grows while the test runs
HEALTH = 7
VIEWS = 12  # page views, each on new connections, to have both workers answer (they did within 3 here)


def test_two_workers_show_one_table_and_one_set_of_request_figures(
    page_root: Path, browser: Any, page: Any
) -> None:
    """With ``--workers 2`` each view of the page (new connections: the kernel picks the worker) shows
    the same row for a library one worker opened and the other never did (its health read ``ready`` or
    ``available``, its build ``not checked yet``, with the worker), and the request figures of the whole
    server (every worker's counters)."""
    searches = 2
    with HttpServerProcess(page_root, "--no-auth", "--workers", "2", "--rate", "off") as srv:
        page.goto(_home(srv))
        page.wait_for_selector("#libraries tbody tr")
        for _ in range(searches):  # one connection, so one worker opens demo
            assert "max_retry_after" in _search(page, "demo", "how long does the client wait between retries")
        shown: set[tuple[str, ...]] = set()
        figures: set[tuple[str, ...]] = set()
        for _ in range(VIEWS):
            context = browser.new_context()
            try:
                view = context.new_page()
                view.set_default_timeout(BROWSER_WAIT * 1000)
                view.goto(_home(srv))
                view.wait_for_selector("#libraries tbody tr")
                row = next(r for r in _rows(view, "#libraries") if r[0] == "demo")
                shown.add(tuple("" if i == AGE else cell for i, cell in enumerate(row)))
                figures.add(tuple(_until(lambda v=view: _request_row(v, "search_documents"), "the figures")))
            finally:
                context.close()
            if _workers(srv, "/ui/libraries") == {0, 1} and len(figures) >= 1:
                break
        assert _workers(srv, "/ui/libraries") == {0, 1}, "one worker answered every view"
    assert len(shown) == 1, shown
    (row,) = shown
    assert row[HEALTH] == "serving" and row[3] != "not checked yet" and row[5] != ""
    for tool, requests, _rate, errors, client_errors, p50, p99 in figures:
        assert (tool, requests) == ("search_documents", str(searches))
        assert errors.startswith("0 (0.0 %)") and client_errors.startswith("0 (0.0 %)")
        assert p50.endswith("s") and p99.endswith("s")


def test_the_library_table_and_request_figures_refresh_themselves(
    bundles_root: Path, tmp_path: Path, page: Any
) -> None:
    """A library installed while the page is open shows up without a click (every 15 s by default; the
    test picks 5 s), and the request rate is figured between two refreshes."""
    from serverkit import install_golden

    root = tmp_path / "bundles"
    shutil.copytree(bundles_root, root)
    with HttpServerProcess(root, "--no-auth", "--reload-interval", "1") as srv:
        page.goto(_home(srv))
        page.wait_for_selector("#libraries tbody tr")
        before = len(_rows(page, "#libraries"))
        assert page.input_value("#refresh") == "15"
        page.select_option("#refresh", "5")
        page.select_option("#library", "")  # every library: a refresh keeps the choice
        install_golden(root, "arrived")
        _until(
            lambda: any(r[0] == "arrived" for r in _rows(page, "#libraries")),
            "the new library, with no click",
            timeout=3 * BROWSER_WAIT,
        )
        assert f"Serving {before + 1} libraries" in page.inner_text("#status")
        assert page.input_value("#library") == "" and page.is_disabled("#version")
        rates = {row[0]: row[2] for row in _rows(page, "#requests")}
        assert rates and all(float(rate) >= 0 for rate in rates.values()), rates
        assert "/ui/libraries" in rates  # the page's own requests, by their route
        assert page.problems == []
