"""Why a design is (in)feasible, as every output says it: each constraint's limit, the value the
judge read (:func:`pipesim.plan.judge.judge`), what the run measured and the verdict, and one
sentence naming the constraints that fail.

The value judged is not always the one the tables print. The mean staleness the tables print is
the whole run's, which the warm-up censors low; the judge reads the settled mean of the later
half of the run (plus any rise still under way). On a 4-turn variant of the agent spec of ``docs/plan.md``
(1,500-token median turns) split 20:44
TP 2 eta 1 partial prints a mean of 0.90 and a maximum of 3 against limits of 1 and 4, and is
infeasible because its settled mean is 1.0035. The JSON (``constraints`` of each design), the CSV
(``<constraint>_limit``, ``_judged``, ``_measured``, ``_state`` columns and ``why_infeasible``), the
text report (the infeasible full runs, each with its reason) and the HTML hover say so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pipesim.plan.constraints import CONSTRAINT_METRICS

if TYPE_CHECKING:
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.space import PlanSpec

__all__ = ["constraint_states", "why_infeasible"]

_JUDGED = {
    "mean_staleness": "settled mean {v:.4g} (the later half of the run; the whole run's {m:.2f} includes "
    "its warm-up)",
    "max_staleness": "maximum {v:g}",
}


def constraint_states(spec: PlanSpec, e: Evaluated) -> dict[str, dict[str, Any]]:
    """Each constraint of ``spec`` judged for ``e`` -> ``limit``, ``judged`` (the value the judge
    read), ``measured`` (the metric the tables print) and ``state`` (``met``, ``violated`` or
    ``open``)."""
    c = spec.constraints
    out: dict[str, dict[str, Any]] = {}
    for name, (state, value) in e.status.items():
        metric = CONSTRAINT_METRICS.get(name, name)
        out[name] = {
            "limit": getattr(c, name),
            "judged": float(value),
            "measured": float(e.metrics.get(metric, math.nan)),
            "state": state,
        }
    return out


def _reason(name: str, st: dict[str, Any], steps: int) -> str:
    v, m, lim, state = st["judged"], st["measured"], st["limit"], st["state"]
    if name == "mean_staleness" and math.isfinite(v) and math.isfinite(m) and abs(v - m) > 1e-9:
        what = _JUDGED[name].format(v=v, m=m)
    elif name == "max_staleness" and state == "open" and v == steps - 1 > 0:
        what = (
            f"maximum {v:g} at the ceiling a {steps}-step run can show (steps - 1): it may grow with "
            "the run, so verification decides (4x as long)"
        )
    elif name == "max_staleness" and state == "open":
        what = f"maximum {v:g}, and its tail allows samples beyond the limit in a run 4x as long"
    else:
        what = f"{v:.4g}"
    sign = ">" if state == "violated" and v > lim else "vs"
    return f"{name} {state}: {what} {sign} limit {lim:g}"


def why_infeasible(spec: PlanSpec, e: Evaluated) -> str:
    """One sentence: why ``e`` is not feasible (the constraints not met, with the values judged,
    then what verification found); empty when it is feasible."""
    if e.feasible:
        return ""
    if e.metrics.get("failed"):
        return f"failed: {e.metrics.get('error', '')}".strip()
    states = constraint_states(spec, e)
    parts = [_reason(n, st, e.steps) for n, st in states.items() if st["state"] != "met"]
    if not parts:
        parts = [
            f"{n} {v:.4g} > limit {getattr(spec.constraints, n):g}" for n, v in _measured_excess(spec, e)
        ]
    if e.steps < spec.steps:
        parts.append(f"a {e.steps}-step screen is never judged feasible")
    if e.verified and not e.verified.startswith(("held", "proved", "fallback")):
        parts.append(e.verified)
    return "; ".join(parts) or "not judged feasible"


def _measured_excess(spec: PlanSpec, e: Evaluated) -> list[tuple[str, float]]:
    """The constraints whose measured metric is past its limit (the judge's verdict missing)."""
    out = []
    for name, excess in spec.constraints.violations(e.metrics).items():
        if excess > 1e-12:
            out.append((name, float(e.metrics[CONSTRAINT_METRICS[name]])))
    return out
