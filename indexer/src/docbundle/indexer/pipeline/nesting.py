"""Bound the element nesting of an HTML page before it is parsed (issue 19).

The HTML tree builder checks "is there a ``<p>`` (or a ``<div>``...) in scope?" by walking its stack of
open elements, so a page nested ``n`` levels deep takes time growing with ``n``²: 100,000 unclosed
``<pre>`` or nested ``<div>`` take lexbor seconds, and the converter then walks the same depth again.
Browsers bound the depth for the same reason (Blink's tree builder stops nesting at 512).

``bound_nesting`` makes one pass over the tag stream, with a stack of the elements it believes open, and
drops every start tag that would open an element deeper than ``MAX_DEPTH`` (and the end tag that closes
it): their content stays, flattened into the element at the bound. A page that stays within the bound is
returned unchanged (the same object), so real pages, whose depth is a few dozen, convert exactly as before.

The stack is an estimate of the parser's, meant never to be lower, so that what lexbor builds stays
within about the bound: it knows comments, raw-text elements (``<script>``, ``<style>``...), void
elements, quoted attribute values (one left open holds the rest of the page), and the usual implied ends
(``<p>``, ``<li>``, ``<dt>``/``<dd>``, table cells and rows, ``<option>``); an end tag closes only what
the parser would close (never across a table or cell, and a formatting element such as ``</b>`` only when
no block was opened inside it); formatting elements that an end tag closes stay counted, as the parser
reopens them. Where it still errs low on a shape it does not know, the per-page CPU budget of the worker
bounds the damage.

It must not err high on a page the parser keeps shallow either, or a harmless page would be changed. So
each open element carries its depth in the tree, which is not always its place on the stack: in a
table's own content (not in a cell or caption) an element other than a table part is foster-parented,
put before the table as its sibling, so it nests at the table's depth (and what opens inside it, below
that); a ``<table>`` there ends the open table, and a cell's part (``<td>``, ``<tr>``...) ends the cell;
table parts outside any table are ignored, as the parser ignores them. In SVG and MathML the HTML rules
do not apply: elements nest as written (``/>`` closes them, ``<script>`` holds tags), until an HTML start
tag such as ``<div>`` breaks out and closes them.
Each step costs O(1) (amortised: an element is popped at most once per push), so the pass is linear in
the page's length.

Most tags of a real page are leaves: ``<p>Call <a href="f.html"><code><span>len</span></code></a>.</p>``,
elements holding text and phrasing elements only (issue 22). The pass reads such a leaf (``_PLAIN``,
``_LEAF_BLOCKS``, at most ``_LEAF_LEVELS`` deep) as one token and skips it, as pushing and popping it
changes nothing; where that is not so (it would nest past the bound, break out of SVG, end a column
group, or close an open ``<p>``, ``<li>``, ``<dt>``/``<dd>`` or ``<a>``) it reads the leaf tag by tag, and
reads tag by tag while the stack is too deep for any leaf. The result is always that of the tag-by-tag
pass. This and the common steps written out made the pass 2.7 times as fast on Sphinx pages. It stays
linear: a leaf's pattern is atomic and reads at most ``_LEAF_LEVELS`` tags ahead; on the hostile
shapes of ``benchmarks/hostile.py`` it takes 0.7 to 1.4 times as long as the tag-by-tag pass.
"""

from __future__ import annotations

import functools
import re

__all__ = ["MAX_DEPTH", "bound_nesting", "compile_patterns"]

#: The deepest element nesting a page keeps (Blink's own limit); real documentation stays far below.
MAX_DEPTH = 512

