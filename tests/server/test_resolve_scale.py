"""Issue 22: ``resolve_library`` over a catalogue of thousands of libraries that share common words.

The catalogue is made of one golden bundle served under 2,000 library ids (its files hard-linked, each
library's name, description, category and languages in its own manifest and in the catalogue summary,
which is what resolving ranks by; the matches shown are checked against their manifests), driven through the MCP SDK's in-memory client. Speed is measured by
``benchmarks/catalog_scale.py``, never asserted here.

The word index's answers are also checked against comparing the query with every word of every
library (``_reference``), on small generated catalogues where no word is common.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import msgspec
import pytest
from docbundle.bundle.manifest import MANIFEST_NAME, LibraryInfo, decode_manifest, encode_manifest
from docbundle.bundle.summary import SummaryEntry, entry_from_manifest, read_summary, write_summary
from docbundle.server.catalog import Catalog
from docbundle.server.resolve import (
    FIELDS,
    FILLER,
    MIN_SCORE,
    WEIGHTS,
    Resolver,
    _closeness,
    _compact,
    _fields,
    words,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from serverkit import GOLDEN_BUILD, call, connect, install_golden

pytestmark = pytest.mark.anyio

FIRST = ["lantern", "compass", "harbor", "quartz", "meadow", "falcon", "ember", "glacier", "orchid", "summit"]
_COLOURS = ("amber", "cobalt", "violet", "silver", "copper", "indigo", "scarlet", "ivory", "olive", "russet")
_PLACES = "wave stone leaf gate field brook crest forge grove spire vale cliff marsh ridge shore hollow thorn mill quay fen"
SECOND = [f"{a}{b}" for a in _COLOURS for b in _PLACES.split()]
COUNT = 2_000  # libraries: every id holds "pkg", every name "toolkit", every description "library"


def _name(i: int) -> str:
    """Library ``i``'s name: two words its name alone holds both of, and "toolkit"."""
    return f"{FIRST[i % len(FIRST)].title()} {SECOND[i // len(FIRST)].title()} toolkit"


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``COUNT`` libraries ``pkg-0000``... over one bundle; ``pkg-1234`` alone is written in Korean.

    Each library's manifest says its own name (the summary is written from them): a resolve shows each
    match's checked entry, read from its manifest, never what the summary alone claims (issue 31)."""
    root = tmp_path_factory.mktemp("many")
    base, _ = _golden(tmp_path_factory)
    manifest = decode_manifest((base / MANIFEST_NAME).read_bytes())
    entries = []
    for i in range(COUNT):
        lib_id = f"pkg-{i:04d}"
        vdir = root / lib_id / "latest"
        vdir.mkdir(parents=True)
        shutil.copytree(base, vdir / GOLDEN_BUILD, copy_function=os.link)  # real folders: links are refused
        (vdir / "CURRENT").write_text(GOLDEN_BUILD + "\n", encoding="ascii")
        info = msgspec.structs.replace(
            manifest.library,
            id=lib_id,
            name=_name(i),
            description=f"a library of {FIRST[(i * 7) % len(FIRST)]} helpers",
            category="tools",
        )
        title = "한국어 문서 안내" if i == 1234 else "Guide"  # the summary's languages come from titles
        documents = [msgspec.structs.replace(d, title=title) for d in manifest.documents]
        data = encode_manifest(msgspec.structs.replace(manifest, library=info, documents=documents))
        path = vdir / GOLDEN_BUILD / MANIFEST_NAME
        path.unlink()  # a hard link to the base's: replaced, not written through
        path.write_bytes(data)
        entries.append(entry_from_manifest(decode_manifest(data), hashlib.sha256(data).hexdigest()))
    write_summary(root, entries)
    return root


def _golden(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SummaryEntry]:
    """The golden bundle in a folder of its own, and its catalogue summary entry."""
    root = tmp_path_factory.mktemp("golden")
    bundle = install_golden(root)
    Catalog.load(root).close()  # writes the summary
    (entry,) = read_summary(root) or []
    return bundle, entry


async def _ids(catalog: Catalog, name: str, **args: object) -> tuple[list[str], dict[str, object]]:
    async with connect(catalog) as c:
        found = await call(c, "resolve_library", name=name, **args)
    return [m["id"] for m in found["matches"]], found  # type: ignore[index]


