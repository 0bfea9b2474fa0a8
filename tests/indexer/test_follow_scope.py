"""What a followed page may reach (``pipeline/follow.py``): the prefix on every reading of a path, robots.txt
as RFC 9309 reads it, and robots.txt asked only about the links that are kept.

The end-to-end attacks are in tests/e2e/test_build_follow_hostile.py; these check the parts against
independent oracles (``posixpath.normpath``, ``urljoin``, a regex reading of RFC 9309) on many shapes.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote, urljoin, urlsplit

from docbundle.indexer.pipeline.follow import ROBOTS_MAX_REFUSED, FollowScope, RobotsRules, within_prefix
from hypothesis import example, given
from hypothesis import strategies as st
from protego import Protego

PREFIX = "/docs/"
HOME = ("http", "docs.example", 80)
AGENT = "docbundle-indexer/0.1 (+https://github.com/docbundle/docbundle)"

# Path pieces a hostile page may combine: dots plain and encoded (once and twice), encoded and back
# slashes, ;params, empty segments, and ordinary names.
_PIECES = st.sampled_from(
    [
        *("a", "b", "private", "..", ".", "%2e%2e", "%2E", ".%2e", "%2f", "%2F", "%5c", "\\", "..;", ";x"),
        *("%252e%252e", "%252f", "%25", "", "a%20b"),
    ]
)


def _server_readings(path: str) -> list[str]:
    """How servers may read ``path`` (an oracle independent of follow.py): decoded 0-2 times, ``\\``
    kept or a slash, ``;params`` kept or dropped, then ``//`` merged and dots removed by normpath, or
    dots removed as RFC 3986 does (urljoin) without merging."""
    out = []
    level = path
    for _ in range(3):
        for backslash in (False, True):
            for params in (False, True):
                p = level.replace("\\", "/") if backslash else level
                if params:
                    p = "/".join(s.partition(";")[0] for s in p.split("/"))
                out.append(posixpath.normpath(p) + "/")
                out.append(urlsplit(urljoin("http://h/", "http://h" + p.replace("?", "%3F"))).path)
        level = unquote(level)
    return out


@given(st.lists(_PIECES, max_size=6))
@example(["..", "private"])
@example(["%2e%2e", "private"])
@example(["a", "..%2f..%2fprivate"])
@example(["%252e%252e", "private"])
@example(["a%5c..%5c..%5cprivate"])
@example(["..;", "private"])
@example(["", "..", "private"])
def test_no_reading_of_a_followed_path_leaves_the_prefix(pieces: list[str]) -> None:
    path = PREFIX + "/".join(pieces)
    if within_prefix(path, PREFIX):
        for reading in _server_readings(path):
            assert reading.startswith(PREFIX), (path, reading)


@given(st.lists(st.text(alphabet="abcxyz0123456789-_~", min_size=1, max_size=8), max_size=5))
def test_a_plain_path_under_the_prefix_is_followed(segments: list[str]) -> None:
    assert within_prefix(PREFIX + "/".join(segments), PREFIX)
    assert within_prefix(PREFIX + "/".join(segments) + "/a%20b.md", PREFIX)


def test_the_issues_paths() -> None:
    assert not within_prefix("/f2docs/%2e%2e/private/c.md", "/f2docs/")
    assert not within_prefix("/f2docs/a/..%2f..%2fprivate/c.md", "/f2docs/")
    assert not within_prefix("/docsx/a.md", "/docs/")
    assert within_prefix("/f2docs/a/%2e%2e/c.md", "/f2docs/")  # stays inside: followed
    assert not within_prefix("/docs/%25252525252e", "/docs/")  # never settles: refused


# -- robots.txt, RFC 9309 --------------------------------------------------------------------------


def _rules(text: str) -> RobotsRules:
    return RobotsRules("http://docs.example/robots.txt", Protego.parse(text), True, AGENT, "rules read")


def _oracle(rules: list[tuple[str, str]], path: str) -> bool:
    """RFC 9309 section 2.2.2: the matching rule with the most octets decides; allow wins a tie."""
    best: tuple[int, bool] | None = None
    for kind, pattern in rules:
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        regex = "".join(".*" if c == "*" else re.escape(c) for c in body) + (r"\Z" if anchored else "")
        if re.match(regex, path):
            key = (len(pattern), kind == "allow")
            best = key if best is None or key > best else best
    return best is None or best[1]


_PATTERN = st.text(alphabet="/ab*", min_size=1, max_size=6).map(lambda t: "/" + t.lstrip("/"))
_RULE = st.tuples(
    st.sampled_from(["allow", "disallow"]), st.one_of(_PATTERN, _PATTERN.map(lambda p: p + "$"))
)


@given(st.lists(_RULE, min_size=1, max_size=6), st.text(alphabet="/ab", max_size=8).map(lambda t: "/" + t))
@example([("disallow", "/a/"), ("allow", "/a/b/")], "/a/b/x")
@example([("disallow", "/*.b$")], "/a.b")
def test_robots_rules_are_read_as_rfc_9309_says(rules: list[tuple[str, str]], path: str) -> None:
    text = "User-agent: *\n" + "".join(f"{kind}: {pattern}\n" for kind, pattern in rules)
    assert _rules(text).allowed("http://docs.example" + path) == _oracle(rules, path)


def test_the_group_naming_this_crawler_wins_over_star() -> None:
    rules = _rules("User-agent: *\nDisallow: /\n\nUser-agent: docbundle-indexer\nDisallow: /b/\n")
    assert rules.allowed("http://docs.example/a") and not rules.allowed("http://docs.example/b/x")


# -- robots.txt asked only about what is kept ---------------------------------------------------------


def test_robots_is_asked_only_until_the_budget_is_filled() -> None:
    rules = _rules("User-agent: *\nDisallow: /docs/p3\n")
    scope = FollowScope(HOME, PREFIX, rules)
    urls = [f"http://docs.example/docs/p{i}" for i in range(20_000)]
    assert scope.pick(urls, 3) == [urls[0], urls[1], urls[2]]
    assert rules.checks == 3
    # p3 is refused; p4 takes its place.
    assert scope.pick(urls[3:], 2) == [urls[4], urls[5]] and rules.checks == 6


def test_refusals_are_bounded_and_an_unreachable_robots_txt_is_asked_nothing() -> None:
    rules = _rules("User-agent: *\nDisallow: /docs/\n")
    scope = FollowScope(HOME, PREFIX, rules)
    urls = [f"http://docs.example/docs/p{i}" for i in range(20_000)]
    assert scope.pick(urls, 10) == [] and rules.checks == ROBOTS_MAX_REFUSED
    assert scope.pick(urls, 10) == [] and rules.checks == ROBOTS_MAX_REFUSED
    nothing = RobotsRules("http://docs.example/robots.txt", None, False, AGENT, "unreachable")
    assert FollowScope(HOME, PREFIX, nothing).pick(urls, 10) == [] and nothing.checks == 0


def test_robots_is_asked_about_a_path_as_the_server_reads_it_too() -> None:
    rules = _rules("User-agent: *\nDisallow: /secret/\n")
    scope = FollowScope(HOME, "/", rules)
    assert scope.pick(["http://docs.example/a/%2e%2e/secret/x.md"], 5) == []
    assert scope.refusal("http://docs.example/a/..%2fsecret/x.md") == "disallowed by robots.txt"


def test_a_hop_must_stay_on_the_origin_under_the_prefix_and_within_robots_txt() -> None:
    scope = FollowScope(HOME, PREFIX, _rules("User-agent: *\nDisallow: /docs/blocked/\n"))
    assert scope.refusal("http://docs.example/docs/a.md") is None
    assert (
        scope.refusal("https://docs.example/docs/a.md")
        == "not on the llms.txt's origin, where followed pages stay"
    )
    assert scope.refusal("http://docs.example/private/a.md") == "outside the follow prefix '/docs/'"
    assert (
        scope.refusal("http://docs.example/docs/%2e%2e/private/a.md") == "outside the follow prefix '/docs/'"
    )
    assert scope.refusal("http://docs.example/docs/blocked/a.md") == "disallowed by robots.txt"