# One token of markup: a whole tag (name, then attributes; a quoted value counts only after "=" and may
# hold ">"), the start of a comment or bogus comment, or a "<" + letter that does not close (the rest of
# the page is inside that tag). Possessive quantifiers: no backtracking, so each token costs its length.
_ATTRIBUTES = r"""[^>=]*+(?:=[\t\n\f\r ]*+(?:"[^"]*+"|'[^']*+'|(?!["']))[^>=]*+)*+"""
# (After the "<", written once: the regex engine then looks for "<" alone between tokens.)
_AFTER_LT = (
    rf"(/?)([A-Za-z][^\t\n\f\r />]*+)({_ATTRIBUTES})>"
    r"|(!--|[!?]|/(?![A-Za-z]))"
    r"|(?=/?[A-Za-z])"
)
_TOKEN = re.compile(f"<(?:{_AFTER_LT})")
_RAW_TEXT = frozenset({"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"})
_RAW_END = {name: re.compile(f"</{name}", re.IGNORECASE) for name in _RAW_TEXT}
_VOID = frozenset(
    [
        "area",
        "base",
        "basefont",
        "bgsound",
        "br",
        "col",
        "embed",
        "frame",
        "hr",
        "img",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
_FORMATTING = frozenset(
    ["a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"]
)
# Ordinary phrasing elements: an end tag of a formatting element closes these with it (the parser's
# adoption agency keeps the depth only when a block lies inside the formatting element).
_ORDINARY = frozenset(
    [
        "abbr",
        "bdi",
        "bdo",
        "cite",
        "data",
        "del",
        "dfn",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "rp",
        "rt",
        "ruby",
        "samp",
        "span",
        "sub",
        "sup",
        "time",
        "var",
    ]
)
# End tags do not reach below these (the parser's scope boundaries).
_BOUNDARY = frozenset(["applet", "caption", "html", "table", "td", "th", "marquee", "object", "template"])
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# A start tag of one of these closes an open <p>.
_CLOSES_P = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "header",
        "hgroup",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "section",
        "summary",
        "ul",
        *_HEADINGS,
        "pre",
        "listing",
        "form",
        "table",
        "hr",
    ]
)
# A start tag of the key closes the nearest open element of the value's names, unless a boundary or
# one of the stop names is nearer.
_IMPLIED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr"})),
    "tr": (frozenset({"tr", "td", "th"}), frozenset({"tbody", "thead", "tfoot"})),
    "tbody": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset()),
    "thead": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset()),
    "tfoot": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset()),
    "option": (frozenset({"option"}), frozenset({"select"})),
    "a": (frozenset({"a"}), frozenset()),
}
_P = frozenset({"p"})
_NOTHING: frozenset[str] = frozenset()
# Table parts: outside any table (and template) the parser ignores their start tags; in table mode they are
# the table's own (never foster-parented), as are the raw-text and template elements it inserts in place.
_TABLE_PARTS = frozenset(["caption", "col", "colgroup", "tbody", "td", "tfoot", "th", "thead", "tr"])
_IN_TABLE = _TABLE_PARTS | {"table", "script", "style", "template", "form", "input"}
# The current nodes under which a foster-parented element goes before the table instead.
_TABLE_NODES = frozenset(["table", "tbody", "tfoot", "thead", "tr"])
# Inside one of these (within the table) the parser reads in body mode again.
_CELL = ("td", "th", "caption", "template")
# Foreign content (SVG, MathML): its roots; the elements whose content is read as HTML again (integration
# points); and the HTML start tags that close the foreign elements open around them ("break out").
_FOREIGN_ROOTS = frozenset(["svg", "math"])
_INTEGRATION = frozenset(
    ["foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext", "annotation-xml"]
)
_BREAK_OUT = frozenset(
    [
        "b",
        "big",
        "blockquote",
        "body",
        "br",
        "center",
        "code",
        "dd",
        "div",
        "dl",
        "dt",
        "em",
        "embed",
        *_HEADINGS,
        "head",
        "hr",
        "i",
        "img",
        "li",
        "listing",
        "menu",
        "meta",
        "nobr",
        "ol",
        "p",
        "pre",
        "ruby",
        "s",
        "small",
        "span",
        "strong",
        "strike",
        "sub",
        "sup",
        "table",
        "tt",
        "u",
        "ul",
        "var",
    ]
)
# How far down the stack an implied end looks: far enough for real markup (<li><p><b>...<li>).
_IMPLIED_REACH = 8

