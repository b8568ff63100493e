"""Compact HTML tables of a scenario and of a run, for notebooks (``_repr_html_``).

:func:`attach_views` gives :class:`~pipesim.Scenario` and :class:`~pipesim.RunResult` their
``_repr_html_`` (what Jupyter calls to draw an object): ``pipesim/__init__.py`` calls it once, at
the edge where the layers are composed, so the config and results layers never import io (the
notebook view belongs to presentation, which sits above them). The tables are plain HTML with
inline styles (no scripts), escaped.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

from pipesim.config import Scenario

__all__ = ["HEADLINE_KEYS", "attach_views", "run_html", "scenario_html"]

HEADLINE_KEYS = (
    ("throughput_per_hour", "episodes / hour"),
    ("gen_util", "slot utilisation"),
    ("staleness_mean", "staleness mean"),
    ("staleness_max", "staleness max"),
    ("length_bias", "length bias"),
    ("episodes_trained", "episodes trained"),
    ("episodes_launched", "episodes launched"),
    ("episodes_discarded", "dropped"),
    ("episodes_failed", "failed"),
    ("episodes_truncated", "timed out"),
    ("trainer/idle_ratio", "trainer idle"),
    ("sim_time_s", "simulated seconds"),
)
_TABLE = 'style="border-collapse:collapse;font:12px sans-serif;text-align:left"'
_CELL = 'style="padding:1px 8px;border-bottom:1px solid #eee;vertical-align:top"'


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _rows(pairs: list[tuple[str, Any]]) -> str:
    return "".join(
        f"<tr><th {_CELL}>{html.escape(k)}</th><td {_CELL}>{html.escape(_fmt(v))}</td></tr>" for k, v in pairs
    )


def _table(title: str, pairs: list[tuple[str, Any]]) -> str:
    caption = f'<caption style="text-align:left;font-weight:bold">{html.escape(title)}</caption>'
    return f"<table {_TABLE}>{caption}{_rows(pairs)}</table>"


def scenario_pairs(scenario: Scenario) -> list[tuple[str, Any]]:
    """(label, value) rows: the pipeline's fields, then each policy by its repr."""
    p = scenario.pipeline
    pairs: list[tuple[str, Any]] = [(f.name, getattr(p, f.name)) for f in dataclasses.fields(p)]
    for name in ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas"):
        value = getattr(scenario, name)
        if value is not None:
            pairs.append((name, repr(value)))
    pairs += [("seed", scenario.seed), ("pool_size", scenario.pool_size or scenario.default_pool_size)]
    return pairs


def scenario_html(scenario: Scenario) -> str:
    """The scenario as a two-column table (field, value)."""
    return _table(f"Scenario {scenario.name}", scenario_pairs(scenario))


def run_html(result: Any) -> str:
    """A run (RunResult or a loaded SavedRun) as its headline numbers beside its scenario."""
    s = result.summary()
    head = [(label, s[k]) for k, label in HEADLINE_KEYS if k in s]
    pool = getattr(result, "pool", None)
    if pool is not None:
        head.append(("durations", f"a pool of {len(pool):,} given to run (not the scenario's model)"))
    if not getattr(result, "scenario_exact", True):
        head.append(("policies as run", result.scenario_repr))
    scen = result.scenario
    cell = 'style="vertical-align:top;padding-right:24px"'
    return (
        f"<div><table><tr><td {cell}>{_table(f'Run of {scen.name}', head)}</td>"
        f"<td {cell}>{scenario_html(scen)}</td></tr></table></div>"
    )


def attach_views() -> None:
    """Give scenarios and runs their notebook view: ``_repr_html_`` is :func:`scenario_html` on
    :class:`~pipesim.Scenario` and :func:`run_html` on :class:`~pipesim.RunResult` (each called with
    the object, as a method is). Idempotent."""
    from pipesim.results.run import RunResult

    setattr(Scenario, "_repr_html_", scenario_html)  # noqa: B010 - a class attribute set from io
    setattr(RunResult, "_repr_html_", run_html)  # noqa: B010
