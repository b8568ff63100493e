"""``pipesim sweep`` over a preset's own parameters (``--over max_head_offpolicyness=0,2,4`` of
``systems:areal``), and its ``--resume`` option.

Design: an axis over a parameter of the scenario's factory, or over a key it sizes its task pool
by, cannot be a field change of one scenario: each value is a design, built by the factory
(:func:`preset_grid`). Each design's label names its values (``max_head_offpolicyness=0,
max_concurrent_rollouts=32``), one column; :func:`with_knobs` adds a column per such axis, so the
CSV says what each cell changed as for a scenario's own keys, and the page draws a figure
against each (it drew none: the axes had left ``--over``). An axis over a field that such a
parameter sets is refused (:func:`check_knob_axes`), as a ``--set`` of it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipesim.core.errors import shown
from pipesim.io.cli_common import UsageError, one_line, split_values

__all__ = ["check_knob_axes", "preset_designs", "preset_grid", "with_knobs"]


def _axis(item: str, seen: Sequence[str]) -> tuple[str, str]:
    """``KEY=V1,V2,...`` of one ``--over``, checked: a key given twice, or ``seed``, is an error."""
    if "=" not in item:
        raise UsageError(f"--over {shown(item)} is not key=v1,v2,...")
    key, values = (s.strip() for s in item.split("=", 1))
    if key in seen:
        raise UsageError(f"--over {key} is given twice; list every value once: --over {key}=v1,v2,...")
    if key == "seed":
        raise UsageError(
            "--over seed: a sweep runs N seeds in every cell (the scenario's seed, then the next "
            "N-1: --set seed=S starts at S); set N with --seeds"
        )
    parts = split_values(values, keep_empty=True)
    if len(parts) > 1 and "" in parts:  # 0,,1 ran cells 0 and 1 without a word
        raise UsageError(f"--over {key}: an empty value in {shown(values)}")
    return key, values


def preset_designs(entry: Any, sets: Sequence[str], items: Sequence[str]) -> dict[str, Any]:
    """``--over`` axes over the factory's parameters (``max_head_offpolicyness=1,2,4`` of
    ``systems:areal``), and over the keys it sizes its task pool by (``steps``: :data:`POOL_KEYS`):
    one design per combination, built by the factory and labelled by it."""
    return preset_grid(entry, sets, items)[0]


def preset_grid(
    entry: Any, sets: Sequence[str], items: Sequence[str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """:func:`preset_designs`, and per design the value of each axis it was built with (labelled
    as a grid value, :func:`~pipesim.io.overrides.cell_label`: ``none`` for None, as the design's
    label says; a raw None was NaN in the tables and the figures): the columns :func:`with_knobs`
    adds, since a design's label (``max_head_offpolicyness=0, max_concurrent_rollouts=32``) is
    one column, and the sweep's figures and a reader of its CSV need one per axis."""
    import itertools
    from functools import partial

    from pipesim.io.overrides import POOL_KEYS, cell_label
    from pipesim.io.registry import build, parse_parameter, parse_value

    scen, _ = build(entry, list(sets))
    axes: dict[str, list[str]] = {}
    typed: dict[str, list[Any]] = {}
    for item in items:
        key, values = _axis(item, list(axes))
        axes[key] = split_values(values)
        if not axes[key]:
            raise UsageError(f"--over {key}: no values given")
        try:  # a pool key (steps: the preset sizes its pool by it) is read as the scenario's
            read = partial(parse_value, scen) if key in POOL_KEYS else partial(parse_parameter, entry)
            parsed = [read(key, v) for v in axes[key]]
        except ValueError as exc:
            raise UsageError(one_line(exc)) from None
        if len(set(map(repr, parsed))) != len(parsed):  # 1 and 01 are one value
            raise UsageError(f"--over {key}: a value is given twice")
        typed[key] = [cell_label(v) for v in parsed]
    designs: dict[str, Any] = {}
    knobs: dict[str, dict[str, Any]] = {}
    picks = itertools.product(*(range(len(v)) for v in axes.values()))
    for combo in picks:
        pairs = [f"{k}={axes[k][i]}" for k, i in zip(axes, combo)]
        name = ", ".join(pairs)
        try:
            designs[name], _ = build(entry, [*sets, *pairs])
        except ValueError as exc:
            raise UsageError(one_line(exc)) from None
        knobs[name] = {k: typed[k][i] for k, i in zip(axes, combo)}
    return designs, knobs


def with_knobs(res: Any, knobs: Mapping[str, Mapping[str, Any]]) -> Any:
    """``res`` with a column per preset axis (:func:`preset_grid`) after ``design``, each a key of
    the result: the CSV says what each cell changed, as for a scenario's own keys, and the page
    draws a figure against each. Unchanged where no axis is a preset's."""
    from pipesim.io.sweep_grid import SweepResult

    names = list(dict.fromkeys(k for v in knobs.values() for k in v))
    if not names or any(n in res.runs.columns for n in names):
        return res
    runs = res.runs.copy()
    at = list(runs.columns).index("design") + 1
    for i, name in enumerate(names):
        runs.insert(at + i, name, [knobs[d][name] for d in runs["design"]])
    keys = ("design", *names, *(k for k in res.keys if k != "design"))
    return SweepResult(runs, keys, res.metrics, res.nonnegative, res.shares)


def check_knob_axes(entry: Any, sets: Sequence[str], knobs: Mapping[str, Any], keys: list[str]) -> None:
    """An axis over a field that another axis, over a preset parameter, sets is refused as a
    ``--set`` of the parameter is (:func:`~pipesim.io.overrides.check_axes_kept`): ``--over
    max_head_offpolicyness=0,2 --over max_staleness=0,1`` ran eta 0 at staleness 1 without a word."""
    from pipesim.io.overrides import check_axes_kept

    if not keys:
        return
    for values in knobs.values():
        for key, value in values.items():
            if key in entry.parameters():
                try:
                    check_axes_kept(entry, [*sets, f"{key}={value}"], keys)
                except ValueError as exc:
                    raise UsageError(f"--over: {one_line(exc)}") from None