# Phrasing elements whose start tag does nothing but open them, wherever they stand (outside SVG and
# MathML, where most of them break out); and the blocks that may hold them, whose start tag does nothing
# more unless a ``<p>`` (for ``<li>``, ``<dt>``, ``<dd>``: one of these) is open (``_LEAF_CLOSES``). A
# leaf is a block, a link or a plain element holding text, plain elements and links (no link in a link),
# at most ``_LEAF_LEVELS`` deep, with no "/>" and each end tag right after its content, in lower case.
_PLAIN = frozenset(
    [
        *_ORDINARY,
        *(name for name in _FORMATTING if name != "a"),
        "acronym",
        "button",
        "path",
    ]
)
_LEAF_BLOCKS = frozenset(
    [
        *(name for name in _CLOSES_P if name not in ("form", "hr", "table", "listing")),
        "li",
        "dt",
        "dd",
    ]
)
_LEAF_LEVELS = 4


def _alternation(names: list[str]) -> str:
    """``names`` as a regex alternation grouped by first letter: the engine tries a branch only when
    the next character is its letter, so a tag of another name fails in a few steps."""
    by_letter: dict[str, list[str]] = {}
    for name in sorted(names):
        by_letter.setdefault(name[0], []).append(name[1:])
    return "|".join(f"{letter}(?:{'|'.join(rests)})" for letter, rests in by_letter.items())


def _leaf_pattern() -> tuple[str, str]:
    """A leaf (see ``_PLAIN``) as a regex without its first "<", and the group naming its outermost
    element unless that is an ``<a>`` (then group 1 does).

    Each tag is read as ``_TOKEN`` reads it, and no "<" stands between them but their own: a leaf is
    exactly the tokens ``_TOKEN`` would find there. An ``<a>`` holds plain elements only (one inside
    would close it); elsewhere a link may stand among them.
    """
    plain = sorted(_PLAIN)
    groups = iter(range(1, 1000))

    def element(names: list[str], level: int, links: bool, lt: str = "<") -> str:
        group = f"e{next(groups)}"
        tag = rf"{lt}(?P<{group}>{_alternation(names)})(?=[\t\n\f\r />]){_ATTRIBUTES}(?<!/)>"
        if level == _LEAF_LEVELS:
            return rf"{tag}[^<]*+</(?P={group})>"
        return rf"{tag}(?>(?:[^<]*+(?:{children(level + 1, links)}))*)[^<]*+</(?P={group})>"

    def children(level: int, links: bool) -> str:
        if not links:
            return element(plain, level, False)
        return f"{element(['a'], level, False)}|{element(plain, level, True)}"

    outer = sorted(_PLAIN | _LEAF_BLOCKS)
    link = element(["a"], 1, False, lt="")
    other = element(outer, 1, True, lt="")
    return f"(?=[a-z])(?:{link}|{other})", other[len("(?P<") : other.index(">")]


# A leaf as one token (group 1 or the group ``outer`` names its outermost element), else one token as ``_TOKEN``
# reads it (the last four groups).
@functools.cache
def _leaf_or_token() -> tuple[re.Pattern[str], int, int]:
    """The pattern, where ``_TOKEN``'s four groups start in a match's groups, and ``_OUTER``'s index.

    Compiled on first use (18 ms): the indexer's own process rarely bounds a page (only one whose head
    holds a meta refresh), the page workers do it for every HTML page."""
    leaf, outer_group = _leaf_pattern()
    pattern = re.compile(f"<(?:{leaf}|{_AFTER_LT})")
    return pattern, pattern.groups - 4, pattern.groupindex[outer_group] - 1


# An element the leaf's outermost one closes when it opens: name -> (what it closes, what stops the search).
_LEAF_CLOSES = {name: (_P, _NOTHING) for name in _CLOSES_P} | {
    name: _IMPLIED[name] for name in ("li", "dt", "dd")
}
_START_NAME = re.compile(r"<([A-Za-z][^\t\n\f\r />]*+)")


