"""What ``pipesim run`` writes beside its summary: ``--json``, ``--events``, ``--save``, ``--html``
and ``--trace``, for a slot scenario and a compute run spec alike (:func:`write_run_outputs`).

Design: every path was checked before the run (:func:`pipesim.io.cli_common.check_output`,
:func:`~pipesim.io.cli_common.check_save_dir`), so writing is the last step and cannot fail on a
bad name; each file is written whole or not at all (:mod:`pipesim.io.interrupts`: a temporary file
beside it, then renamed), and ``wrote PATH`` is printed after each. ``--trace`` comes last: a run
whose real count of events passes :data:`pipesim.io.trace.MAX_TRACE_EVENTS` is refused there, once
the other outputs are kept (one whose lower bound passes it was refused before it ran).

Split from :mod:`pipesim.io.cli_common`, which re-exports :func:`write_run_outputs`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["write_json", "write_run_outputs"]


def write_json(target: str, payload: dict[str, Any], out: IO[str]) -> None:
    """``--json``: ``payload`` to the file ``target`` atomically, and a line on ``out`` saying so;
    ``-`` is standard output (``pipesim run`` and ``pipesim compare``)."""
    from pipesim.io.interrupts import write_text_atomic

    text = json.dumps(payload, indent=2, allow_nan=False)
    if target == "-":
        sys.stdout.write(text + "\n")
    else:
        write_text_atomic(target, text)
        print(f"wrote {target}", file=out)


def write_run_outputs(
    args: Any,
    result: Any,
    out: IO[str],
    payload: dict[str, Any] | None,
    *,
    saved: str,
    html_page: Callable[[], str],
    save: Callable[[str], object] | None = None,
) -> None:
    """What ``pipesim run`` writes beside its summary, for a slot scenario and a run spec alike:
    ``--json`` (``payload``; ``-`` is stdout), ``--events`` (CSV or Parquet), ``--save`` (``saved``
    is the line it prints; ``save(path)`` where the run saves more than its tables), ``--html``
    (``html_page()``) and, last, ``--trace`` (a run whose lower bound of events passes
    :data:`pipesim.io.trace.MAX_TRACE_EVENTS` is refused before it runs; one whose real count
    passes it, here, once the others are written), each atomically."""
    from pipesim.io.interrupts import write_atomic, write_text_atomic

    if args.json and payload is not None:
        write_json(args.json, payload, out)
    if args.events:
        ev = result.events
        if Path(args.events).suffix.lower() == ".parquet":
            write_atomic(args.events, lambda p: ev.to_parquet(p, index=False))
        else:
            write_atomic(args.events, lambda p: ev.to_csv(p, index=False))
        print(f"wrote {args.events}", file=out)
    if args.save:
        (save or result.save)(args.save)
        print(saved, file=out)
    if args.html:
        write_text_atomic(args.html, html_page())
        print(f"wrote {args.html}", file=out)
    if args.trace:  # last: a run too large to trace is refused after the other outputs are kept
        from pipesim.io.trace import flows_note, write_trace

        write_atomic(args.trace, lambda p: write_trace(result, p))
        print(f"wrote {args.trace}{flows_note(getattr(result, 'trained', None))}", file=out)
