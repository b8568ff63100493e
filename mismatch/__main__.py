"""Entry point for ``python -m mismatch``."""

from __future__ import annotations

import os
import sys

from mismatch.cli import main

try:
    sys.exit(main())
except BrokenPipeError:  # a last resort: main() drops output to a reader that left (cli.DropOnClosedPipe)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail
    sys.exit(0)
