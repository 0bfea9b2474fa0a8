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


def test_unknown_key_names_library_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"library 'atmos': key 'llm_txt': unknown key"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllm_txt = "x"\n')


def test_unknown_nested_key_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"library 'atmos': key 'chunking.depth': unknown key"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "x"\n[library.chunking]\ndepth = 2\n')


def test_wrong_type_names_library_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"library 'atmos': key 'max_pages': Expected `int`"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "x"\nmax_pages = "many"\n')


def test_bad_crawl_option_names_the_crawl_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"library 'atmos': crawl.timeout"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "x"\ncrawl = { timeout = "slow" }\n')
    with pytest.raises(ConfigError, match=r"library 'atmos': crawl.speed"):
        _load(tmp_path, '[[library]]\nid = "atmos"\nllms_txt = "x"\ncrawl = { speed = 3 }\n')


@pytest.mark.parametrize("bad_id", ["Atmos", "-x", "a_b", "", "a b"])
def test_bad_library_id_is_refused(tmp_path: Path, bad_id: str) -> None:
    with pytest.raises(ConfigError, match="key 'id': must match"):
        _load(tmp_path, f'[[library]]\nid = "{bad_id}"\nllms_txt = "x"\n')


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
