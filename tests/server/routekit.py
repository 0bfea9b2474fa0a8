"""A catalogue of many small libraries for the routing tests: each about its own subject, built for real.

``SUBJECTS`` gives each library its own words; every page also holds words all libraries share, so a
question made of shared words routes nowhere in particular and a subject's words route to its library.
"""

from __future__ import annotations

from treekit import Site, Tree

SHARED = "This guide explains the configuration, the settings and the usage of the tool in production."

SUBJECTS: dict[str, list[str]] = {
    "pgvac": ["autovacuum", "freeze", "wraparound", "tuples", "bloat"],
    "kubeops": ["kubelet", "daemonset", "tolerations", "taints", "cordon"],
    "reacthooks": ["useeffect", "usememo", "rerender", "memoization", "suspense"],
    "rustown": ["borrowck", "lifetimes", "ownership", "refcell", "mutability"],
    "gitflow": ["rebase", "cherrypick", "bisect", "reflog", "squash"],
    "tlsguide": ["handshake", "ciphersuite", "certificate", "ocsp", "pinning"],
    "mqbroker": ["exchange", "dequeue", "prefetch", "durable", "deadletter"],
    "geotiles": ["rasterize", "geojson", "tileset", "reprojection", "mercator"],
}


def subject_pages(words: list[str]) -> dict[str, str]:
    """Three pages about ``words``: each word explained in a few sentences, plus shared filler."""
    pages = {}
    for i in range(3):
        part = words[i::3] or words[:1]
        body = "\n\n".join(
            f"## {w.capitalize()}\n\nThe {w} feature matters. Tune {w} carefully; {w} interacts with "
            f"{words[(words.index(w) + 1) % len(words)]}. {SHARED}"
            for w in part
        )
        pages[f"p{i}.md"] = f"# Page {i}\n\n{SHARED}\n\n{body}\n"
    return pages


def subjects_tree(subjects: dict[str, list[str]] | None = None, *, route_index: bool = False) -> Tree:
    """One library per subject (default ``SUBJECTS``), each with its routing record; ``route_index``:
    with the route index the indexer's CLI leaves after a build."""
    subjects = subjects or SUBJECTS
    config, sites = [], {}
    for lib_id, words in subjects.items():
        pages = subject_pages(words)
        links = "".join(f"- [{name}]({name})\n" for name in pages)
        sites[lib_id] = Site(pages, f"# {lib_id}\n\n> About {', '.join(words[:2])}.\n\n## Docs\n\n{links}")
        config.append(
            f'[[library]]\nid = "{lib_id}"\nname = "{lib_id}"\nllms_txt = "{lib_id}/llms.txt"\n'
            "[library.chunking]\nmin_words = 5\n"
        )
    return Tree("\n".join(config), sites, route_index=route_index)
