"""The nightly plan on a generated 10,000-library catalogue: at most 256 shards, every library in exactly
one, no release over 1,000 assets, the same plan for the same inputs, shards balanced by expected time;
and the dry run (``docbundle-index nightly --plan --dry-run``) that prints it, with no network."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from clikit import index_cli
from docbundle.bundle.release import PackagedBundle
from docbundle.bundle.releaseindex import MAX_ARCHIVES_PER_RELEASE, MAX_ASSETS_PER_RELEASE, encode_index
from docbundle.indexer.config import Config, load_config
from docbundle.indexer.errors import ConfigError
from docbundle.indexer.release.plan import (
    MAX_SHARDS,
    STICKY_SLACK,
    LibraryTiming,
    Plan,
    Timings,
    estimates,
    make_plan,
    merge_timings,
    read_documents,
    read_timings,
    write_timings,
)

N = 10_000
PREFIX = "bundles-20261127-1"
NO_SOCKETS = """
import sys
log = open(sys.argv[1], "a", encoding="utf-8", buffering=1)
def hook(event, args):
    if event.startswith("socket."):
        log.write(event + "\\n")
sys.addaudithook(hook)
from docbundle.indexer.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _config(path: Path, n: int = N, *, versions_every: int = 50) -> Path:
    """``n`` libraries; every ``versions_every``-th one has three versions (so archives > libraries)."""
    parts = []
    for i in range(n):
        parts.append(f'[[library]]\nid = "lib-{i:05d}"\nname = "Library {i}"\n')
        if versions_every and i % versions_every == 0:
            for v, latest in (("1.0", "false"), ("2.0", "false"), ("3.0", "true")):
                parts.append(
                    f'[[library.version]]\nname = "{v}"\nllms_txt = "https://d{i}.example/{v}/llms.txt"\n'
                    f"latest = {latest}\n"
                )
        else:
            parts.append(f'llms_txt = "https://d{i}.example/llms.txt"\n')
    path.write_text("".join(parts), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return load_config(_config(tmp_path_factory.mktemp("plan") / "libraries.toml"))


def _timings(config: Config, seed: int = 7, *, measured: float = 0.9) -> Timings:
    """Last night's seconds for ``measured`` of the libraries: a long-tailed spread (most libraries take
    seconds, a few take many minutes), as a real catalogue does."""
    rng = random.Random(seed)
    return Timings(
        libraries={
            lib.id: LibraryTiming(seconds=round(min(rng.lognormvariate(3.0, 1.2), 3600.0), 3))
            for lib in config.libraries
            if rng.random() < measured
        }
    )


def _check(plan: Plan, config: Config) -> None:
    """The limits every plan keeps."""
    assert 1 <= len(plan.shards) <= MAX_SHARDS
    placed = Counter(lib for s in plan.shards for lib in s.libraries)
    assert set(placed) == {lib.id for lib in config.libraries} and set(placed.values()) == {1}
    assert [s.shard for s in plan.shards] == list(range(len(plan.shards)))
    versions = {lib.id: len(lib.version) or 1 for lib in config.libraries}
    for s in plan.shards:
        assert s.archives == sum(versions[lib] for lib in s.libraries) <= MAX_ARCHIVES_PER_RELEASE
    in_release = Counter(shard for r in plan.releases for shard in r.shards)
    assert set(in_release.values()) == {1} and len(in_release) == len(plan.shards)
    for r in plan.releases:
        # Each release also holds SHA256SUMS, index.json and its attestation.
        assert r.assets == len(r.archives) + 3 <= MAX_ASSETS_PER_RELEASE
        assert len(r.archives) == sum(plan.shards[k].archives for k in r.shards)
        assert all(plan.shards[k].release == r.tag for k in r.shards)
    assert sum(len(r.archives) for r in plan.releases) == sum(versions.values())


def test_ten_thousand_libraries_fit_the_limits_and_balance_by_last_nights_timings(
    config: Config,
) -> None:
    timings = _timings(config)
    plan = make_plan(config, timings, {}, release_prefix=PREFIX)
    _check(plan, config)
    cost = estimates(config, timings, {})
    loads = [s.seconds for s in plan.shards]
    mean = sum(loads) / len(loads)
    longest = max(seconds for seconds, _ in cost.values())
    # LPT's bound: the heaviest shard is at most the mean plus the longest library. On this spread every
    # shard is within 5% of the mean, but for those holding one library longer than the mean alone.
    assert max(loads) <= mean + longest
    shared = [s.seconds for s in plan.shards if len(s.libraries) > 1]
    assert max(shared) / mean <= 1.05, (max(shared), mean)
    alone = [s for s in plan.shards if len(s.libraries) == 1]
    assert all(s.seconds > mean for s in alone)
    assert len(plan.shards) > 100 and len(plan.releases) >= 11  # 10,400 archives need 11 releases


def test_the_same_inputs_give_the_same_plan(config: Config) -> None:
    timings = _timings(config)
    first = msgspec.json.encode(make_plan(config, timings, {}, release_prefix=PREFIX))
    shuffled = Timings(libraries=dict(sorted(timings.libraries.items(), key=lambda kv: kv[0][::-1])))
    assert msgspec.json.encode(make_plan(config, shuffled, {}, release_prefix=PREFIX)) == first
    other = _timings(config, seed=8)
    assert msgspec.json.encode(make_plan(config, other, {}, release_prefix=PREFIX)) != first


def test_libraries_stay_in_last_nights_shard_while_it_stays_balanced(config: Config) -> None:
    """A shard's Actions cache holds its libraries' previous bundles: a library moves only when its
    shard is over the slack."""
    plan = make_plan(config, _timings(config), {}, release_prefix=PREFIX)
    shard_of = {lib: s.shard for s in plan.shards for lib in s.libraries}
    rng = random.Random(3)
    tonight = Timings(
        libraries={
            lib: LibraryTiming(seconds=round(t.seconds * rng.uniform(0.7, 1.4), 3), shard=shard_of[lib])
            for lib, t in _timings(config).libraries.items()
        }
    )
    again = make_plan(config, tonight, {}, release_prefix=PREFIX)
    _check(again, config)
    stayed = sum(1 for s in again.shards for lib in s.libraries if shard_of[lib] == s.shard)
    assert stayed >= 0.8 * N, stayed
    loads = [s.seconds for s in again.shards]
    mean = sum(loads) / len(loads)
    longest = max(seconds for seconds, _ in estimates(config, tonight, {}).values())
    assert max(loads) <= STICKY_SLACK * mean + longest
    shared = [s.seconds for s in again.shards if len(s.libraries) > 1]
    assert max(shared) / mean <= 1.15, (max(shared), mean)


def test_a_night_that_costs_less_keeps_last_nights_shards(tmp_path: Path) -> None:
    """A first night plans from defaults (here 12 shards); the next night's timings, which keep embedding
    apart, say the catalogue costs far less. Fewer shards would move most libraries away from their
    shard's cache (their previous bundle, whose vectors a rebuild reuses, and their embedding checkpoint):
    the rehearsal's second night moved 832 of 1,000 when the plan went from 12 shards to 2. The plan keeps
    last night's count, so every library stays where its cache is."""
    config = load_config(_config(tmp_path / "libraries.toml", 600, versions_every=0))
    first = make_plan(config, Timings(), {}, release_prefix=PREFIX, target_seconds=1000)
    shard_of = {lib: s.shard for s in first.shards for lib in s.libraries}
    assert len(first.shards) == 12  # 600 libraries at the 20 s default, 1,000 s a shard
    cheap = Timings(libraries={lib: LibraryTiming(seconds=2.0, shard=k) for lib, k in shard_of.items()})
    second = make_plan(config, cheap, {}, release_prefix=PREFIX, target_seconds=1000)
    _check(second, config)
    assert len(second.shards) == 12  # 1,200 s in all would want 2
    assert all(shard_of[lib] == s.shard for s in second.shards for lib in s.libraries)
    # A smaller --max-shards still wins: the operator asked for it.
    assert len(make_plan(config, cheap, {}, release_prefix=PREFIX, max_shards=4).shards) == 4


def test_a_library_never_timed_is_estimated_from_its_documents_or_a_default(config: Config) -> None:
    timings = Timings(libraries={"lib-00001": LibraryTiming(seconds=100.0)})
    documents = {"lib-00001": 500, "lib-00002": 1000}
    cost = estimates(config, timings, documents)
    assert cost["lib-00001"] == (100.0, 1)  # measured
    assert cost["lib-00002"] == (200.0, 1)  # 1,000 documents at the measured 0.2 s per document
    default = cost["lib-00003"][0]
    assert cost["lib-00000"] == (3 * default, 3)  # three versions never built: three times the default


def test_shards_are_capped_by_the_archives_a_release_holds(tmp_path: Path) -> None:
    small = load_config(_config(tmp_path / "c.toml", 3000, versions_every=0))
    plan = make_plan(small, Timings(), {}, release_prefix=PREFIX, max_shards=4)
    _check(plan, small)
    assert len(plan.shards) == 4 and max(s.archives for s in plan.shards) <= MAX_ARCHIVES_PER_RELEASE
    with pytest.raises(ConfigError, match=r"3000 library versions do not fit one run \(2 jobs"):
        make_plan(small, Timings(), {}, release_prefix=PREFIX, max_shards=2)
    with pytest.raises(ConfigError, match=r"cannot start a release tag"):
        make_plan(small, Timings(), {}, release_prefix="../x")


def test_timings_and_the_previous_index_are_read_as_checked_data(tmp_path: Path) -> None:
    path = tmp_path / "timings.json"
    assert read_timings(path).libraries == {}  # the first night: none
    write_timings(
        Timings(libraries={"b": LibraryTiming(seconds=2.0, shard=3), "a": LibraryTiming(seconds=1.0)}), path
    )
    assert list(read_timings(path).libraries) == ["a", "b"]
    merged = merge_timings(read_timings(path), [Timings(libraries={"b": LibraryTiming(seconds=9.0)})], {"b"})
    assert merged.libraries == {"b": LibraryTiming(seconds=9.0)}
    path.write_text('{"libraries": {"a": {"seconds": -1}}}')
    with pytest.raises(ConfigError, match=r"timings.json is malformed: Expected `float` >= 0"):
        read_timings(path)
    path.write_text('{"libraries": {"a": {"seconds": 1, "shard": 256}}}')
    with pytest.raises(ConfigError, match=r"Expected `int` <= 255"):
        read_timings(path)
    index = tmp_path / "index.json"
    index.write_text('{"format": "docbundle-release-index", "version": 1, "bundles": [{"library": "A"}]}')
    with pytest.raises(ConfigError, match=r"index.json is malformed: .* at `\$.bundles\[0\].library`"):
        read_documents(index)


def _entry(library: str, version: str, documents: int) -> PackagedBundle:
    build = "20261126-" + "a" * 12
    return PackagedBundle(
        library=library, name=library, version=version, status="active", latest=True, build_id=build,
        content_hash="0" * 64, manifest_sha256="1" * 64, built_at="2026-11-26T03:17:00Z",
        documents=documents, archive=f"{library}-{version}-{build}.tar.gz", sha256="2" * 64, size=1,
        release="bundles-20261126-1-01",
    )  # fmt: skip


def test_the_dry_run_prints_the_shards_and_the_assets_of_each_release(tmp_path: Path) -> None:
    """``nightly --plan --dry-run`` on a 10,000-library config: no network (the config's addresses do not
    resolve here), every shard and every release with its asset count."""
    config = _config(tmp_path / "libraries.toml")
    loaded = load_config(config)
    timings = tmp_path / "timings.json"
    write_timings(_timings(loaded), timings)
    index = tmp_path / "index.json"
    index.write_bytes(encode_index([_entry("lib-00003", "latest", 40), _entry("lib-00004", "latest", 4000)]))
    common = [
        "nightly",
        "--config",
        str(config),
        "--plan",
        "--timings",
        str(timings),
        "--previous",
        str(index),
    ]
    # Under an audit hook that records every socket call: the dry run makes none.
    events = tmp_path / "sockets.txt"
    r = subprocess.run(
        [sys.executable, "-c", NO_SOCKETS, str(events), *common, "--release-prefix", PREFIX, "--dry-run"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert events.read_text() == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"nightly plan: {N} libraries, 10400 library versions")
    shards = [line for line in lines if line.startswith("  shard ")]
    releases = [line for line in lines if line.startswith(f"  {PREFIX}-")]
    assert 100 < len(shards) <= MAX_SHARDS and len(releases) >= 11
    for line in releases:
        assets = int(line.split()[1])
        assert assets <= MAX_ASSETS_PER_RELEASE
        assert f"{assets - 3} archives, SHA256SUMS, index.json, attestation.sigstore.json" in line

    r = index_cli(*common, "--release-prefix", PREFIX, "--dry-run", "--all")
    assert r.returncode == 0, r.stderr
    listed = [line.strip() for line in r.stdout.splitlines() if line.endswith("-*.tar.gz")]
    assert len(listed) == len(set(listed)) == 10_400 and "lib-00000-1.0-*.tar.gz" in listed

    r = index_cli(*common, "--release-prefix", PREFIX, "--plan-out", str(tmp_path / "plan.json"))
    assert r.returncode == 0, r.stderr
    matrices = json.loads(r.stdout)
    plan = msgspec.json.decode((tmp_path / "plan.json").read_bytes(), type=Plan)
    assert [m["shard"] for m in matrices["build"]["include"]] == [s.shard for s in plan.shards]
    assert [m["release"] for m in matrices["publish"]["include"]] == [r.tag for r in plan.releases]
    # A job's outputs are limited to 1 MB in all; the matrices stay far below it.
    assert len(r.stdout) < 64 * 1024
