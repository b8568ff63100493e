"""``python -m scenarios.published [--json FILE]``: the table of published claims."""

import sys

from pipesim.io.interrupts import reader_may_leave
from scenarios.published.table import main

if "--april-dapo" in sys.argv[1:]:  # the DAPO arm's gain over filter rates (a diagnosis, not scored)
    from scenarios.published.april import dapo_main

    raise SystemExit(reader_may_leave(lambda: dapo_main(sys.argv[1:])))
raise SystemExit(reader_may_leave(main))
