"""Entry point for ``python -m mismatch``.

Importing the command loads torch, which takes seconds: Ctrl-C (or SIGTERM) then is one line and
exit status 130, not a traceback from inside torch's import. ``import mismatch`` loads nothing
heavy, so the handlers below are in place before torch starts to load.
"""

from __future__ import annotations

import os
import signal
import sys


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


for _sig in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(_sig) is not signal.SIG_IGN:  # one ignored from the start stays ignored
        signal.signal(_sig, _stop)
try:
    from mismatch.cli import main
except KeyboardInterrupt:
    print(
        "python -m mismatch: interrupted while starting (importing torch): nothing written", file=sys.stderr
    )
    sys.exit(130)

try:
    sys.exit(main())
except KeyboardInterrupt:  # between the import and main()'s own handling (parsing the flags)
    print("python -m mismatch: interrupted: nothing written", file=sys.stderr)
    sys.exit(130)
except BrokenPipeError:  # a last resort: main() drops output to a reader that left (cliio.DropOnClosedPipe)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail
    sys.exit(0)
