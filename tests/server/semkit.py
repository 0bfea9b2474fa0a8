"""Bundles with semantic vectors for the server tests: built with the indexer, embedded with the real model
(``treekit.add_vectors``). ``SEMANTIC_TREE`` (built by ``treekit.build``), with ``install_golden`` beside
it, makes::

    <root>/pay/latest/<build>/       six short payment pages, with vectors
    <root>/garden/latest/<build>/    three gardening pages, with vectors
    <root>/stale/latest/<build>/     the pay pages, vectors made by "another embedder" (an older version)
    <root>/golden/latest/<build>/    the golden bundle: no vectors

The question ``PARAPHRASE`` shares no word with the page that answers it (``pay``'s refunds page), while
``send`` matches two other pages: keyword search finds those, meaning finds the refunds page.
"""

from __future__ import annotations

from treekit import Site, Tree

PARAPHRASE = "send cash back to a customer who was billed twice"
ANSWER = "refunds.md"

PAY = {
    "refunds.md": "# Refunds\n\nCall the refund endpoint with the charge id to reverse a charge. Partial refunds "
    "are allowed until the full amount has been reversed.\n",
    "webhooks.md": "# Webhooks\n\nRegister an HTTPS endpoint and the platform posts an event to it whenever a "
    "charge changes state. Verify the signature header of each event.\n",
    "limits.md": "# Rate limits\n\nEach API key may send 100 requests per second. Over that, the API answers "
    "with status 429 and a Retry-After header.\n",
    "auth.md": "# Authentication\n\nSend your secret key in the Authorization header of every request. Never "
    "embed the secret key in a mobile app.\n",
    "pagination.md": "# Pagination\n\nList endpoints return at most 50 objects. Pass the cursor of the "
    "previous page to fetch the next one.\n",
    "payouts.md": "# Payouts\n\nMoney you earn is paid out to your bank account every day. A buyer's card "
    "payment reaches your balance after two days.\n",
}
GARDEN = {
    "watering.md": "# Watering\n\nSoak the soil each morning until it is damp; ferns like it wetter than cacti.\n",
    "pruning.md": "# Pruning\n\nCut dead stems in early spring, just above a healthy bud.\n",
    "compost.md": "# Compost\n\nLayer kitchen scraps with dry leaves and turn the heap every week.\n",
}
CONFIG = """
[[library]]
id = "pay"
name = "Pay API"
llms_txt = "pay/llms.txt"
[library.chunking]
min_words = 3

[[library]]
id = "stale"
name = "Pay API (stale vectors)"
llms_txt = "pay/llms.txt"
[library.chunking]
min_words = 3

[[library]]
id = "garden"
name = "Garden guide"
llms_txt = "garden/llms.txt"
[library.chunking]
min_words = 3
"""


def _llms(title: str, pages: dict[str, str]) -> str:
    links = "".join(f"- [{text.splitlines()[0][2:]}]({rel})\n" for rel, text in pages.items())
    return f"# {title}\n\n> {title} docs.\n\n## Docs\n\n{links}"


# The tree the module docstring draws (the golden copy aside): every library with vectors, ``stale``'s
# made by "another embedder" (an older version of it).
SEMANTIC_TREE = Tree(
    CONFIG,
    {"pay": Site(PAY, _llms("Pay API", PAY)), "garden": Site(GARDEN, _llms("Garden guide", GARDEN))},
    vectors={"pay": None, "stale": "0.0.1", "garden": None},
)
