"""HTML -> markdown candidates measured on real documentation sites: speed and quality.

Usage::

    python benchmarks/html_candidates.py --corpora ../shared/corpora [--sets html-python ...]
                                         [--only selectolax+html-to-markdown ...] [--limit N]

Reads the HTML files of each corpus from disk (no server) and runs every candidate converter over
them on one core (the process pins itself to CPU 0). For each candidate and corpus it prints:

* pages/s -- parse + main-content selection + conversion, summed over the pages;
* coverage -- share of the reference text's words (a multiset) present in the output. The
  reference is the page's ``.md`` twin where the corpus has one (``page.md`` beside ``page.html``,
  the Rust book's real source) and otherwise the text of the generator's main element (Sphinx
  ``div[role=main]``/``div.body``, mdBook ``main``, the DocBook ``div.chapter|sect1|refentry|...``);
* code -- share of ``<pre>`` blocks of the main element whose whitespace-normalised text appears
  inside one fenced block of the output (hidden mdBook "boring" lines, line numbers and copy
  buttons are not part of a block's text);
* title -- share of pages whose output's first heading equals the page's top heading (the main
  element's first ``<h1>``, else its first ``<h2>``);
* boiler lines / boiler shingles -- share of the output's lines (outside code blocks) and of its
  8-word shingles that recur on more than 10% of the corpus's pages (and more than one) and are not part of the page's
  own reference text.

The candidates are not dependencies of the project; a missing one is reported and skipped.
Install them into the environment that runs this script to measure them all::

    python -m pip install lxml lxml_html_clean html2text markdownify trafilatura resiliparse \
        selectolax html-to-markdown

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETS = ("html-python", "html-rustbook", "html-postgres")

# The generator's main element, most specific first (Sphinx, mdBook/generic, DocBook).
MAIN_CSS = ("div[role=main]", "div.body", "main", "article", "[role=main]")
DOCBOOK_CLASSES = (
    "book",
    "part",
    "chapter",
    "appendix",
    "preface",
    "reference",
    "refentry",
    "sect1",
    "sect2",
    "section",
    "article",
    "index",
    "glossary",
    "bibliography",
)
MAIN_XPATH = (
    "//div[@role='main']",
    "//div[contains(concat(' ', normalize-space(@class), ' '), ' body ')]",
    "//main",
    "//article",
    "//*[@role='main']",
)
# Removed before conversion and from the reference: anchor glyphs, copy buttons, line numbers,
# hidden mdBook lines, scripts and styles.
DROP_CSS = "a.headerlink, button, script, style, noscript, span.boring, .linenos, .lineno"
DROP_XPATH = (
    "//a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')]"
    " | //button | //script | //style | //noscript"
    " | //span[contains(concat(' ', normalize-space(@class), ' '), ' boring ')]"
    " | //*[contains(concat(' ', normalize-space(@class), ' '), ' linenos ')]"
    " | //*[contains(concat(' ', normalize-space(@class), ' '), ' lineno ')]"
)

WORD = re.compile(r"\w+")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
HIDDEN_LINE = re.compile(r"^\s*#(\s|$)")
LINK_TARGET = r"\]\(\s*<?[^)\s>]*>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"  # ](url "title")
MD_LINK_TARGET = re.compile(LINK_TARGET + r"|^\s*\[[^\]]+\]:\s*\S+.*$", re.M)
QUOTE_ONE = re.compile(r"^\s{0,3}>\s?")


# --------------------------------------------------------------------------------------------------
# pages and references


@dataclass
class Page:
    """One HTML page of a corpus with its reference figures."""

    rel: str
    html: bytes
    ref_words: Counter[str]
    ref_joined: str
    ref_shingles: set[tuple[str, ...]]
    pre_blocks: list[str]
    title: str


def norm_ws(text: str) -> str:
    """Whitespace-normalised text (zero-width spaces dropped)."""
    return " ".join(text.replace("\u200b", "").replace("\ufeff", "").split())


def words(text: str) -> list[str]:
    """Case-folded word tokens."""
    return WORD.findall(text.casefold())


def shingles(tokens: list[str], n: int = 8) -> list[tuple[str, ...]]:
    """The ``n``-word shingles of a token list."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def norm_title(text: str) -> str:
    """A heading compared loosely: markdown links, emphasis, code marks and glyphs removed."""
    text = re.sub(LINK_TARGET, "", text)
    text = re.sub(r"[\[\]`*¶#]", "", text)
    return norm_ws(text).casefold()