class _Stack:
    """The elements believed open, with their depth in the tree and O(1) look-ups of the nearest one of a name.

    An element's depth is its parent's plus one, except for one foster-parented out of a table (see
    ``foster_depth``): the stack of open elements and the tree's nesting differ there.
    """

    def __init__(self) -> None:
        self.names: list[str] = []
        self.depths: list[int] = []  # the tree depth of each element in ``names``
        self.foreign: list[bool] = []  # whether each element in ``names`` is an SVG or MathML one
        self.where: dict[str, list[int]] = {}  # name -> its positions in ``names``, innermost last
        self.boundaries: list[int] = []  # positions of scope boundaries, innermost last

    def push(self, name: str, depth: int | None = None) -> None:
        self.where.setdefault(name, []).append(len(self.names))
        if name in _BOUNDARY:
            self.boundaries.append(len(self.names))
        self.depths.append(self.child_depth() if depth is None else depth)
        self.foreign.append(name in _FOREIGN_ROOTS or self.in_foreign())
        self.names.append(name)

    def child_depth(self) -> int:
        """The depth of an element opened inside the current node."""
        return self.depths[-1] + 1 if self.depths else 1

    def pop(self) -> str:
        name = self.names.pop()
        self.depths.pop()
        self.foreign.pop()
        self.where[name].pop()
        if self.boundaries and self.boundaries[-1] == len(self.names):
            self.boundaries.pop()
        return name

    def in_foreign(self) -> bool:
        """Whether a start tag now is read as foreign content (inside SVG or MathML, not an integration point)."""
        return bool(self.foreign) and self.foreign[-1] and self.names[-1] not in _INTEGRATION

    def break_out(self) -> None:
        """Close the foreign elements on top, as an HTML start tag such as ``<div>`` in foreign content does."""
        while self.foreign and self.foreign[-1] and self.names[-1] not in _INTEGRATION:
            self.pop()

    def innermost(self, name: str) -> int:
        """Position of the innermost open ``name``, whatever lies between, or -1."""
        found = self.where.get(name)
        return found[-1] if found else -1

    def table_mode(self) -> int:
        """Position of the table whose own content is being read (not a cell's or caption's), or -1.

        The parser reads such content in its table modes, whatever was opened since inside it.
        """
        table = self.innermost("table")
        if table < 0:
            return -1
        for name in _CELL:
            if self.innermost(name) > table:
                return -1
        return table

    def open_cell(self) -> int:
        """Position of the cell or caption whose content is being read (in the innermost table), or -1."""
        cell = max(self.innermost(name) for name in _CELL[:3])
        if cell < 0 or cell < self.innermost("table") or cell < self.innermost("template"):
            return -1
        return cell

    def foster_depth(self, table: int) -> int | None:
        """The depth of a start tag that is foster-parented out of the table at ``table``, or ``None``.

        In table mode, an element other than the table's own parts is inserted where the current node
        would take it; when that node is the table (or one of its sections or rows), that is before the
        table, in the table's parent: a sibling of the table, at the table's own depth.
        """
        if table >= 0 and self.names[-1] in _TABLE_NODES:
            return self.depths[table]
        return None

    def nearest(self, name: str) -> int:
        """Position of the innermost open ``name`` within the current scope, or -1."""
        found = self.where.get(name)
        if not found:
            return -1
        at = found[-1]
        if self.boundaries and self.boundaries[-1] > at and name not in _BOUNDARY:
            return -1
        return at

    def close_to(self, at: int, keep_formatting: bool) -> None:
        """Pop down to and including position ``at``; formatting elements popped on the way are reopened."""
        reopened: list[str] = []
        while len(self.names) > at + 1:
            name = self.pop()
            if keep_formatting and name in _FORMATTING:
                reopened.append(name)
        self.pop()
        for name in reversed(reopened):
            self.push(name)

    def implied_end(self, names: frozenset[str], stops: frozenset[str]) -> None:
        """Close the nearest of ``names`` among the top few entries, unless a stop or boundary is nearer."""
        low = max(0, len(self.names) - _IMPLIED_REACH)
        for at in range(len(self.names) - 1, low - 1, -1):
            name = self.names[at]
            if name in names:
                self.close_to(at, keep_formatting=True)
                return
            if name in stops or name in _BOUNDARY:
                return

    def end_tag(self, name: str) -> None:
        """An end tag that does not close the innermost element: close what the parser would close."""
        at = self.nearest(name)
        if at < 0:
            return
        if name in _FORMATTING and any(
            other not in _FORMATTING and other not in _ORDINARY for other in self.names[at + 1 : at + 9]
        ):
            return  # a block inside: the adoption agency moves the element, the depth stays
        self.close_to(at, keep_formatting=name not in _FORMATTING)

    def start_tag(self, name: str) -> bool | None:
        """What a start tag does before its element opens: ``None`` when it opens none (ignored, void, or
        a ``<select>`` in a select), else whether it opens in foreign content."""
        names = self.names
        where = self.where
        foreign = self.in_foreign()
        if foreign and name in _BREAK_OUT:
            self.break_out()
            foreign = self.in_foreign()
        if foreign:
            return True  # foreign content: its elements nest as written (the HTML rules below do not apply)
        if name in _TABLE_PARTS:
            if names and names[-1] == "colgroup" and name != "col":
                self.pop()  # a column group holds only <col>: anything else ends it
            if not where.get("table") and not where.get("template"):
                return None  # outside a table the parser ignores it
            cell = self.open_cell()
            if cell >= 0:
                self.close_to(cell, keep_formatting=False)  # it ends the cell (or caption) it is in
        elif name == "table" and where.get("table"):
            table = self.table_mode()
            if table >= 0:
                self.close_to(table, keep_formatting=False)  # in table mode, a <table> ends the open one
        elif name == "select" and self.nearest("select") >= 0:
            self.close_to(self.nearest("select"), keep_formatting=False)
            return None  # a <select> inside a select only ends it
        elif names and names[-1] == "colgroup" and name != "template":
            self.pop()  # a column group holds only <col>: anything else ends it
        if name in _CLOSES_P and where.get("p"):
            self.implied_end(_P, _NOTHING)
        implied = _IMPLIED.get(name)
        if implied is not None:
            self.implied_end(*implied)
        if name in _VOID:
            return None
        return False

    def depth_of(self, name: str, foreign: bool) -> int:
        """The tree depth of ``name`` opened now (``foreign``: in foreign content)."""
        depth = None
        if not foreign and name not in _IN_TABLE and self.where.get("table"):
            depth = self.foster_depth(self.table_mode())
        return self.child_depth() if depth is None else depth


