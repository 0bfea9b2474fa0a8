"""A real headless browser for tests: Debian's ``chromium`` driven by Playwright (the ``browser`` and
``page`` fixtures: import ``browser_fixture`` and ``page_fixture`` into a test module). Without them the
tests that use these fixtures skip, unless
``DOCBUNDLE_REQUIRE_BROWSER=1`` (set by ``.ci/run``, which installs the browser), where a missing browser
fails them. ``page.problems`` collects the page's console errors and uncaught exceptions (a
Content-Security-Policy violation is a console error), so a test can assert there were none.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module", name="browser")
def browser_fixture() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        if os.environ.get("DOCBUNDLE_REQUIRE_BROWSER") == "1":
            pytest.fail("DOCBUNDLE_REQUIRE_BROWSER=1 but chromium or the playwright package is missing")
        pytest.skip("no chromium (Debian package `chromium`) or no `playwright` package")
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(name="page")
def page_fixture(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(str(e)))
    pg.problems = problems
    try:
        yield pg
    finally:
        context.close()
