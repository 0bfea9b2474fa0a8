"""The bounds of the operations' arguments: how many hits, how many tokens, how wide a window.

Imports nothing: the tools' schemas and checks (``models``, ``docs``) and the ``docbundle`` command's
``--help`` (which must not load pydantic) read the same numbers.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_WINDOW",
    "LIST_MAX_TOKENS",
    "MAX_LIMIT",
    "MAX_MAX_TOKENS",
    "MAX_WINDOW",
    "MIN_MAX_TOKENS",
]

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
DEFAULT_MAX_TOKENS = 5000
LIST_MAX_TOKENS = 2000  # list_libraries' page: its text and its JSON together stay under ~16 KB
MIN_MAX_TOKENS = 500
MAX_MAX_TOKENS = 50_000
DEFAULT_WINDOW = 1
MAX_WINDOW = 5
