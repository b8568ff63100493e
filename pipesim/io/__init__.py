"""Entry points and tools on top of the kernel.

:mod:`~pipesim.io.api` (``run``, ``simulate_pipeline``), :mod:`~pipesim.io.registry` (named
scenarios), :mod:`~pipesim.io.sweeps`, :mod:`~pipesim.io.cli`, :mod:`~pipesim.io.report`,
:mod:`~pipesim.io.trace` (Perfetto), :mod:`~pipesim.io.scenario_files` (TOML / YAML) and
:mod:`~pipesim.io.viz` (Plotly figures).
"""
