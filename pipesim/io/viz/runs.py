"""What the run views accept, and how their legends name a run's versions.

* :func:`run_of` -- the run a view draws: a ``RunResult`` or a run loaded with :func:`pipesim.load`
  as it is, a ``ComputeRun``'s ``result``. Anything else (a path, the events table, None) is a
  :class:`~pipesim.core.validate.FieldTypeError` naming the argument; before, it failed deep inside
  a view with an ``AttributeError`` that named nothing.
* :func:`named_runs` -- the runs :func:`pipesim.io.viz.timelines` stacks, by title: a mapping, a
  list (one scenario name twice keeps both runs), or one run on its own.
* :func:`band_label` -- a version band's legend label, ending at the newest version the run has.
* :func:`eta_bounds` -- what ``max_staleness`` bounds in a scenario, as the marks and lines say it.

The timeline and the aggregate view both import it, so a bad argument reads the same in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from pipesim.core.port import StalenessPromise
from pipesim.core.validate import FieldError, FieldTypeError, refuse, shown
from pipesim.io.viz.palette import version_band
from pipesim.policies.base import OwnStalenessBound

__all__ = ["band_label", "eta_bounds", "named_runs", "run_of"]


def run_of(value: Any, field: str = "result") -> Any:
    """``value`` as a run the views draw (see the module docstring); ``field`` names it."""
    if hasattr(value, "result") and hasattr(value, "timelines"):  # a ComputeRun
        value = value.result
    if all(hasattr(value, a) for a in ("events", "episode_table", "scenario", "sim_time_s")):
        return value
    hint = "; pipesim.load(path) reads a saved run" if isinstance(value, str | PurePath) else ""
    got = f"got {type(value).__name__} {shown(value)}{hint}"
    raise refuse(field, f"must be a RunResult or a run loaded with pipesim.load, {got}", FieldTypeError)


def named_runs(results: Any) -> dict[str, Any]:
    """The runs to draw by title: a mapping's keys; a list's scenario names (a name given twice
    gets its place, ``"sync (2)"``: the second run replaced the first); one run on its own."""
    if hasattr(results, "events") or hasattr(results, "timelines"):  # one run: as timeline(result)
        results = [results]
    if isinstance(results, Mapping):
        named = {k: run_of(r, f"results[{shown(k)}]") for k, r in results.items()}
    elif isinstance(results, Iterable) and not isinstance(results, str | bytes):
        named = {}
        for i, r in enumerate(results):
            run = run_of(r, f"results[{i}]")
            key = run.scenario.name
            named[key if key not in named else f"{key} ({i + 1})"] = run
    else:
        got = f"got {type(results).__name__} {shown(results)}"
        raise refuse("results", f"must be a RunResult, or a list or dict of them, {got}", FieldTypeError)
    if not named:  # the field is the argument (results), an item its key: results['sync']
        raise FieldError("timelines: results needs at least one RunResult", "results")
    return named


def band_label(version: int, n_versions: int) -> tuple[int, int, str]:
    """:func:`~pipesim.io.viz.palette.version_band`, its label ending at the newest version of a
    palette of ``n_versions`` (:func:`~pipesim.io.viz.palette.n_versions_of`: the newest + 2; a
    3,000-version run's last band read v2961-v3001)."""
    lo, hi, label = version_band(version, n_versions)
    top = max(min(hi, n_versions - 2), lo)
    return lo, hi, label if hi == lo else (f"v{lo}" if top == lo else f"v{lo}-v{top}")


def eta_bounds(scenario: Any) -> str | None:
    """What the pipeline's ``max_staleness`` (eta) bounds in ``scenario``, as the figures label it:
    ``"staleness"`` where a policy promises that no trained episode is staler than eta
    (:class:`~pipesim.core.port.StalenessPromise`: ``DropStale``, ``Drain`` under the count
    throttle); ``"admission"`` where it paces only the starts (the count throttle with a partial
    rollout: staleness counts from the version an episode started under, so one continued across
    updates trains staler than eta by design); None where the admission rule has a bound of its own
    and never reads eta (:class:`~pipesim.policies.base.OwnStalenessBound`)."""
    eta = int(scenario.pipeline.max_staleness)
    for policy in (scenario.admission, scenario.weight_update, scenario.batching):
        if isinstance(policy, StalenessPromise):
            bound = policy.staleness_bound(scenario)
            if bound is not None and bound <= eta:
                return "staleness"
    return None if isinstance(scenario.admission, OwnStalenessBound) else "admission"
