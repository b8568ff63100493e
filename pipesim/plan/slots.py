"""Which of a plan's reported designs ran short of tool-call slots, said once after the table.

An agent's episode keeps its replica slot through its tool calls, so with ``max_num_seqs`` slots a
replica whose episodes mostly wait on tools decodes a fraction of what it could while the episodes
the admission rule let in wait for a slot (:func:`~pipesim.compute.tool_slots.tool_slot_note`,
its criterion :func:`~pipesim.compute.tool_slots.slot_waits`; ``run_compute`` warns it as a
:class:`~pipesim.compute.tool_slots.ToolSlotWarning`). In a plan that warning came from inside the
runs: once per worker process, in any order, naming no design, never from a run the cache gave
back, and never in ``--json``. Here each run records it instead
(:func:`slot_limited` -> the metric :data:`SLOT_KEY`, cached with the others, its mean over
seeds the share of a design's runs that were limited), and the report says once which of the
designs it shows were limited, with the plan spec's remedy, ``model.episodes_per_replica``
(:attr:`~pipesim.plan.space.PlanSpec.episodes_per_replica`): :func:`slot_lines` for the text and
the HTML page, :func:`slot_json` for ``--json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipesim.compute.tool_slots import TOOL_SLOT_RESIDENT_SHARE

if TYPE_CHECKING:
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.search import PlanResult
    from pipesim.plan.space import PlanSpec

__all__ = ["SLOT_KEY", "limited", "pick_slot_limited", "slot_json", "slot_limited", "slot_lines"]

SLOT_KEY = "tool_slot_limited"
"""The metric a run records: 1 where its slots looked like its limit, else 0 (a design's: the share
of its seeds' runs)."""

NAMED = 6
"""The designs :func:`slot_lines` names; the rest are counted."""


def slot_limited(spec: PlanSpec, run: Any) -> bool:
    """Whether ``run`` (a :class:`~pipesim.compute.compute_run.ComputeRun` of ``spec``) is one
    ``run_compute`` warns of: a multi-turn run held back by its slots (:func:`tool_slot_note`)."""
    return spec.workload.agent is not None and run.slot_note is not None  # run_compute's own answer


def _share(e: Evaluated) -> float:
    """The share of ``e``'s runs that were slot-limited (0 for a failed design or an old record)."""
    return float(e.metrics.get(SLOT_KEY, 0.0) or 0.0)


def reported(result: PlanResult, top: int = 8) -> list[Evaluated]:
    """The designs the report shows, each once, in its order: the recommended one (the twin a
    bound proves, as the report names it), the ``top`` fastest feasible, the ones tied with it,
    the Pareto front and the baseline. The table merges designs whose runs are identical into one
    row (:func:`~pipesim.plan.stats.merge_duplicates`), so its ``top`` rows may hold more than
    ``top`` designs: every design of those rows is reported (the first ``top`` designs alone left
    a limited design in the table's last rows unnamed)."""
    from pipesim.plan.report_lines import proved_twin
    from pipesim.plan.stats import merge_duplicates, tied_with_best

    shown = [proved_twin(result, result.best)] if result.best is not None else []
    rows = [e for first, same in merge_duplicates(result.feasible)[:top] for e in (first, *same)]
    shown += [*rows, *tied_with_best(result), *result.front]
    shown += [result.baseline] if result.baseline is not None else []
    once: dict[Any, Evaluated] = {}
    for e in shown:
        once.setdefault(e.design, e)
    return list(once.values())


def _recommended(result: PlanResult) -> Any:
    """The recommended design as the report names it (of identical designs, the one a bound proves)."""
    from pipesim.plan.report_lines import proved_twin

    return proved_twin(result, result.best).design if result.best is not None else None


def limited(result: PlanResult, top: int = 8) -> list[Evaluated]:
    """The reported designs (:func:`reported`) with at least one slot-limited run."""
    return [e for e in reported(result, top) if _share(e) > 0]


def pick_slot_limited(result: PlanResult) -> bool:
    """Whether the recommended design, as the report names it, had a slot-limited run: the
    recommendation's tool-latency line must then not say more GPUs will not help
    (:func:`~pipesim.plan.report_lines.tool_bound_lines`)."""
    from pipesim.plan.report_lines import proved_twin

    return result.best is not None and _share(proved_twin(result, result.best)) > 0


def _per_replica(spec: PlanSpec) -> int:
    return spec.max_num_seqs if spec.episodes_per_replica is None else spec.episodes_per_replica


def _remedy(spec: PlanSpec) -> str:
    per = _per_replica(spec)
    now = "its default, model.max_num_seqs" if spec.episodes_per_replica is None else "now"
    return (
        f"raise model.episodes_per_replica in the plan spec ({now}: {per:,}; e.g. --set "
        f"model.episodes_per_replica={2 * per}) (docs/compute.md, Multi-turn episodes)"
    )


def slot_lines(result: PlanResult, top: int = 8) -> list[str]:
    """One note naming the reported designs whose runs were held back by their slots (the
    recommended one first where it is one), and the remedy; none when no reported design was."""
    spec, found = result.spec, limited(result, top)
    if not found:
        return []
    n, best = spec.n_gpus, _recommended(result)
    names = [e.design.label(n) + (" (recommended)" if e.design == best else "") for e in found]
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return [
        f"note: in {len(found)} of the {len(reported(result, top))} designs shown, episodes the admission "
        f"rule had let in waited for a free slot ({_per_replica(spec):,} per replica) while each replica "
        f"decoded under {TOOL_SLOT_RESIDENT_SHARE:.0%} of its max_num_seqs ({spec.max_num_seqs:,}): "
        f"{', '.join(names[:NAMED])}{more}. An episode keeps its slot through a tool call, so the slots, "
        f"not the engines, may have limited them; {_remedy(spec)}"
    ]


def slot_json(result: PlanResult, top: int = 8) -> dict[str, Any] | None:
    """The note for ``--json``: the reported designs' labels with the share of their runs that
    were slot-limited, whether the recommended one is among them, the slots per replica and the
    remedy; None when no reported design was limited (each design's ``metrics`` hold
    ``tool_slot_limited`` too)."""
    spec, found = result.spec, limited(result, top)
    if not found:
        return None
    best = _recommended(result)
    return {
        "designs": [{"label": e.design.label(spec.n_gpus), "share_of_runs": _share(e)} for e in found],
        "recommended": any(e.design == best for e in found),
        "slots_per_replica": _per_replica(spec),
        "remedy": _remedy(spec),
        "note": slot_lines(result, top)[0],
    }