def compile_patterns() -> None:
    """Compile now what ``bound_nesting`` compiles on first use (the page workers' forkserver does, once
    for all its workers)."""
    _leaf_or_token()


def after_markup(html: str, other: str, end: int) -> int:
    """Where the tag stream goes on after a comment (``other`` is ``!--``) or a bogus comment (``<!doctype>``,
    ``<?xml?>``, ``</ 1>``: up to the next ">") whose opening ends at ``end``."""
    if other == "!--":
        found = html.find("-->", end)
        return len(html) if found == -1 else found + 3
    found = html.find(">", end)
    return len(html) if found == -1 else found + 1


def raw_text_end(html: str, name: str, end: int) -> int:
    """Where the raw text of ``name`` (``<script>``, ``<style>``...) opened at ``end`` ends: its end tag."""
    found = _RAW_END[name].search(html, end)
    return len(html) if found is None else found.start()


def kept(html: str, keep: list[str], kept_to: int) -> str:
    """The page with the dropped tags left out: ``keep``, then ``html[kept_to:]`` (``html`` if none was)."""
    if not keep:
        return html
    keep.append(html[kept_to:])
    return "".join(keep)


# Start tags that do more than open their element (outside foreign content and column groups).
_RULED = _TABLE_PARTS | _CLOSES_P | _VOID | {"table", "select", *_IMPLIED}


