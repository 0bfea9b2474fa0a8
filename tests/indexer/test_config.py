"""libraries.toml validation: every error names the library and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from docbundle.indexer.config import load_config
from docbundle.indexer.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "libraries.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_the_shipped_catalogue_is_valid_and_holds_the_demo_library() -> None:
    cat = load_config(ROOT / "bundles" / "libraries.toml")
    ids = [lib.id for lib in cat.libraries]
    assert "docbundle" in ids and "tosspayments" in ids
    (demo,) = cat.targets(cat.get("docbundle"))
    assert demo.source == str((ROOT / "docs" / "llms.txt").resolve())
    assert demo.version.name == "latest"


def test_smallest_entry_is_accepted(tmp_path: Path) -> None:
    cat = _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "http://127.0.0.1:8765/llms.txt"\n')
    (t,) = cat.targets(cat.libraries[0])
    assert t.source == "http://127.0.0.1:8765/llms.txt"
    assert t.library.display_name == "atmos"
    assert t.keep == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param('llm_txt = "x"\n', r"key 'llm_txt': unknown key", id="unknown-key"),
        pytest.param(
            'llms_txt = "x"\n[library.chunking]\ndepth = 2\n',
            r"key 'chunking.depth': unknown key",
            id="unknown-nested-key-by-its-path",
        ),
        pytest.param(
            'llms_txt = "x"\nmax_pages = "many"\n', r"key 'max_pages': Expected `int`", id="wrong-type"
        ),
        pytest.param(
            'llms_txt = "x"\ncrawl = { timeout = "slow" }\n', r"crawl.timeout", id="bad-crawl-timeout"
        ),
        pytest.param('llms_txt = "x"\ncrawl = { speed = 3 }\n', r"crawl.speed", id="unknown-crawl-option"),
    ],
)
def test_a_bad_key_is_refused_naming_the_library_and_the_key(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"library 'atmos': " + message):
        _load(tmp_path, '[[library]]\nid = "atmos"\n' + body)


@pytest.mark.parametrize("bad_id", ["Atmos", "-x", "a_b", "", "a b"])
def test_bad_library_id_is_refused(tmp_path: Path, bad_id: str) -> None:
    # The rule in words, never the raw pattern.
    with pytest.raises(
        ConfigError, match=r"key 'id': .* is not a library id: lower-case letters, digits and '-'"
    ) as e:
        _load(tmp_path, f'[[library]]\nid = "{bad_id}"\nllms_txt = "x"\n')
    assert "\\Z" not in str(e.value) and "[a-z0-9]" not in str(e.value)


def test_library_without_id_is_named_by_position(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"library #2: key '': Object missing required field `id`"):
        _load(tmp_path, '[[library]]\nid = "a"\nllms_txt = "x"\n[[library]]\nllms_txt = "y"\n')


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="library 'a': key 'id': duplicate"):
        _load(tmp_path, '[[library]]\nid = "a"\nllms_txt = "x"\n[[library]]\nid = "a"\nllms_txt = "y"\n')


def test_exactly_one_of_llms_txt_and_versions(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="either 'llms_txt' or"):
        _load(tmp_path, '[[library]]\nid = "a"\n')
    with pytest.raises(ConfigError, match="either 'llms_txt' or"):
        _load(
            tmp_path,
            '[[library]]\nid = "a"\nllms_txt = "x"\n[[library.version]]\nname = "v1"\nllms_txt = "y"\n',
        )


def test_unsupported_url_scheme_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key 'llms_txt'"):
        _load(tmp_path, '[[library]]\nid = "a"\nllms_txt = "ftp://example.invalid/llms.txt"\n')


def test_versions_resolve_with_status_and_relative_paths(tmp_path: Path) -> None:
    cat = _load(
        tmp_path,
        '[[library]]\nid = "a"\n'
        '[[library.version]]\nname = "v2"\nllms_txt = "v2/llms.txt"\nlatest = true\n'
        '[[library.version]]\nname = "v1"\nllms_txt = "file:///srv/v1/llms.txt"\nstatus = "deprecated"\n',
    )
    v2, v1 = cat.targets(cat.libraries[0])
    assert (v2.version.name, v2.version.latest, v2.version.status) == ("v2", True, "active")
    assert v2.source == str(tmp_path / "v2" / "llms.txt")
    assert (v1.version.name, v1.version.status, v1.source) == ("v1", "deprecated", "file:///srv/v1/llms.txt")


def test_two_latest_versions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only one version can be latest"):
        _load(
            tmp_path,
            '[[library]]\nid = "a"\n'
            '[[library.version]]\nname = "v2"\nllms_txt = "x"\nlatest = true\n'
            '[[library.version]]\nname = "v1"\nllms_txt = "y"\nlatest = true\n',
        )


def test_defaults_are_inherited_and_overridden(tmp_path: Path) -> None:
    cat = _load(
        tmp_path,
        "[defaults]\nkeep = 5\ncrawl = { concurrency = 4, timeout = 3.0 }\n"
        '[[library]]\nid = "a"\nllms_txt = "x"\ncrawl = { timeout = 9.0 }\n',
    )
    (t,) = cat.targets(cat.libraries[0])
    assert (t.keep, t.crawl.concurrency, t.crawl.timeout) == (5, 4, 9.0)


def test_invalid_toml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        _load(tmp_path, "[[library]\n")
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_unknown_library_lists_the_configured_ones(tmp_path: Path) -> None:
    cat = _load(tmp_path, '[[library]]\nid = "a"\nllms_txt = "x"\n')
    with pytest.raises(ConfigError, match="no library 'b'; configured: a"):
        cat.get("b")


def test_an_unparsable_url_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"library 'bad': key 'llms_txt': 'http://\[bad/llms.txt' is not a valid URL"
    ):
        _load(tmp_path, '[[library]]\nid = "bad"\nllms_txt = "http://[bad/llms.txt"\n')


_FOLLOW_LIB = '[[library]]\nid = "atmos"\nllms_txt = "https://atmos.example/llms.txt"\n'


def test_follow_is_off_by_default_and_read_with_its_defaults(tmp_path: Path) -> None:
    cat = _load(tmp_path, _FOLLOW_LIB + 'follow = { prefix = "/docs/" }\n')
    follow = cat.libraries[0].follow
    assert follow is not None and (follow.depth, follow.prefix, follow.max_pages) == (1, "/docs/", 100)
    assert _load(tmp_path, _FOLLOW_LIB).libraries[0].follow is None


@pytest.mark.parametrize(
    ("follow", "message"),
    [
        ("{ depth = 0 }", r"library 'atmos': key 'follow.depth': must be between 1 and 5"),
        ("{ depth = 6 }", r"library 'atmos': key 'follow.depth': must be between 1 and 5"),
        ('{ depth = "2" }', r"library 'atmos': key 'follow.depth': Expected `int`, got `str`"),
        ('{ prefix = "docs/" }', r"library 'atmos': key 'follow.prefix': 'docs/' must be a URL path"),
        ('{ prefix = "/docs/../etc/" }', r"library 'atmos': key 'follow.prefix'"),
        ('{ prefix = "/docs?x=1" }', r"library 'atmos': key 'follow.prefix'"),
        ('{ prefix = "//evil.example/" }', r"library 'atmos': key 'follow.prefix'"),
        # "$" matched before a final newline (issue 31, item 14): a trailing newline is refused.
        ('{ prefix = "/docs/\\n" }', r"library 'atmos': key 'follow.prefix': '/docs/\\n'"),
        ("{ max_pages = 0 }", r"library 'atmos': key 'follow.max_pages': must be between 1 and 1000"),
        ("{ max_pages = 1001 }", r"library 'atmos': key 'follow.max_pages': must be between 1 and 1000"),
        ("{ deph = 2 }", r"library 'atmos': key 'follow.deph': unknown key"),
    ],
)
def test_bad_follow_settings_name_the_library_and_key(tmp_path: Path, follow: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, _FOLLOW_LIB + f"follow = {follow}\n")


def test_follow_needs_an_http_llms_txt(tmp_path: Path) -> None:
    (tmp_path / "llms.txt").write_text("# X\n- [A](a.md)\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"library 'atmos': key 'follow': only an http\(s\) llms.txt"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "llms.txt"\nfollow = { depth = 1 }\n')
