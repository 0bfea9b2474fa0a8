"""A fake internet on 127.0.0.1: documentation sites that behave the way real ones do, faults included.

The nightly rehearsal (``tests/rehearsal.py``, ``benchmarks/nightly_rehearsal.py`` and
``tests/e2e/test_nightly_rehearsal.py``) builds a catalogue of these sites with ``docbundle-index nightly``
and checks that each lands in the class it was made for. Every site lives under its own path prefix of one
loopback server (``sitesrv.Site``), so a library's pages are on its llms.txt's own origin, which the crawler's
address policy allows (docs/security.md, "What the indexer fetches"); a second server on another port plays
"another host" (a redirect there is refused by that policy), and a closed port plays a dead host.

Three sources of sites:

- **generated** (``KINDS``): a healthy markdown site, HTML sites, and one kind per fault a real site has
  (404/410, 429 with Retry-After, 503, timeouts and slow bodies, robots.txt that disallows, JavaScript shells
  with no content, redirects to another host, an llms.txt served as HTML, an llms-full.txt over the page cap,
  a dead host). Each kind names the class the nightly must report for it (``Kind.expected``).
- **wild** (``add_wild``): the real llms.txt files of the shared corpus ``llms-txt-wild``, their http(s) links
  and site-relative links rewritten to loopback pages under the site's prefix; one link in
  ``WILD_MISSING_EVERY`` is left missing (404), as real llms.txt files link pages that moved.
- **corpora** (``add_corpus``): the shared corpora, markdown ones as files, HTML ones the way a docs host serves
  them (``/x`` and ``/x.html``, ``/dir/`` for ``dir/index.html``, a ``.md`` sibling by URL and by
  ``Accept: text/markdown``), as ``../shared/tools/serve_site.py`` does.

Night two (``FakeWeb.night_two``) edits some sites, breaks some and mends some, as the web changes between
two nightly runs (``Site.change``).
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from docbundle.indexer.pipeline.llmstxt.parse import parse_llms_txt
from sitesrv import Site, run_site

__all__ = [
    "KINDS",
    "FakeWeb",
    "Kind",
    "SiteSpec",
    "generated_specs",
    "serve_fakeweb",
]

Change = Literal["same", "edit", "break", "mend"]

#: One link of a wild llms.txt in this many is left without a page (HTTP 404): real llms.txt files link
#: pages that have moved since the file was written.
WILD_MISSING_EVERY = 20
#: A generated llms-full.txt "over the page cap": this many bytes more than the crawl's ``max_bytes``.
HUGE_MARGIN = 64 * 1024
#: Retry-After of a site that rate-limits for good: far over the crawler's ``max_retry_after`` (60 s).
LONG_RETRY_AFTER = 3600
#: The body of a slow page is sent this many bytes at a time, ``SLOW_DELAY`` seconds apart.
SLOW_CHUNK = 512
SLOW_DELAY = 0.02
#: A stalled page sends 16 bytes every quarter second: a few KB take longer than any crawl timeout used here.
STALL_CHUNK = 16
STALL_DELAY = 0.25
#: A stalled site has at most this many pages: each holds a crawl slot for the whole timeout, twice or more.
STALLED_PAGES = 3
#: How long a "timeout" fault holds a request without answering: longer than any crawl timeout used here.
HANG_SECONDS = 60.0

_SYLLABLES = [
    "ka", "lo", "mi", "ra", "sen", "tor", "vel", "dan", "qui", "pex", "lor", "um", "bri", "cas", "dor",
    "fen", "gal", "hin", "jus", "kem", "lux", "mor", "nex", "ost", "pra", "ril", "sol", "tam", "ver", "zan",
]  # fmt: skip
_VOCAB = sorted(
    {a + b + c for a in _SYLLABLES[:12] for b in _SYLLABLES[8:22] for c in ("", "s", "er", "ing")}
)
#: A single-page app's shell, as create-react-app writes it: no content until its script runs.
_JS_SHELL = (
    '<!doctype html><html><head><meta charset="utf-8"><title>React App</title>'
    '<script defer="defer" src="/static/js/main.js"></script></head><body>'
    "<noscript>You need to enable JavaScript to run this app.</noscript>"
    '<div id="root"></div></body></html>'
)


@dataclass(frozen=True)
class Kind:
    """A kind of generated site: how it misbehaves, and the class the nightly must report for it."""

    name: str
    expected: str  # the reported class (``rehearsal.reported_class``) of a build of this site
    what: str  # one line for the class table


#: Every kind of generated site, with the class its build must land in (night one).
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("markdown", "built", "markdown pages"),
        Kind("negotiated", "built", "HTML pages that answer Accept: text/markdown with markdown"),
        Kind("html-only", "built:html", "HTML pages only, converted"),
        Kind("pages-missing", "built:pages-failed", "some listed pages answer 404 or 410"),
        Kind("retry-after", "built", "429 with Retry-After: 1 on the llms.txt and a page, then served"),
        Kind("slow-body", "built", "pages whose bodies trickle in, within the crawl's timeout"),
        Kind("stalled-body", "failed:timeout", "every page's body trickles in for longer than the timeout"),
        Kind("robots-disallow", "built", "follow on, robots.txt disallows everything: only listed pages"),
        Kind("moved-llms", "built", "the llms.txt redirects (301) to its new path on the same host"),
        Kind("not-found", "failed:http-404", "the llms.txt answers 404"),
        Kind("gone", "failed:http-410", "the llms.txt answers 410 Gone"),
        Kind(
            "rate-limited", "failed:rate-limited", f"429 with Retry-After {LONG_RETRY_AFTER} on the llms.txt"
        ),
        Kind("server-error", "failed:http-5xx", "the llms.txt answers 503 every time"),
        Kind("timeout", "failed:timeout", "the llms.txt never answers"),
        Kind("dead-host", "failed:network", "nothing listens on the site's port"),
        Kind("js-shell", "failed:no-content", "every page is a JavaScript shell with no content"),
        Kind("offhost-redirect", "failed:refused", "every page redirects to another host (port)"),
        Kind("llms-html", "failed:content-type", "the llms.txt is an HTML page"),
        Kind("huge-full", "failed:too-large", "an llms-full.txt over the page cap"),
    )
}

#: Night two: how a healthy site may break (the class its build then reports).
BREAKS: dict[str, str] = {
    "not-found": "failed:http-404",
    "server-error": "failed:http-5xx",
    "timeout": "failed:timeout",
    "js-shell": "failed:no-content",
}


@dataclass
class SiteSpec:
    """One site of the fake web and what its builds must report on each night."""

    library: str
    kind: str  # a key of KINDS, "wild" or "corpus"
    prefix: str  # "/g/<library>" etc.; "" for a dead host
    llms_path: str  # the llms.txt's path on its server
    expected: str  # night one's class
    change: Change = "same"  # what happens to the site before night two
    breaks_as: str = ""  # with change "break": a key of BREAKS
    pages: list[str] = field(default_factory=list)  # paths of the site's pages (generated sites)
    source: str = ""  # wild and corpus sites: the file or folder served
    follow: bool = False  # the library follows links (robots.txt applies)
    disallowed: list[str] = field(default_factory=list)  # paths robots.txt refuses: never requested

    def expected_on(self, night: int) -> str:
        """The class night ``night`` (1 or 2) must report, before shard moves are taken into account."""
        if night == 1:
            return self.expected
        if self.change == "break":
            return BREAKS[self.breaks_as]
        if self.change == "mend":
            return "built"
        return self.expected


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n))


def _page_markdown(rng: random.Random, title: str, sections: int) -> str:
    parts = [f"# {title}\n\n{_words(rng, 40).capitalize()}.\n"]
    for s in range(sections):
        parts.append(f"\n## {_words(rng, 2).title()} {s + 1}\n\n{_words(rng, rng.randint(80, 220))}.\n")
        if rng.random() < 0.3:
            parts.append(
                f"\n```python\n{rng.choice(_VOCAB)}({rng.choice(_VOCAB)}={rng.randint(1, 99)})\n```\n"
            )
    return "".join(parts)


def _as_html(markdown: str, title: str) -> str:
    body = []
    for block in markdown.split("\n\n"):
        block = block.strip()
        if block.startswith("## "):
            body.append(f"<h2>{block[3:]}</h2>")
        elif block.startswith("# "):
            body.append(f"<h1>{block[2:]}</h1>")
        elif block.startswith("```"):
            body.append(f"<pre><code>{block.strip('`').removeprefix('python')}</code></pre>")
        elif block:
            body.append(f"<p>{block}</p>")
    nav = '<nav><a href="./">Home</a> <a href="../">Up</a></nav>'
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>{nav}'
        f"<main><article>{''.join(body)}</article></main><footer>Copyright</footer></body></html>"
    )


def _listing(title: str, links: list[tuple[str, str]]) -> str:
    lines = [f"# {title}\n\n> The {title} documentation.\n\n## Docs\n\n"]
    lines += [f"- [{text}]({url}): {text.lower()}\n" for text, url in links]
    return "".join(lines)


def generated_specs(count: int, seed: int, *, start: int = 0) -> list[SiteSpec]:
    """``count`` generated sites: every kind at least once (when ``count`` allows), the rest drawn from
    ``_MIX``, with night two's changes (``_plan_changes``)."""
    rng = random.Random(seed)
    kinds = list(KINDS)[:count]
    rest = count - len(kinds)
    mix = [name for name, weight in _MIX.items() for _ in range(weight)]
    kinds += [rng.choice(mix) for _ in range(rest)]
    specs = []
    for i, kind in enumerate(kinds):
        lib = f"site-{start + i:04d}-{kind}"
        spec = SiteSpec(lib, kind, f"/g/{lib}", f"/g/{lib}/llms.txt", KINDS[kind].expected)
        specs.append(spec)
    _plan_changes(specs, rng)
    return specs