def bound_nesting(html: str, max_depth: int = MAX_DEPTH) -> str:
    """``html`` with the start tags that would nest deeper than ``max_depth`` dropped (see the module).

    The common steps (a plain start tag pushed, an end tag closing the innermost element, a leaf
    skipped) are written out here rather than called on ``_Stack``: they run for every tag of every page.
    """
    if html.count("<") <= max_depth:
        return html  # too few tags to nest that deep
    stack = _Stack()
    names = stack.names
    depths = stack.depths
    foreign_of = stack.foreign
    where = stack.where
    boundaries = stack.boundaries
    dropped: dict[str, int] = {}
    keep: list[str] = []
    kept_to = 0  # html[:kept_to] is decided
    pos = 0
    n = len(html)
    # Tag by tag (``_TOKEN``) up to ``slow_until`` (a leaf that is no no-op ends there) and while the
    # stack is too deep for any leaf; else leaves whole (``_leaf_or_token``).
    slow = False
    slow_until = 0
    leaf_depth = max_depth - _LEAF_LEVELS  # the deepest current node under which any leaf fits
    leaf_or_token, leaf_groups, outer = _leaf_or_token()
    while pos < n:
        jump = n  # where the scan goes on when a token below leaves the tag stream
        for match in (_TOKEN if slow else leaf_or_token).finditer(html, pos):
            if slow:
                if match.start() >= slow_until and (depths[-1] if depths else 0) <= leaf_depth:
                    slow = False  # past that leaf, and leaves fit again: they are read whole again
                    jump = match.start()
                    break
                slash, raw_name, attributes, other = match.groups()
            else:
                groups = match.groups()
                leaf = groups[0] or groups[outer]
                if leaf is not None:
                    rule = _LEAF_CLOSES.get(leaf.lower())
                    if (
                        not dropped
                        and not (where.get("a") and "<a" in match.group(0))  # an <a> closes the open one
                        and (depths[-1] if depths else 0) <= leaf_depth
                        and not (names and names[-1] == "colgroup")
                        and (
                            rule is None
                            or (names and names[-1] in rule[1])
                            or not any(where.get(closed) for closed in rule[0])
                        )
                        and not (
                            foreign_of
                            and foreign_of[-1]
                            and names[-1] not in _INTEGRATION
                            and any(
                                name.lower() in _BREAK_OUT for name in _START_NAME.findall(match.group(0))
                            )
                        )
                    ):
                        continue  # pushed, then popped by its end tags: nothing changes
                    slow = True
                    slow_until = match.end()
                    jump = match.start()
                    break
                slash, raw_name, attributes, other = groups[leaf_groups:]
            if raw_name is None:
                if other is not None:
                    jump = after_markup(html, other, match.end())
                break  # else an unclosed tag: the rest of the page is inside it
            name = raw_name.lower()
            if slash:  # an end tag
                if dropped and dropped.get(name):
                    dropped[name] -= 1
                    keep.append(html[kept_to : match.start()])
                    kept_to = match.end()
                elif names and names[-1] == name:
                    # The common case: it closes the innermost element (``_Stack.pop``, written out).
                    names.pop()
                    depths.pop()
                    foreign_of.pop()
                    where[name].pop()
                    if boundaries and boundaries[-1] == len(names):
                        boundaries.pop()
                else:
                    stack.end_tag(name)
                continue
            if (foreign_of and foreign_of[-1]) or name in _RULED or (names and names[-1] == "colgroup"):
                opened = stack.start_tag(name)
                if opened is None:
                    continue
                foreign = opened
            else:
                foreign = False  # a plain start tag in HTML content: it only opens its element
            # "/>" closes an element only in SVG and MathML (foreign content); in HTML it is ignored.
            if (foreign or name in _FOREIGN_ROOTS) and attributes.endswith("/"):
                continue
            depth = stack.depth_of(name, foreign) if where.get("table") else depths[-1] + 1 if depths else 1
            if depth > max_depth:
                dropped[name] = dropped.get(name, 0) + 1
                keep.append(html[kept_to : match.start()])
                kept_to = match.end()
                continue
            # ``_Stack.push``, written out; the element is foreign when opened in foreign content.
            top = len(names)
            positions = where.get(name)
            if positions is None:
                where[name] = [top]
            else:
                positions.append(top)
            if name in _BOUNDARY:
                boundaries.append(top)
            depths.append(depth)
            foreign_of.append(
                foreign
                or name in _FOREIGN_ROOTS
                or (bool(foreign_of) and foreign_of[-1] and names[-1] not in _INTEGRATION)
            )
            names.append(name)
            if foreign:
                continue  # an SVG <script> or <title> is no raw text: its tags are read
            if name == "plaintext":
                break  # the rest of the page is text
            if name in _RAW_TEXT:
                jump = raw_text_end(html, name, match.end())
                break
            if depth > leaf_depth and not slow:
                slow = True  # too deep for any leaf here: reading tag by tag is cheaper
                jump = match.end()
                break
        pos = jump
    return kept(html, keep, kept_to)
