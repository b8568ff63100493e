"""Entry point for ``python -m mismatch``.

Importing the command loads torch, which takes seconds: Ctrl-C (or SIGTERM) then is one line and
exit status 130, not a traceback from inside torch's import. ``import mismatch`` loads nothing
heavy, so the handlers below are in place before torch starts to load. Both the import and the
command run under :func:`mismatch.finalizer_stop.stops_from_finalizers` (standard library only): a
stop whose handler ran inside a finalizer (a ``__del__`` the garbage collector ran during the
import) was printed as "Exception ignored" and lost, and the probe ran; it is raised again in the
main code, the same one line and 130.
"""

from __future__ import annotations

import os
import signal
import sys

from mismatch.finalizer_stop import stops_from_finalizers

_CAME: list[int] = []
"""The stop signals that came: an error out of the import after one came is that stop (C code such
as numpy's turns a KeyboardInterrupt raised while it imports into its own ImportError)."""


def _stop(signum: int, frame: object) -> None:
    _CAME.append(signum)
    raise KeyboardInterrupt


for _sig in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(_sig) is not signal.SIG_IGN:  # one ignored from the start stays ignored
        signal.signal(_sig, _stop)
try:
    with stops_from_finalizers():  # a stop raised in a __del__ is raised again here
        from mismatch.cli import main
except (KeyboardInterrupt, Exception) as _error:
    if not isinstance(_error, KeyboardInterrupt) and not _CAME:  # an import that failed on its own
        raise
    print(
        "python -m mismatch: interrupted while starting (importing torch): nothing written", file=sys.stderr
    )
    sys.exit(130)

try:
    with stops_from_finalizers():  # parsing the flags, before main() sets its own handlers
        sys.exit(main())
except KeyboardInterrupt:  # between the import and main()'s own handling (parsing the flags)
    print("python -m mismatch: interrupted: nothing written", file=sys.stderr)
    sys.exit(130)
except BrokenPipeError:  # a last resort: main() drops output to a reader that left (cliio.DropOnClosedPipe)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail
    sys.exit(0)