#: The mix of generated sites past one of each kind, out of 100: mostly healthy, about one in seven failing
#: at the llms.txt. An assumption (no nightly has crawled the real catalogue yet), chosen so that every
#: fault occurs several times among 1,000 sites.
_MIX: dict[str, int] = {
    "markdown": 45, "negotiated": 16, "html-only": 14, "pages-missing": 8, "retry-after": 1, "slow-body": 1,
    "robots-disallow": 1, "moved-llms": 1, "not-found": 4, "gone": 1, "rate-limited": 1, "server-error": 1,
    "timeout": 1, "stalled-body": 1, "dead-host": 1, "js-shell": 1, "offhost-redirect": 1, "llms-html": 1, "huge-full": 0,
}  # fmt: skip


def _plan_changes(specs: list[SiteSpec], rng: random.Random) -> None:
    """Night two: of the healthy sites, one in ten edited and one in ten broken (each way of breaking
    at least once); of the failed ones, one in five mended. Deterministic for a seed."""
    healthy = [s for s in specs if s.kind == "markdown"]
    failing = [s for s in specs if s.kind in ("not-found", "server-error", "gone")]
    ways = list(BREAKS)
    n_break = max(len(ways), len(healthy) // 10)
    n_edit = max(2, len(healthy) // 10)
    chosen = rng.sample(healthy, min(len(healthy), n_break + n_edit))
    for i, spec in enumerate(chosen[:n_break]):
        spec.change, spec.breaks_as = "break", ways[i % len(ways)]
    for spec in chosen[n_break:]:
        spec.change = "edit"
    for spec in failing[: max(1, len(failing) // 5)]:
        spec.change = "mend"


class FakeWeb:
    """The sites of one rehearsal, served by ``serve_fakeweb``: the main server, another host, a dead port."""

    def __init__(self, site: Site, other: Site, dead_port: int, *, max_bytes: int, pages: tuple[int, int]):
        self.site = site
        self.other = other
        self.dead_port = dead_port
        self.max_bytes = max_bytes
        self.pages = pages  # generated sites have between pages[0] and pages[1] pages
        self.specs: list[SiteSpec] = []
        self._listings: dict[str, str] = {}  # library -> its generated llms.txt (to mend it on night two)

    @property
    def base(self) -> str:
        """The main server's origin (``http://127.0.0.1:PORT``)."""
        assert self.site.base_url is not None
        return self.site.base_url

    def llms_url(self, spec: SiteSpec) -> str:
        """The URL of ``spec``'s llms.txt, as the catalogue names it."""
        if spec.kind == "dead-host":
            return f"http://127.0.0.1:{self.dead_port}{spec.llms_path}"
        return self.base + spec.llms_path

    # -- generated sites ---------------------------------------------------------------------------

    def add_generated(self, spec: SiteSpec) -> None:
        """Serve a generated site of ``spec.kind`` under its prefix."""
        rng = random.Random(spec.library)
        n = max(self.pages[0], min(self.pages[1], int(rng.lognormvariate(2.3, 0.8))))
        kind, p = spec.kind, spec.prefix
        if kind == "stalled-body":
            n = min(n, STALLED_PAGES)
        html = kind in ("negotiated", "html-only", "js-shell", "offhost-redirect")
        spec.pages = [f"{p}/docs/page-{i}" + ("" if html else ".md") for i in range(n)]
        titles = [f"{_words(rng, 2).title()} {i}" for i in range(n)]
        if kind == "huge-full":
            self._huge_full(spec, rng)
            self.specs.append(spec)
            return
        for path, title in zip(spec.pages, titles, strict=True):
            self._page(spec, path, title, rng)
        links = [(t, self.base + path) for t, path in zip(titles, spec.pages, strict=True)]
        listing = _listing(spec.library, links)
        llms_type = "text/html; charset=utf-8" if kind == "llms-html" else "text/plain; charset=utf-8"
        if kind == "llms-html":
            listing = f"<!doctype html><html><body><pre>{listing}</pre></body></html>"
        self._listings[spec.library] = listing
        at = self._moved(spec) if kind == "moved-llms" else spec.llms_path
        self.site.add(at, listing, content_type=llms_type)
        self._faults(spec)
        self.specs.append(spec)

    @staticmethod
    def _moved(spec: SiteSpec) -> str:
        """Where a "moved-llms" site's llms.txt now lives (its old path redirects there)."""
        return f"{spec.prefix}/docs/llms.txt"

    def _page(self, spec: SiteSpec, path: str, title: str, rng: random.Random) -> None:
        markdown = _page_markdown(rng, title, rng.randint(2, 6))
        if spec.kind == "js-shell":
            self.site.add(path, _JS_SHELL, content_type="text/html; charset=utf-8")
        elif spec.kind in ("negotiated", "html-only", "offhost-redirect"):
            self.site.add(path, _as_html(markdown, title), content_type="text/html; charset=utf-8")
            if spec.kind == "negotiated":
                self.site.add(path + ".md", markdown)
                self.site.negotiate(path, path + ".md")
            if spec.kind == "offhost-redirect":
                self.other.add(path, _as_html(markdown, title), content_type="text/html; charset=utf-8")
        else:
            if spec.kind == "robots-disallow":
                hidden = f"{spec.prefix}/hidden/{path.rsplit('/', 1)[1]}"
                spec.disallowed.append(hidden)
                self.site.add(hidden, _page_markdown(rng, "Hidden", 1))
                markdown += f"\nSee [more]({self.base}{hidden}).\n"
            self.site.add(path, markdown)

    def _huge_full(self, spec: SiteSpec, rng: random.Random) -> None:
        """An llms-full.txt (the docs inline) over the crawl's page cap."""
        spec.llms_path = f"{spec.prefix}/llms-full.txt"
        parts = [f"# {spec.library}\n\n> Everything in one file.\n"]
        size = len(parts[0])
        while size <= self.max_bytes + HUGE_MARGIN:
            page = _page_markdown(rng, _words(rng, 2).title(), 6)
            parts.append(page)
            size += len(page.encode())
        self.site.add(spec.llms_path, "".join(parts), content_type="text/plain; charset=utf-8")

    def _faults(self, spec: SiteSpec) -> None:
        kind, site, llms = spec.kind, self.site, spec.llms_path
        if kind == "pages-missing":
            for i, path in enumerate(spec.pages[1:3]):
                site.remove(path)
                if i == 1:
                    site.fault(path, "status", code=410)
        elif kind == "retry-after":
            site.fault(llms, "retry-after", after=1, times=1)
            site.fault(spec.pages[0], "retry-after", after=1, times=1)
        elif kind == "slow-body":
            for path in spec.pages[:2]:
                site.fault(path, "slow", chunk=SLOW_CHUNK, delay=SLOW_DELAY)
        elif kind == "stalled-body":
            for path in spec.pages:
                site.fault(path, "slow", chunk=STALL_CHUNK, delay=STALL_DELAY)
        elif kind == "robots-disallow":
            spec.follow = True
            # One origin serves every site, so one robots.txt: it matters only to a library that follows
            # links (robots.txt applies to followed pages, not to the pages an llms.txt lists).
            site.add("/robots.txt", "User-agent: *\nDisallow: /\n", content_type="text/plain")
        elif kind == "moved-llms":
            site.fault(llms, "redirect", status=301, to=self._moved(spec))
        elif kind in ("not-found", "gone", "rate-limited", "server-error", "timeout"):
            self._break(llms, kind)
        elif kind == "offhost-redirect":
            other = self.other.base_url
            for path in spec.pages:
                site.fault(path, "redirect", status=302, to=f"{other}{path}")

    def _break(self, path: str, how: str) -> None:
        if how == "not-found":
            self.site.remove(path)
        elif how == "gone":
            self.site.fault(path, "status", code=410)
        elif how == "rate-limited":
            self.site.fault(path, "retry-after", after=LONG_RETRY_AFTER, times=1_000_000)
        elif how == "server-error":
            self.site.fault(path, "status", code=503)
        elif how == "timeout":
            self.site.fault(path, "timeout", seconds=HANG_SECONDS)

    # -- night two ---------------------------------------------------------------------------------

    def night_two(self) -> None:
        """Change the web as it changes between two nights: edit, break and mend the sites so marked."""
        for spec in self.specs:
            if spec.change == "edit":
                rng = random.Random(spec.library + "/2")
                path = spec.pages[0]
                markdown = _page_markdown(rng, "Changed", 3)
                self.site.add(path, markdown)
            elif spec.change == "break":
                if spec.breaks_as == "js-shell":
                    # The site moved to a single-page app: its pages are empty shells now.
                    for path in spec.pages:
                        self.site.add(path, _JS_SHELL, content_type="text/html; charset=utf-8")
                else:
                    self._break(spec.llms_path, spec.breaks_as)
            elif spec.change == "mend":
                self.site.clear_fault(spec.llms_path)
                self.site.add(spec.llms_path, self._listings[spec.library], content_type="text/plain")

    # -- wild llms.txt files and the shared corpora --------------------------------------------------

    def add_wild(self, file: Path, library: str) -> SiteSpec:
        """Serve a real llms.txt under ``/w/<library>/``, its links rewritten to pages of the fake web."""
        prefix = f"/w/{library}"
        text = file.read_text(encoding="utf-8", errors="replace")
        here = f"{self.base}{prefix}"
        text = _ABSOLUTE.sub(lambda m: f"{here}/{m.group(1).lower()}", text)
        text = _ROOTED.sub(lambda m: f"]({here}/", text)
        name = "llms-full.txt" if "full" in file.name else "llms.txt"
        spec = SiteSpec(library, "wild", prefix, f"{prefix}/{name}", "", source=file.name)
        self.site.add(spec.llms_path, text, content_type="text/plain; charset=utf-8")
        llms = parse_llms_txt(text, self.base + spec.llms_path)
        spec.expected = "built"  # an llms-full.txt: the docs are inline
        if not (llms.kind == "full" and llms.inline_docs):
            rng = random.Random(library)
            links = list(dict.fromkeys(link.url.partition("#")[0] for link in llms.links))
            served = 0
            for n, link in enumerate(links):
                if not link.startswith(here + "/") or n % WILD_MISSING_EVERY == WILD_MISSING_EVERY - 1:
                    continue
                path = link[len(self.base) :]
                self.site.add(path, _page_markdown(rng, path.rsplit("/", 1)[-1] or "Index", 3))
                served += 1
            # What its build must report: a file that lists nothing fails as "lists no documents"; one
            # with a link left missing (or not on the web: a mailto:, a relative path out of the site)
            # is built with that page failed.
            if not links:
                spec.expected = "failed:no-content"
            elif served < len(links):
                spec.expected = "built:pages-failed"
        self.specs.append(spec)
        return spec

    def add_corpus(self, root: Path, library: str) -> SiteSpec:
        """Serve a shared corpus under ``/c/<library>/``: markdown files as they are, HTML pages as a docs
        host serves them (``serve_site.py``)."""
        prefix = f"/c/{library}"
        spec = SiteSpec(library, "corpus", prefix, f"{prefix}/llms.txt", "", source=root.name)
        if any(root.glob("*.html")) or any(root.glob("*/*.html")):
            add_html_site(self.site, root, prefix)
        else:
            self.site.serve_dir(root, prefix)
        self.specs.append(spec)
        return spec


_ABSOLUTE = re.compile(r"https?://([A-Za-z0-9.-]+\.[A-Za-z]{2,})(?::\d+)?(?=[/\s)\]>\"'`]|$)")
_ROOTED = re.compile(r"\]\(/(?!/)")


def add_html_site(site: Site, root: Path, prefix: str) -> None:
    """Serve the HTML pages under ``root`` at ``prefix`` the way a docs host does: ``x.html`` also as ``x``,
    ``dir/index.html`` also as ``dir/``, a ``.md`` sibling also as ``x.md`` and ``x.html.md`` and to a
    request that asks for ``text/markdown``; ``.txt`` files as text."""
    for file in sorted(root.rglob("*")):
        if not file.is_file():
            continue
        rel = file.relative_to(root).as_posix()
        url = f"{prefix}/{rel}"
        if file.suffix == ".html":
            body = file.read_bytes()
            stem = url.removesuffix(".html")
            aliases = [url, stem] + ([stem.removesuffix("index")] if file.name == "index.html" else [])
            twin = file.with_suffix(".md")
            for alias in aliases:
                site.add(alias, body, content_type="text/html; charset=utf-8")
            if twin.is_file():
                markdown = twin.read_bytes()
                for alias in (stem + ".md", url + ".md"):
                    site.add(alias, markdown)
                for alias in aliases:
                    site.negotiate(alias, stem + ".md")
        elif file.suffix == ".txt":
            site.add(url, file.read_bytes(), content_type="text/plain; charset=utf-8")


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused, as to a dead host."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_fakeweb(*, max_bytes: int, pages: tuple[int, int] = (3, 40)) -> Iterator[FakeWeb]:
    """The fake web's servers running on 127.0.0.1, empty: add sites with ``add_generated``, ``add_wild``
    and ``add_corpus`` (the crawl's ``max_bytes`` sizes the huge llms-full.txt)."""
    site, other = Site(), Site()
    with run_site(site), run_site(other):
        yield FakeWeb(site, other, _closed_port(), max_bytes=max_bytes, pages=pages)
