"""``python -m pipesim`` runs the command line (see :mod:`pipesim.io.cli`)."""

from __future__ import annotations

import sys

from pipesim.io.cli import main

if __name__ == "__main__":
    sys.exit(main())
