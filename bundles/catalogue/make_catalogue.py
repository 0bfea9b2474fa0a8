"""Render ``bundles/libraries.toml`` from the curated table beside this script.

The catalogue is data a person reviews: ``libraries.tsv`` holds one row per library (id, name, category,
``llms_txt`` or versions, extra TOML keys, our own description, and which public list the URL came
from), and ``head.toml`` the file's header, ``[defaults]`` and the demo library. This script writes
them out as ``libraries.toml``, libraries grouped by category in the taxonomy's order (the entries that
predate the table first), so a change to the catalogue is a one-line change to the table and a
re-render. It needs nothing but this repository (not the lists the table was curated from).

    python bundles/catalogue/make_catalogue.py            # write bundles/libraries.toml
    python bundles/catalogue/make_catalogue.py --check    # exit 1 when the file differs from the table

Then ``docbundle-index check`` checks the result offline. Columns of ``libraries.tsv``:

- ``versions``: space-separated ``NAME=URL`` pairs, oldest first; the last is the latest. Empty when the
  library has one unversioned ``llms_txt``.
- ``extra``: further keys of the entry as TOML, ``; ``-separated (``max_pages = 5000``).
- ``description``: ours, or empty (the build then takes the llms.txt's summary line).
- ``source``: ``llms-txt-hub`` or ``awesome-llms-txt`` when the URL is a fact from that MIT-licensed list,
  empty when it is ours.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from docbundle.indexer.config import CATEGORIES

HERE = Path(__file__).resolve().parent
TABLE = HERE / "libraries.tsv"
HEAD = HERE / "head.toml"
OUT = HERE.parent / "libraries.toml"
COLUMNS = ["id", "name", "category", "llms_txt", "versions", "extra", "description", "source"]
#: The first rows of the table keep their order and come first: the entries the catalogue began with.
PREDATING = 10


def _string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def read_table(path: Path = TABLE) -> list[dict[str, str]]:
    """The table's rows; ValueError naming the line when a row is malformed."""
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        if reader.fieldnames != COLUMNS:
            raise ValueError(f"{path}: the header must be {' '.join(COLUMNS)}")
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        if None in row or any(value is None for value in row.values()):
            raise ValueError(f"{path}:{line}: expected {len(COLUMNS)} tab-separated columns")
        if row["category"] not in CATEGORIES:
            raise ValueError(
                f"{path}:{line}: category {row['category']!r} is not one of {', '.join(CATEGORIES)}"
            )
        if bool(row["llms_txt"]) == bool(row["versions"]):
            raise ValueError(f"{path}:{line}: give either llms_txt or versions")
    return rows


def render_entry(row: dict[str, str]) -> str:
    """One ``[[library]]`` table."""
    lines = ["[[library]]", f"id = {_string(row['id'])}", f"name = {_string(row['name'])}"]
    if row["description"]:
        lines.append(f"description = {_string(row['description'])}")
    lines.append(f"category = {_string(row['category'])}")
    if row["llms_txt"]:
        lines.append(f"llms_txt = {_string(row['llms_txt'])}")
    lines += [extra.strip() for extra in row["extra"].split(";") if extra.strip()]
    versions = row["versions"].split()
    for i, pair in enumerate(versions):
        name, _, url = pair.partition("=")
        lines += ["", "[[library.version]]", f"name = {_string(name)}", f"llms_txt = {_string(url)}"]
        if i == len(versions) - 1:
            lines.append("latest = true")
    return "\n".join(lines) + "\n"


def render(rows: list[dict[str, str]], head: str) -> str:
    """The whole catalogue: the head, the predating entries, then each category's entries by id."""
    parts = [head.rstrip("\n") + "\n"]
    first, rest = rows[:PREDATING], rows[PREDATING:]
    parts.append("\n# --- Libraries that publish an llms.txt (the catalogue's first entries). ---\n")
    parts += ["\n" + render_entry(row) for row in first]
    for category, meaning in CATEGORIES.items():
        members = sorted((row for row in rest if row["category"] == category), key=lambda row: row["id"])
        if members:
            parts.append(f"\n# --- {category}: {meaning} ({len(members)}) ---\n")
            parts += ["\n" + render_entry(row) for row in members]
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Write (or, with ``--check``, compare) ``bundles/libraries.toml``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is not the rendering")
    parser.add_argument("--out", type=Path, default=OUT, help="where the catalogue is written")
    args = parser.parse_args(argv)
    text = render(read_table(), HEAD.read_text(encoding="utf-8"))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(
                f"{args.out} differs from {TABLE.name}: run {Path(__file__).name} to re-render it",
                file=sys.stderr,
            )
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {len(read_table())} libraries from {TABLE.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