def drop_hidden_lines(markdown: str) -> str:
    """An mdBook source without the lines its HTML hides: ``# `` lines inside Rust code blocks."""
    out: list[str] = []
    fence: str | None = None
    rust = False
    for line in markdown.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            info = line.strip().lstrip(fence[0]).strip().split(",")[0]
            rust = info in ("", "rust")
        elif fence is not None and m and line.strip().strip(fence[0]) == "":
            fence = None
        elif fence is not None and rust and HIDDEN_LINE.match(line):
            continue
        out.append(line)
    return "\n".join(out)


def _lexbor(html: bytes) -> Any:
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser(html)


def lexbor_main(tree: Any) -> Any:
    """The generator's main element in a selectolax tree (the body when none is recognised)."""
    for css in MAIN_CSS:
        node = tree.css_first(css)
        if node is not None:
            return node
    body = tree.body
    if body is not None:
        for child in body.iter():
            classes = (child.attributes.get("class") or "").split()
            if child.tag == "div" and any(c in DOCBOOK_CLASSES for c in classes):
                return child
    return body if body is not None else tree.root


def load_corpus(folder: Path, limit: int | None) -> list[Page]:
    """Every ``.html`` page of a corpus, with its reference text, ``<pre>`` blocks and title."""
    pages: list[Page] = []
    for path in sorted(folder.rglob("*.html")):
        html = path.read_bytes()
        tree = _lexbor(html)
        main = lexbor_main(tree)
        for node in main.css(DROP_CSS):
            node.decompose()
        twin = path.with_suffix(".md")
        if twin.is_file():
            ref_text = MD_LINK_TARGET.sub("]", drop_hidden_lines(twin.read_text(encoding="utf-8")))
        else:
            ref_text = main.text(separator=" ")
        tokens = words(ref_text)
        pre = [norm_ws(p.text()) for p in main.css("pre")]
        heading = main.css_first("h1") or main.css_first("h2")
        title = norm_title(heading.text()) if heading is not None else ""
        pages.append(
            Page(
                rel=path.relative_to(folder).as_posix(),
                html=html,
                ref_words=Counter(tokens),
                ref_joined=" " + " ".join(tokens) + " ",
                ref_shingles=set(shingles(tokens)),
                pre_blocks=[p for p in pre if p],
                title=title,
            )
        )
        if limit is not None and len(pages) >= limit:
            break
    return pages


# --------------------------------------------------------------------------------------------------
# candidates: each returns (title or None, markdown); None = take the output's first heading


Convert = Callable[[bytes], tuple[str | None, str]]


def _lxml_main(html: bytes) -> str:
    import lxml.html  # type: ignore[import-untyped]

    root = lxml.html.fromstring(html)
    for el in root.xpath(DROP_XPATH):
        el.drop_tree()
    main = None
    for xp in MAIN_XPATH:
        found = root.xpath(xp)
        if found:
            main = found[0]
            break
    if main is None:
        body = root.find("body")
        body = body if body is not None else root
        for div in body.iter("div"):
            if any(c in DOCBOOK_CLASSES for c in (div.get("class") or "").split()):
                main = div
                break
        else:
            main = body
    return str(lxml.html.tostring(main, encoding="unicode"))


def make_lxml_html2text() -> Convert:
    import html2text

    def convert(html: bytes) -> tuple[str | None, str]:
        h = html2text.HTML2Text()
        h.body_width = 0
        h.backquote_code_style = True
        h.unicode_snob = True
        return None, str(h.handle(_lxml_main(html)))

    return convert


def make_markdownify() -> Convert:
    import markdownify

    def convert(html: bytes) -> tuple[str | None, str]:
        return None, str(markdownify.markdownify(_lxml_main(html), heading_style="ATX"))

    return convert


def make_trafilatura() -> Convert:
    import trafilatura

    # The same extraction twice: once for the title (metadata), once for the markdown.
    keep = {"include_formatting": True, "include_tables": True, "include_links": True}

    def convert(html: bytes) -> tuple[str | None, str]:
        doc = trafilatura.bare_extraction(html, output_format="python", with_metadata=True, **keep)
        if doc is None:
            return "", ""
        text = trafilatura.extract(html, output_format="markdown", **keep)
        title = getattr(doc, "title", None) or ""
        return norm_title(title), text or ""

    return convert


def make_selectolax_h2m() -> Convert:
    import html_to_markdown

    options = html_to_markdown.ConversionOptions(code_block_style="backticks", heading_style="atx")

    def convert(html: bytes) -> tuple[str | None, str]:
        tree = _lexbor(html)
        main = lexbor_main(tree)
        for node in main.css(DROP_CSS):
            node.decompose()
        return None, html_to_markdown.convert(main.html or "", options).content or ""

    return convert


