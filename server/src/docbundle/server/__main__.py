"""``python -m docbundle.server``: the ``docbundle`` command."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
