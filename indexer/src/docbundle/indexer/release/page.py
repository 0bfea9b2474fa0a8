"""The catalogue page ``catalogue.html``: one static HTML file to browse the catalogue before pulling.

``--roll`` writes it beside ``status.json`` and the workflow publishes it with the release index (a
person downloads it from ``bundles-latest`` and opens it; it needs no server). It lists every library of
``status.json`` (id, name, category, description, versions, state, age, size and the ``docbundle pull``
command) and filters them by words, category and state in the browser.

One file and nothing it loads: the page's template, style and script are package files
(``page/catalogue.html``, ``catalogue.css``, ``catalogue.js``) inlined here, with a strict
Content-Security-Policy in a meta tag that allows exactly that style and that script by their sha256 and
nothing else (no network, no images, no frames, no forms). The catalogue's text is data from sites: it
goes in as JSON inside a ``<script type="application/json">`` element, with ``<``, ``>`` and ``&``
escaped as ``\\u003c``, ``\\u003e`` and ``\\u0026`` so no text can close that element, and the script
puts it on the page through ``textContent`` only.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from pathlib import Path

import msgspec
from docbundle.bundle.status import LibraryStatus

PAGE = "catalogue.html"
_PARTS = "page"


def _part(name: str) -> str:
    return resources.files(__package__).joinpath(_PARTS, name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(css: str, js: str) -> str:
    """The page's policy: its own inline style and script (by hash) and nothing else."""
    return (
        f"default-src 'none'; script-src {_sha256(js)}; style-src {_sha256(css)}; img-src 'none'; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _json_in_html(value: object) -> str:
    """``value`` as JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or ``&`` in it."""
    text = msgspec.json.encode(value).decode("utf-8")
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(entries: list[LibraryStatus], generated_at: str, unavailable_after: int) -> str:
    """The whole page for ``entries`` (``status.json``'s)."""
    css, js = _part("catalogue.css"), _part("catalogue.js")
    data = {"generated_at": generated_at, "unavailable_after": unavailable_after, "libraries": entries}
    parts = {
        "@CSP@": content_security_policy(css, js),
        "@CSS@": css,
        "@DATA@": _json_in_html(data),
        "@JS@": js,
    }
    page = _part("catalogue.html")
    # One pass in the template's order (CSP, CSS, DATA, JS), so no part's text is ever searched for another's placeholder.
    out: list[str] = []
    rest = page
    for mark, text in parts.items():
        before, found, rest = rest.partition(mark)
        assert found, mark
        out += [before, text]
    return "".join(out) + rest


def write_page(
    entries: list[LibraryStatus], out_dir: Path, generated_at: str, unavailable_after: int
) -> Path:
    """``catalogue.html`` in ``out_dir``."""
    path = out_dir / PAGE
    path.write_text(render_page(entries, generated_at, unavailable_after), encoding="utf-8")
    return path
