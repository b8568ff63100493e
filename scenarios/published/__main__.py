"""``python -m scenarios.published [--json FILE]``: the table of published claims."""

from scenarios.published.table import main

raise SystemExit(main())
