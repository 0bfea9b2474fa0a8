"""Where bundles and API keys live when no flag says: one place shared by ``docbundle`` and
``docbundle-index``.

Bundles: ``$DOCBUNDLE_BUNDLES``, else the per-user data folder (``platformdirs``; on Linux
``~/.local/share/docbundle/bundles``, or under ``$XDG_DATA_HOME``). API keys: ``$DOCBUNDLE_KEYS``, else
``keys.toml`` in the per-user config folder (on Linux ``~/.config/docbundle/keys.toml``).
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_config_path, user_data_path

__all__ = ["APP", "ENV_BUNDLES", "ENV_KEYS", "bundles_origin", "default_bundles", "default_keys"]

APP = "docbundle"
ENV_BUNDLES = "DOCBUNDLE_BUNDLES"
ENV_KEYS = "DOCBUNDLE_KEYS"


def default_bundles() -> Path:
    """The bundles folder every command uses unless ``--bundles``/``--out`` names another."""
    env = os.environ.get(ENV_BUNDLES)
    return Path(env) if env else user_data_path(APP, appauthor=False) / "bundles"


def bundles_origin() -> str:
    """Why ``default_bundles()`` is what it is, for messages: the variable, or the per-user default."""
    return f"from ${ENV_BUNDLES}" if os.environ.get(ENV_BUNDLES) else "the per-user default"


def default_keys() -> Path:
    """The API keys file ``docbundle keys`` writes and ``docbundle serve --transport http`` reads."""
    env = os.environ.get(ENV_KEYS)
    return Path(env) if env else user_config_path(APP, appauthor=False) / "keys.toml"