def make_resiliparse() -> Convert:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    def convert(html: bytes) -> tuple[str | None, str]:
        tree = HTMLTree.parse_from_bytes(html)
        text = extract_plain_text(tree, main_content=True, preserve_formatting=True)
        first = next((line for line in text.splitlines() if line.strip()), "")
        return norm_title(first), text

    return convert


def make_resiliparse_h2m() -> Convert:
    import html_to_markdown
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    options = html_to_markdown.ConversionOptions(code_block_style="backticks", heading_style="atx")

    def convert(html: bytes) -> tuple[str | None, str]:
        tree = HTMLTree.parse_from_bytes(html)
        minimal = extract_plain_text(tree, main_content=True, preserve_formatting="minimal_html")
        return None, html_to_markdown.convert(minimal, options).content or ""

    return convert


def make_docbundle() -> Convert:
    """The project's own converter (``docbundle.indexer.pipeline.html``), for comparison."""
    from docbundle.indexer.pipeline.html import convert_html, decode_html

    def convert(html: bytes) -> tuple[str | None, str]:
        done = convert_html(decode_html(html, None), "https://docs.example.org/page.html")
        return norm_title(done.title), done.markdown

    return convert


@dataclass(frozen=True)
class Candidate:
    name: str
    distributions: tuple[str, ...]
    make: Callable[[], Convert]


CANDIDATES = (
    Candidate("docbundle convert_html", ("docbundle-indexer",), make_docbundle),
    Candidate("lxml+html2text", ("lxml", "html2text"), make_lxml_html2text),
    Candidate("lxml+markdownify", ("lxml", "markdownify"), make_markdownify),
    Candidate("trafilatura", ("trafilatura", "lxml_html_clean"), make_trafilatura),
    Candidate("selectolax+html-to-markdown", ("selectolax", "html-to-markdown"), make_selectolax_h2m),
    Candidate("resiliparse (plain text)", ("resiliparse",), make_resiliparse),
    Candidate("resiliparse+html-to-markdown", ("resiliparse", "html-to-markdown"), make_resiliparse_h2m),
)


# --------------------------------------------------------------------------------------------------
# scoring


def _unquote(line: str, depth: int | None) -> tuple[str, int]:
    """``line`` without its block-quote markers (at most ``depth`` of them), and how many it had."""
    n = 0
    while depth is None or n < depth:
        m = QUOTE_ONE.match(line)
        if not m:
            break
        line, n = line[m.end() :], n + 1
    return line, n


def split_output(markdown: str) -> tuple[list[str], list[str]]:
    """The output's prose lines (outside fences) and its fenced blocks' texts.

    A fenced block inside a block quote is still one: the quote markers of the fence's own depth are
    removed from its lines (and no more, so ``>>>`` prompts inside code stay).
    """
    prose: list[str] = []
    blocks: list[str] = []
    fence: str | None = None
    depth = 0
    current: list[str] = []
    for raw in markdown.splitlines():
        line, n = _unquote(raw, None if fence is None else depth)
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence, depth, current = m.group(1)[0] * 3, n, []
            else:
                prose.append(line)
        elif m and line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
            blocks.append("\n".join(current))
            fence = None
        else:
            current.append(line)
    if fence is not None:
        blocks.append("\n".join(current))
    return prose, blocks


def first_heading(markdown: str) -> str:
    prose, _ = split_output(markdown)
    for line in prose:
        m = HEADING.match(line)
        if m:
            return norm_title(m.group(1))
    return ""


@dataclass
class Result:
    candidate: str
    corpus: str
    pages: int = 0
    seconds: float = 0.0
    coverage: float = 0.0
    code: float | None = None
    title: float = 0.0
    boiler_lines: float = 0.0
    boiler_shingles: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


def measure(candidate: Candidate, convert: Convert, corpus: str, pages: list[Page]) -> Result:
    res = Result(candidate.name, corpus)
    outputs: list[tuple[Page, str | None, str]] = []
    convert(pages[0].html)  # warm-up (imports, lazy init)
    for page in pages:
        t0 = time.perf_counter()
        try:
            title, md = convert(page.html)
        except Exception as exc:  # a candidate failing on a page is a finding, not a crash
            res.errors.append(f"{page.rel}: {type(exc).__name__}: {exc}")
            title, md = "", ""
        res.seconds += time.perf_counter() - t0
        outputs.append((page, title, md))
    res.pages = len(outputs)
    score_outputs(res, outputs)
    return res


