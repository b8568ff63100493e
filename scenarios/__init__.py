"""Ready-made scenarios.

* :mod:`scenarios.chapter13` -- every pipeline table of chapter 13 (``python -m scenarios.chapter13``);
* :mod:`scenarios.systems` -- presets of real systems' scheduling policies.

They reach ``pipesim list`` / ``pipesim run`` through the ``pipesim.scenarios`` entry-point group
declared in ``pyproject.toml`` (``chapter13 = "scenarios.chapter13"``, ``systems =
"scenarios.systems:PRESETS"``), listed as ``chapter13:NAME`` and ``systems:NAME``; pipesim itself
never imports this package by name. Another package registers its own scenarios the same way.
"""
