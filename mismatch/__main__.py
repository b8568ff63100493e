"""Entry point for ``python -m mismatch``."""

from __future__ import annotations

import os
import sys

from mismatch.cli import main

try:
    sys.exit(main())
except BrokenPipeError:  # `python -m mismatch ... | head`: the reader left; nothing to report
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - held until the interpreter exits
    sys.exit(0)
