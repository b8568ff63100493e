"""Entry point for ``python -m mismatch``."""

from __future__ import annotations

import sys

from mismatch.cli import main

sys.exit(main())