async def test_thousands_sharing_common_words_still_resolve_the_right_library_first(many: Path) -> None:
    catalog = Catalog.load(many)
    try:
        assert len(catalog.library_ids()) == COUNT
        i = 517
        exact, _ = await _ids(catalog, _name(i))
        assert exact[:1] == [f"pkg-{i:04d}"]
        by_id, found = await _ids(catalog, "pkg-0517")
        assert by_id[:1] == ["pkg-0517"]
        # "pkg" is in every id: a library holding only it is no match (not 1,999 more left out).
        assert by_id == ["pkg-0517"] and found.get("message") is None, found
        first, second, _ = _name(i).split()
        typo = f"{first[:2] + first[3:]} {second[0] + second[2] + second[1] + second[3:]} toolkit"  # 2 typos
        typed, _ = await _ids(catalog, typo)
        assert typed[:1] == [f"pkg-{i:04d}"]
        korean, found = await _ids(catalog, "pkg toolkit docs in Korean")
        assert korean[:1] == ["pkg-1234"], found
        assert "written in ko" in found["matches"][0]["why"]  # type: ignore[index]
        # A query of common words alone still ranks: the best first, and says more may match.
        common, found = await _ids(catalog, "toolkit library", limit=3)
        assert len(common) == 3 and "more match(es) left out" in str(found["message"])
    finally:
        catalog.close()


# -- the index answers as comparing with every library would ----------------------------------------


def _reference(resolver: Resolver, query: str) -> list[tuple[str, float]]:
    """(library id, score) of every match, best first (ties by id), by comparing every word."""
    libs = resolver.catalog.libraries()
    index = resolver.index()
    raw = words(query)
    wanted = [w for w in raw if w not in FILLER] or raw
    if not wanted:
        return []
    known = index.words.known
    wholes = index.wholes.known
    compact = _compact(" ".join(wanted))

    def close(word: str, token: str, vocabulary: set[str]) -> float:
        c = _closeness(word, token)
        prefix = len(word) >= 3 and len(token) >= 3 and (token.startswith(word) or word.startswith(token))
        return 0.0 if word != token and not prefix and word in vocabulary else c  # typos of unknown words

    out = []
    for n, lib in enumerate(libs):
        fields = _fields(lib, index.langs[n])
        best = [
            max(
                (close(w, t, known) * WEIGHTS[FIELDS[f]] for f, ts in enumerate(fields) for t in ts),
                default=0,
            )
            for w in wanted
        ]
        score = sum(best) / len(wanted)
        if len(wanted) > 1:
            for whole in {_compact(x) for x in (lib.id, lib.name) if x}:
                score = max(score, close(compact, whole, wholes) * 0.95)
        if round(min(score, 1.0), 3) >= MIN_SCORE:
            out.append((lib.id, round(min(score, 1.0), 3)))
    return sorted(out, key=lambda m: (-m[1], m[0]))


_word = st.sampled_from(["react", "reactor", "rea", "vue", "vuex", "payments", "pay", "korean", "kit", "ui5"])


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.lists(_word, min_size=1, max_size=3), min_size=1, max_size=6),
    query=st.lists(
        st.one_of(_word, _word.map(lambda w: w[:-1] + "x"), _word.map(lambda w: w[1:] + w[0])),
        min_size=1,
        max_size=3,
    ),
)
def test_the_word_index_answers_as_comparing_every_library_would(
    tmp_path_factory: pytest.TempPathFactory, names: list[list[str]], query: list[str]
) -> None:
    root = tmp_path_factory.mktemp("small")
    base, entry = _golden(tmp_path_factory)
    entries = []
    for i, parts in enumerate(names):
        vdir = root / f"lib{i}" / "latest"
        vdir.mkdir(parents=True)
        shutil.copytree(base, vdir / GOLDEN_BUILD, copy_function=os.link)  # real folders: links are refused
        (vdir / "CURRENT").write_text(GOLDEN_BUILD + "\n", encoding="ascii")
        info = LibraryInfo(id=f"lib{i}", name=" ".join(parts), description=" ".join(reversed(parts)))
        entries.append(msgspec.structs.replace(entry, library=info))
    write_summary(root, entries)
    catalog = Catalog.load(root)
    try:
        resolver = Resolver(catalog)
        text = " ".join(query)
        found, total, exact = resolver.resolve(text)
        expected = _reference(resolver, text)
        assert [(m.library.id, m.score) for m in found] == expected
        assert (total, exact) == (len(expected), True)
    finally:
        catalog.close()
