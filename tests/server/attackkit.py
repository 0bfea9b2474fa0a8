"""Bundles and inputs for the attack tests of the server's bounds (tests/server/test_server_limits.py,
test_server_stdio.py): a bundle where the heaviest accepted query is as slow as it gets, a damaged
bundle that still verifies, and helpers to run ``docbundle serve`` with a longer search time budget.

``REPEAT_TREE`` is library ``repeat`` (built by ``treekit.build``): pages made of one two-word pattern ("ping pong")
repeated thousands of times, so a quoted phrase of that pattern matches at every position and each
phrase step keeps thousands of candidate positions alive: the worst case of phrase matching.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
from serverkit import install_golden
from treekit import Site, Tree

REPEAT_PAGES = 20
REPEAT_WORDS = 12_000  # words per page
PATTERN = "ping pong"

REPEAT_CONFIG = """
[[library]]
id = "repeat"
name = "Repeat"
description = "One pattern, many times"
category = "test"
llms_txt = "repeat/llms.txt"

[library.chunking]
max_words = 5000
"""

_REPEATED = " ".join([PATTERN] * (REPEAT_WORDS // 2))
# Library ``repeat`` (see the module docstring); its config goes in ``repeat.toml``.
REPEAT_TREE = Tree(
    REPEAT_CONFIG,
    {
        "repeat": Site(
            {f"p{i}.md": f"# Page {i}\n\n{_REPEATED}\n" for i in range(REPEAT_PAGES)},
            "# Repeat\n\n> Repeated text.\n\n## Pages\n\n"
            + "".join(f"- [Page {i}](p{i}.md)\n" for i in range(REPEAT_PAGES)),
        )
    },
)

# The environment variable naming the file a server run by ``cli_script`` creates as a search starts.
SEARCH_STARTED = "DOCBUNDLE_TEST_SEARCH_STARTED"


def cli_script(*setup: str) -> str:
    """A ``python -c`` script: the docbundle CLI on argv[2:], the search time budget set to argv[1] seconds,
    after the ``setup`` lines. With ``SEARCH_STARTED`` in its environment, it creates that file as a
    search begins (in the tool's worker thread): a test waits for it (``wait_for_search``), not a sleep.
    """
    return "\n".join(
        [
            "import os, sys",
            "import docbundle.bundle.search as engine",
            "import docbundle.server.docs as docs",
            "docs.SEARCH_TIME_BUDGET = float(sys.argv[1])",
            f"started, search = os.environ.get({SEARCH_STARTED!r}), engine.BundleSearcher.search",
            "def marked(self, *args, **kwargs):",
            "    open(started, 'a').close()",
            "    return search(self, *args, **kwargs)",
            "if started:",
            "    engine.BundleSearcher.search = marked",
            *setup,
            "from docbundle.server.cli import main",
            "sys.exit(main(sys.argv[2:]))",
        ]
    )


# The CLI with the search time budget raised, so that a heavy call is still running when the test acts
# (the budget itself is held by test_server_limits.py).
LONG_BUDGET = cli_script()


def wait_for_search(started: Path, server: subprocess.Popen[Any] | None = None, timeout: float = 30) -> None:
    """Wait, at most ``timeout`` seconds, until a ``cli_script`` server has created ``started``: a search
    is running. Fails at once if ``server`` exits first."""
    deadline = time.monotonic() + timeout
    while not started.exists():
        assert server is None or server.poll() is None, "the server exited before any search started"
        assert time.monotonic() < deadline, f"no search started within {timeout} s"
        time.sleep(0.01)


def phrase_query(chars: int) -> str:
    """Four quoted phrases filling ``chars`` characters: the pattern repeated, then "pong pong".

    Every chunk holds both words, every "ping" starts a match that follows the pattern to the end of
    the phrase, and none matches (the text never says "pong pong"): the most steps a phrase can cost.
    """
    each = (chars - 8) // 4 - 2
    repeats = (each - len(" pong pong")) // (len(PATTERN) + 1)
    phrase = " ".join([PATTERN] * repeats) + " pong pong"
    return " ".join(f'"{phrase}"' for _ in range(4))


def install_damaged_store(root: Path, library_id: str) -> Path:
    """A golden copy whose document store is garbled but whose manifest lists the garbled bytes.

    It passes verification (every file matches the manifest) and whoosh opens it; reading a
    document record fails. Returns the bundle directory.
    """
    bundle = install_golden(root, library_id)
    store = bundle / "docs.bin"
    data = bytearray(store.read_bytes())
    for i in range(0, len(data), 7):
        data[i] ^= 0x5A
    store.write_bytes(bytes(data))
    manifest = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    files = [
        msgspec.structs.replace(f, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        if f.path == "docs.bin"
        else f
        for f in manifest.files
    ]
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(manifest, files=files)))
    return bundle
