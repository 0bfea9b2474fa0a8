"""The operator's page in HTTP mode: ``GET /`` lists the libraries and searches one the way the model does.

Four static files (``page/index.html``, ``page.js``, ``page.css``, ``icon.svg``, in the package: no build step, no
external asset) and one JSON endpoint:

- ``/`` and the ``/ui/`` assets hold no data and are served to any client that passes the
  ``Host``/``Origin`` checks, without a key (like ``/healthz``), so that the page can ask for one;
- ``GET /ui/libraries`` (key required, like ``/mcp``, and rate-limited the same way) lists at most
  ``MAX_LIBRARY_ROWS`` libraries, filtered by ``?q=`` (at most ``MAX_FILTER_CHARS`` characters, matched
  by ``list_libraries``' rule: every word in the id, name, category or description);
  ``checked: true`` means the version's ``CURRENT`` and its build's own manifest were read (on its first
  use) and every field of the row comes from that manifest; a library not checked yet
  (``checked: false``) shows no build, age or counts, and its name is only what ``catalog.json`` claims;
- the page's search box posts ``tools/call search_documents`` to ``/mcp`` itself, so what it shows is the
  tool's answer, through every check a client's call goes through.

Every page response carries a strict Content-Security-Policy (scripts, styles and fetches from this
origin only; no inline script, no frames, no forms posting elsewhere), ``nosniff``, ``no-referrer`` and
``no-store``. The key the page asks for stays in a JavaScript variable of the tab: never in a URL, a
cookie or web storage. Bundle text reaches the DOM through ``textContent`` only.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from ..catalog import Catalog
from ..catalog.projection import holds, words
from ..errors import clip

PAGE_PATHS = {
    "/": ("index.html", b"text/html; charset=utf-8"),
    "/ui/page.js": ("page.js", b"text/javascript; charset=utf-8"),
    "/ui/page.css": ("page.css", b"text/css; charset=utf-8"),
    "/ui/icon.svg": ("icon.svg", b"image/svg+xml"),
}
LIBRARIES_PATH = "/ui/libraries"
MAX_LIBRARY_ROWS = 500  # rows of one /ui/libraries answer; the page says how many matched in all
MAX_FILTER_CHARS = 200
MAX_SHOWN_NAME_CHARS = 200  # a name as the summary writes it (clipped there; a forged one is clipped here)

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]  # and Cache-Control: no-store, which every answer of Exchange.respond_bytes carries

_files: dict[str, bytes] = {}


def page_file(path: str) -> tuple[bytes, bytes]:
    """The body and content type of one of ``PAGE_PATHS`` (read from the package once)."""
    name, content_type = PAGE_PATHS[path]
    if name not in _files:
        _files[name] = resources.files(__package__).joinpath("page", name).read_bytes()
    return _files[name], content_type


def library_rows(catalog: Catalog, query_string: bytes, now: float | None = None) -> dict[str, Any]:
    """What ``GET /ui/libraries`` answers: the libraries matching ``?q=`` (every word in the id, name,
    category or description, ignoring case: ``list_libraries``' rule), at most ``MAX_LIBRARY_ROWS`` of
    them, and how many matched and exist in all."""
    params = parse_qs(query_string.decode("latin-1"), max_num_fields=4)
    terms = words((params.get("q") or [""])[0].strip()[:MAX_FILTER_CHARS])
    now = time.time() if now is None else now
    libraries = catalog.libraries()
    matched = [lib for lib in libraries if not terms or holds(lib, terms)]
    rows = []
    for lib in matched[:MAX_LIBRARY_ROWS]:
        # Build, age, counts and vectors only once the version was checked (the projection's rule).
        view = catalog.version_view(lib.default)
        age = view.age(now)
        rows.append(
            {
                "id": lib.id,
                "name": clip(lib.name, MAX_SHOWN_NAME_CHARS),
                "version": lib.default_version,
                "checked": view.checked,
                "buildId": view.shaped_build_id,
                "ageSeconds": round(age, 1) if age is not None else None,
                "documents": view.documents,
                "vectors": view.vectors,
                "health": view.state,
                "reason": view.reason,
            }
        )
    return {"libraries": rows, "shown": len(rows), "matched": len(matched), "total": len(libraries)}
