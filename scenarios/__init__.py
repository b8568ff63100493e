"""Ready-made scenarios.

* :mod:`scenarios.chapter13` -- every pipeline table of chapter 13 (``python -m scenarios.chapter13``);
* :mod:`scenarios.systems` -- presets of real systems' scheduling policies.
"""
