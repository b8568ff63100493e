"""``python -m scenarios.published [--json FILE]``: the table of published claims."""

from pipesim.io.interrupts import reader_may_leave
from scenarios.published.table import main

raise SystemExit(reader_may_leave(main))
