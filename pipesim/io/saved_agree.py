"""scenario.json against itself and the tables: a field removed or edited is refused, not
loaded as its default (used by :mod:`pipesim.io.saved`).

A saved run writes every field of its scenario, so the loaded scenario must be the one that ran:

- :func:`check_scenario`: every key the scenario has, written back (``scenario_to_dict``), is in
  ``scenario.json`` where the run's ``scenario_repr`` (the scenario as it ran) names that field; a
  field missing is refused by its dotted path (``scenario.pipeline.n_slots``), not read as its
  default. The loaded scenario's repr must then equal ``scenario_repr`` field by field (compared as
  parsed Python expressions, so an edit of a value or of the repr is named by path), and the
  top-level ``pipeline`` block must equal the scenario's pipeline. A field the repr does not name
  is not required: a run saved before that field existed (the format-1 fixture has no
  ``pool_draw``) loads with its default, as it ran. A slot that stands in for a policy this
  process cannot build, and the name of such a stand-in, are not compared.
- :func:`check_scenario_tables`: what the tables determine exactly: one ``train`` event per step
  (every run that is saved has finished its ``steps``; one that cannot finish raises), and no
  episode on a slot at or above ``n_slots``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.saved_files import reading

__all__ = ["check_scenario", "check_scenario_tables"]

_OPAQUE = re.compile(r"<[^<>]*>")  # an object's default repr (its address differs per process)
_NUMPY = re.compile(r"\bnp\.(?:float|int|uint|bool_)\w*\(([^()]*)\)")  # numpy 2 scalar reprs


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(_NUMPY.sub(r"\1", _OPAQUE.sub("_opaque_", text)), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _keywords(node: ast.expr | None) -> dict[str, ast.expr] | None:
    if isinstance(node, ast.Call):
        return {k.arg: k.value for k in node.keywords if k.arg is not None}
    return None


def _paths(node: ast.expr | None, prefix: str = "") -> set[str]:
    """The dotted keyword paths of a repr (``pipeline.n_slots``, ``durations.tool_median_s``)."""
    kw = _keywords(node)
    if kw is None:
        return set()
    out = set()
    for k, v in kw.items():
        out.add(prefix + k)
        out |= _paths(v, f"{prefix}{k}.")
    return out


def _first_diff(saved: ast.expr, now: ast.expr, prefix: str, skip: set[str]) -> tuple[str, str, str] | None:
    """The first field (dotted path) whose value differs: (path, saved text, loaded text)."""
    s_kw, n_kw = _keywords(saved), _keywords(now)
    same_call = s_kw is not None and n_kw is not None and ast.dump(saved.func) == ast.dump(now.func)  # type: ignore[attr-defined]
    if not same_call or s_kw is None or n_kw is None:
        if ast.dump(saved) == ast.dump(now):
            return None
        return prefix.rstrip(".") or "scenario", ast.unparse(saved), ast.unparse(now)
    for k, v in s_kw.items():
        if prefix + k in skip or k not in n_kw:  # a field removed from pipesim since the save
            continue
        if (d := _first_diff(v, n_kw[k], f"{prefix}{k}.", skip)) is not None:
            return d
    return None


def _data_paths(data: Any, prefix: str = "") -> list[str]:
    if not isinstance(data, dict):
        return []
    out = []
    for k, v in data.items():
        out.append(prefix + str(k))
        out += _data_paths(v, f"{prefix}{k}.")
    return out


def check_scenario(path: Path, sc: dict[str, Any], scenario: Any, missing: list[Any], key: str) -> None:
    """Refuse a scenario.json whose scenario lacks a field, or disagrees with its ``scenario_repr``
    or its ``pipeline`` block, naming the file and the field's dotted path (see the module
    docstring). ``key`` is where the scenario was read (``scenario``, ``scenario_partial``, or
    ``pipeline`` for a run that kept only its pipeline); ``missing`` its stand-ins."""
    from pipesim.io.saved_scenario import _Without
    from pipesim.io.scenario_files import scenario_to_dict

    skip = {m.slot for m in missing} | ({"name"} if missing else set())
    with reading(path):
        text = sc.get("scenario_repr")
        if not isinstance(text, str):
            raise FieldError(
                f"scenario_repr must be the scenario's repr (text), got {shown(text)}", "scenario_repr"
            )
        saved = _parse(text)
        saved_kw = _keywords(saved)
        if saved is None or saved_kw is None or "pipeline" not in saved_kw:
            raise FieldError(
                f"scenario_repr is not the repr of a Scenario: {shown(text[:80])} "
                "(edited, or not written by save)",
                "scenario_repr",
            )
        named = _paths(saved)
        if key != "pipeline":
            written = set(_data_paths(sc[key]))
            want = scenario_to_dict(_Without(scenario, skip) if skip else scenario)  # type: ignore[arg-type]
            for p in _data_paths(want):
                top = p.split(".")[0]
                if top not in skip and p in named and p not in written:
                    raise FieldError(
                        f"lacks {key}.{p} (a saved run writes every field; it would load as its "
                        "default, not as the run's value)",
                        f"{key}.{p}",
                    )
        now = _parse(repr(scenario))
        if now is not None and (d := _first_diff(saved, now, "", skip)) is not None:
            where, was, got = d
            raise FieldError(
                f"{key}.{where} loads as {got}, but scenario_repr (the scenario that ran) says {was} "
                "(edited, or not written by save)",
                f"{key}.{where}",
            )
        _check_pipeline_block(sc, scenario, named)


def _check_pipeline_block(sc: dict[str, Any], scenario: Any, named: set[str]) -> None:
    block = sc.get("pipeline")
    if not isinstance(block, dict):
        raise FieldError(
            f"pipeline must be the pipeline's fields (an object), got {shown(block)}", "pipeline"
        )
    have = dataclasses.asdict(scenario.pipeline)
    for k, v in block.items():
        if k not in have:
            raise FieldError(f"pipeline names {shown(k)}, not a field of the pipeline", f"pipeline.{k}")
        if type(v) is not type(have[k]) and not (isinstance(v, int | float) and isinstance(have[k], float)):
            raise FieldError(
                f"pipeline.{k} is {shown(v)}, but scenario.pipeline.{k} is {shown(have[k])}", f"pipeline.{k}"
            )
        if v != have[k]:
            raise FieldError(
                f"pipeline.{k} is {shown(v)}, but scenario.pipeline.{k} is {shown(have[k])}", f"pipeline.{k}"
            )
    for k in have:
        if k not in block and f"pipeline.{k}" in named:
            raise FieldError(f"pipeline lacks {k} (a saved run writes every field)", f"pipeline.{k}")


def check_scenario_tables(
    directory: Path, scenario: Any, events: pd.DataFrame, episodes: pd.DataFrame
) -> None:
    """Refuse a scenario that the tables contradict exactly: its ``steps`` against the ``train``
    events, its ``n_slots`` against the episodes' slots."""
    pipe = scenario.pipeline
    with reading(directory / "scenario.json"):
        n_train = int((events["kind"].astype(str) == "train").sum())
        if n_train != pipe.steps:
            raise FieldError(
                f"scenario.pipeline.steps is {pipe.steps}, but events.parquet holds {n_train} train "
                "events (a saved run has trained all its steps; edited, or not written by save)",
                "scenario.pipeline.steps",
            )
        top = int(episodes["slot"].max()) if len(episodes) and "slot" in episodes.columns else -1
        if top >= pipe.n_slots:
            raise FieldError(
                f"scenario.pipeline.n_slots is {pipe.n_slots}, but episodes.parquet runs an episode "
                f"on slot {top} (edited, or not written by save)",
                "scenario.pipeline.n_slots",
            )