def score_outputs(res: Result, outputs: list[tuple[Page, str | None, str]]) -> None:
    covered = total = 0
    pre_ok = pre_all = 0
    titles_ok = 0
    per_page: list[tuple[Page, list[str], list[tuple[str, ...]]]] = []
    line_df: Counter[str] = Counter()
    shingle_df: Counter[tuple[str, ...]] = Counter()
    for page, title, md in outputs:
        prose, blocks = split_output(md)
        out_words = Counter(words(MD_LINK_TARGET.sub("]", md)))
        covered += sum(min(n, out_words[w]) for w, n in page.ref_words.items())
        total += sum(page.ref_words.values())
        # A page served as its mdBook source keeps the hidden "# " lines the HTML hides: either is intact.
        norm_blocks = [norm_ws(b) for b in blocks]
        norm_blocks += [norm_ws(b) for b in split_output(drop_hidden_lines(md))[1]]
        for pre in page.pre_blocks:
            pre_all += 1
            pre_ok += any(pre in b for b in norm_blocks)
        got = title if title is not None else first_heading(md)
        titles_ok += bool(page.title) and got == page.title
        lines = [" ".join(words(MD_LINK_TARGET.sub("]", ln))) for ln in prose]
        lines = [ln for ln in lines if ln]
        sh = shingles(words(MD_LINK_TARGET.sub("]", "\n".join(prose))))
        per_page.append((page, lines, sh))
        line_df.update(set(lines))
        shingle_df.update(set(sh))
    n = len(outputs)
    cut = max(0.10 * n, 1.0)  # more than 10% of the pages, and more than one
    b_lines = all_lines = b_sh = all_sh = 0
    for page, lines, sh in per_page:
        all_lines += len(lines)
        b_lines += sum(1 for ln in lines if line_df[ln] > cut and f" {ln} " not in page.ref_joined)
        all_sh += len(sh)
        b_sh += sum(1 for s in sh if shingle_df[s] > cut and s not in page.ref_shingles)
    res.coverage = covered / total if total else 0.0
    res.code = pre_ok / pre_all if pre_all else None
    res.title = titles_ok / n if n else 0.0
    res.boiler_lines = b_lines / all_lines if all_lines else 0.0
    res.boiler_shingles = b_sh / all_sh if all_sh else 0.0


# --------------------------------------------------------------------------------------------------
# main


def pin_one_core() -> str:
    try:
        os.sched_setaffinity(0, {0})
        return "pinned to CPU 0"
    except (AttributeError, OSError) as exc:
        return f"not pinned ({exc})"


def versions(dists: tuple[str, ...]) -> str:
    out = []
    for d in dists:
        try:
            out.append(f"{d} {importlib.metadata.version(d)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{d} ?")
    return ", ".join(out)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--corpora", type=Path, required=True, help="folder holding html-* corpora")
    ap.add_argument("--sets", nargs="*", default=list(SETS), help="corpora to measure")
    ap.add_argument("--only", nargs="*", default=None, help="candidate names to run")
    ap.add_argument("--limit", type=int, default=None, help="at most N pages per corpus")
    args = ap.parse_args(argv)

    print(f"html_candidates: {pin_one_core()}; Python {sys.version.split()[0]}")
    corpora: dict[str, list[Page]] = {}
    for name in args.sets:
        folder = args.corpora / name
        if not folder.is_dir():
            print(f"  corpus {name}: not found at {folder}, skipped")
            continue
        corpora[name] = load_corpus(folder, args.limit)
        print(f"  corpus {name}: {len(corpora[name])} pages")

    results: list[Result] = []
    for cand in CANDIDATES:
        if args.only and cand.name not in args.only:
            continue
        try:
            convert = cand.make()
        except ImportError as exc:
            print(
                f"\n{cand.name}: SKIPPED, not installed ({exc}); "
                f"install with: python -m pip install {' '.join(cand.distributions)}"
            )
            continue
        print(f"\n{cand.name} ({versions(cand.distributions)})")
        for name, pages in corpora.items():
            if not pages:
                continue
            r = measure(cand, convert, name, pages)
            results.append(r)
            print(
                f"  {name:14} {r.pages_per_s:7.1f} pages/s  coverage {pct(r.coverage)}  "
                f"code {pct(r.code)}  title {pct(r.title)}  boiler lines {pct(r.boiler_lines)}  "
                f"shingles {pct(r.boiler_shingles)}"
                + (f"  errors {len(r.errors)} (first: {r.errors[0][:120]})" if r.errors else "")
            )

    if results:
        print(
            "\n| candidate | corpus | pages/s | coverage | code intact | title | boiler lines | boiler shingles |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in results:
            print(
                f"| {r.candidate} | {r.corpus} | {r.pages_per_s:.0f} | {pct(r.coverage)} | "
                f"{pct(r.code)} | {pct(r.title)} | {pct(r.boiler_lines)} | {pct(r.boiler_shingles)} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
