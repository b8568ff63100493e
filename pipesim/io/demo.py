"""``make demo``: print the chapter's design table and write ``report.html``.

The table is computed the chapter's way, with :func:`pipesim.simulate_pipeline` on the chapter's
pool (``agent_episode_durations(65_536, torch.Generator().manual_seed(0))``), 64 slots, B=64,
60 s of training, 10 s of sync and 20 steps; the chapter's numbers are printed in brackets. Then
the full offline report (:mod:`pipesim.io.report`) is written to the current directory.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Print the table, write the report; 130 after one line on Ctrl-C or SIGTERM (the report is
    written whole or not at all, so an interrupt leaves the old page or none)."""
    import argparse

    from pipesim.io.interrupts import sigterm_as_interrupt

    doc = (__doc__ or "").splitlines()[0]
    ap = argparse.ArgumentParser(prog="python -m pipesim.io.demo", description=doc)
    ap.add_argument("out", nargs="?", default="report.html", help="the report to write (default report.html)")
    out = Path(ap.parse_args(argv).out)
    try:
        with sigterm_as_interrupt():
            from pipesim.io.report import build_report, chapter_pool, design_table, format_design_table

            print("Chapter 13 design table, reproduced by pipesim (chapter's numbers in brackets):\n")
            print(format_design_table(design_table(chapter_pool())))
            what = "Figures 13.1 and 13.2, design, sync-time, timeout and straggler tables"
            print(f"\nwriting the report ({what})...")
            path = build_report(out)
    except KeyboardInterrupt:
        kept = "the old one is unchanged" if out.exists() else "none was written"
        print(f"make demo: interrupted before {out} was written; {kept}", file=sys.stderr, flush=True)
        return 130
    print(f"\nreport written to {path.resolve()}\nopen it in a browser; it needs no network.")
    return 0


if __name__ == "__main__":
    from pipesim.io.interrupts import ignore_interrupts_at_exit, reader_may_leave

    status = reader_may_leave(lambda: main(sys.argv[1:]))
    ignore_interrupts_at_exit()  # said and written: a late Ctrl-C cannot change the status
    sys.exit(status)
