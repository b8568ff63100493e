"""A plan's outputs: the text report (with the recommended design as code, from
:mod:`pipesim.plan.code`), JSON, and the HTML report (one Plotly figure, plotly.js embedded once,
plus the tables)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from pipesim.io.interrupts import write_text_atomic
from pipesim.plan.code import code_note, scenario_code, wrap_code
from pipesim.plan.constraints import CONSTRAINT_METRICS
from pipesim.plan.evaluate import FRONT_TOLERANCE, Evaluated
from pipesim.plan.frame import provenance, whole
from pipesim.plan.report_lines import (  # noqa: F401  (re-exported: the report's public names)
    NOTE_DISCARDED_SHARE,
    NOTE_OFFPOLICY_SHARE,
    _fmt,
    baseline_lines,
    full_count,
    infeasible_lines,
    no_pick_lines,
    proved_twin,
    recommended_lines,
    rungs_said,
    sensitivity_lines,
    tie_lines,
    tool_bound_lines,
    unlimited_notes,
)
from pipesim.plan.search import PlanResult
from pipesim.plan.slots import slot_json, slot_lines
from pipesim.plan.space import PlanSpec
from pipesim.plan.stats import merge_duplicates, merged_label, tied_with_best
from pipesim.plan.verdicts import constraint_states, why_infeasible
from pipesim.plan.verify import TAKEN, verify_lines


def _row(
    e: Evaluated,
    n_gpus: int,
    label: str | None = None,
    mark: str = "",
    base: float = 0.0,
    priced: bool = False,
) -> list[str]:
    """One design's cells (:data:`HEADER`); ``mark``: ``best``, ``tied`` or empty; ``base``: the
    baseline's samples/h (0: no baseline column); ``priced``: the cost column after GPU-h/Mtok.
    A design run on one seed has no interval (``throughput_ci`` NaN): ``12,345 (1 seed)``."""
    m = e.metrics
    ci = m.get("throughput_ci", 0.0)  # NaN with one seed: no interval, never a fake "± 0"
    cells = [
        label if label is not None else e.design.label(n_gpus),
        mark,
        f"{_fmt(m['throughput_per_hour'])} " + (f"± {_fmt(ci)}" if math.isfinite(ci) else "(1 seed)"),
        _fmt(m["tokens_per_hour"] / 1e6, ".1f"),
        _fmt(m.get("tokens_per_s_per_gpu", math.nan), ",.0f"),
        _fmt(m["gpu_hours_per_mtok"], ".2f"),
        _fmt(m["staleness_mean"], ".2f"),
        _fmt(m["staleness_max"], ".0f"),
        _fmt(m["discarded_share"] * 100, ".1f"),
        _fmt(m.get("offpolicy_token_share", math.nan) * 100, ".0f"),
        f"{_fmt(m['step_time_s'], '.1f')} = {_fmt(m['train_time_s'], '.1f')}+{_fmt(m['sync_time_s'], '.1f')}"
        f"+{_fmt(m['wait_time_s'], '.1f')}",
        f"{_fmt(m['trainer/idle_ratio'] * 100, '.0f')}/{_fmt((1 - m['engine_busy_share']) * 100, '.0f')}"
        f"/{_fmt(m['gpu_busy_share'] * 100, '.0f')}",
        "/".join(
            _fmt(m[f"tokens_{k}"] / 1e6, ".2f")
            for k in ("generated", "trained", "discarded", "buffered", "in_flight")
        ),
    ]
    if priced:
        cells.insert(COST_AT, _fmt(m.get("cost_per_mtok", math.nan), ",.2f"))
    if base:
        cells.insert(3, f"{e.throughput / base - 1:+.0%}")
    return cells


HEADER = [
    "design",
    "vs best",
    "samples/h ± 95% CI",
    "Mtok/h",
    "tok/s/GPU",
    "GPU-h/Mtok",
    "stale mean",
    "stale max",
    "disc %",
    "off-pol %",
    "step s = train+sync+wait",
    "idle % trainer/engine, GPU busy %",
    "ledger Mtok gen/trained/disc/buf/inflight",
]
"""The table's columns; with a ``[baseline]``, ``vs baseline`` follows the samples/h."""


COST_AT = HEADER.index("GPU-h/Mtok") + 1
"""Where the price per million trained tokens goes when the cluster has ``cost_per_gpu_hour``."""


def header(result: PlanResult) -> list[str]:
    h = list(HEADER)
    if result.spec.cost_per_gpu_hour is not None:
        h.insert(COST_AT, "cost/Mtok")
    if result.baseline is not None:
        h.insert(3, "vs baseline")
    return h


def rows(result: PlanResult, evals: list[Evaluated], top: int | None = None) -> list[list[str]]:
    """The table rows of ``evals``: identical designs merged (:func:`~pipesim.plan.stats.
    merge_duplicates`), the best marked ``best`` and those a paired test does not separate from
    it ``tied``; with a baseline, each design's change against it."""
    n = result.spec.n_gpus
    ties = {e.design for e in tied_with_best(result)}
    best = result.best.design if result.best is not None else None
    base = result.baseline.throughput if result.baseline is not None else 0.0
    out = []
    for first, same in merge_duplicates(evals)[:top]:
        designs = {first.design, *(o.design for o in same)}
        named = proved_twin(result, first) if same else first  # a twin a bound proves names the row
        if named is not first and named in same:
            first, same = named, [first, *(o for o in same if o is not named)]
        mark = "best" if best in designs else "tied" if designs & ties else ""
        if result.baseline is not None and result.baseline.design in designs:
            mark = (mark + " baseline").strip()
        priced = result.spec.cost_per_gpu_hour is not None
        out.append(_row(first, n, merged_label(first, same, n), mark, base, priced))
    return out


def table(body: list[list[str]], head: list[str] = HEADER) -> str:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def ascii_front(result: PlanResult, width: int = 60, height: int = 14) -> str:
    """Throughput (up) against mean staleness (right) of the full runs: ``o`` infeasible, ``#``
    feasible, ``F`` on the front, ``*`` recommended."""
    pts = [e for e in result.full if not e.metrics.get("failed")]
    if not pts:
        return ""
    xs = [e.metrics["staleness_mean"] for e in pts]
    ys = [e.throughput for e in pts]
    x1, y1 = max(max(xs), 1e-9), max(max(ys), 1e-9)
    grid = [[" "] * width for _ in range(height)]
    front = {e.design for e in result.front}
    rank = {"o": 0, "#": 1, "F": 2, "*": 3}
    for e, x, y in zip(pts, xs, ys, strict=True):
        c = "o" if not e.feasible else "#"
        if e.design in front:
            c = "F"
        if result.best is not None and e.design == result.best.design:
            c = "*"
        i = height - 1 - min(int(y / y1 * (height - 1) + 0.5), height - 1)
        j = min(int(x / x1 * (width - 1) + 0.5), width - 1)
        if rank[c] >= rank.get(grid[i][j], -1):
            grid[i][j] = c
    lines = [f"{_fmt(y1):>9} |" + "".join(grid[0])]
    lines += ["          |" + "".join(r) for r in grid[1:]]
    lines.append("        0 +" + "-" * width)
    lines.append(f"           0{'mean staleness':^{width - 10}}{x1:>8.2f}")
    return "\n".join(lines)


def runs_said(result: PlanResult) -> str:
    """``199 runs (78 simulated, 121 from the run cache)``: every run the answer rests on, and how
    many this invocation simulated (a resumed plan's new ones; the JSON's ``runs``)."""
    total = result.runs + result.reused
    if not result.reused:
        return f"{total} runs"
    return f"{total} runs ({result.runs} simulated, {result.reused} from the run cache)"


def designs_said(result: PlanResult) -> str:
    """``137 designs (18 run in full)``: the distinct designs the outputs hold, as the CSV has
    one row each (a design run in full is in the JSON's ``full`` and ``screened`` both, and
    counting the two lists counted it twice)."""
    full = {e.design for e in result.full}
    n = len(full | {e.design for e in result.screened})
    return f"{n} designs ({len(full)} run in full)"


def cut_line(result: PlanResult) -> str:
    """The fluid first cut in one line, with the share of its audited designs that disagreed."""
    cut = result.cut
    if not cut.ceilings:
        return "first cut: off"
    if not cut.ruled_out:
        return f"first cut (fluid ceiling, docs/plan.md): none of {len(cut.ceilings)} designs below the floor"
    share = cut.disagreement
    told = (
        "no audit"
        if share is None
        else f"{len(cut.disagreed)} of {len(cut.audited)} audited disagreed ({share:.0%})"
    )
    return (
        f"first cut (fluid ceiling, docs/plan.md): ruled out {len(cut.ruled_out)} of {len(cut.ceilings)} "
        f"designs below a floor of {_fmt(cut.floor)} samples/h; {told}"
    )


def best_heading(result: PlanResult, top: int) -> str:
    """The heading of the best-designs table: how many designs ran in full (:func:`full_count`),
    how many of them are feasible, and how many the table shows (the text shows ``top`` 8, the
    HTML page 12: each says its own)."""
    shown = min(top, len(result.feasible))
    return (
        f"best feasible designs (of {full_count(result)}; {len(result.feasible)} feasible, the fastest "
        f"{shown} shown; identical designs merged with '=')"
    )


LEGEND = (
    "design: split T:R = trainer:rollout GPUs (colocated: both on every GPU), tpN = tensor parallel, "
    "eta = the admission's lead (how many batches generation may run ahead of training; a staleness "
    "bound only under drain: read mean/max staleness), k = a weight sync every k steps, "
    "os = over-sample factor"
)
"""Under the best designs' table: what a design's label says (:meth:`Design.label`)."""


def text(result: PlanResult, top: int = 8) -> str:
    spec, best = result.spec, result.best
    c = spec.constraints
    limits = ", ".join(  # every limit the judge applies (cost_per_mtok was judged and not shown)
        f"{k} <= {getattr(c, k)}" for k in CONSTRAINT_METRICS if getattr(c, k) is not None
    )
    out = [
        f"plan: {spec.model.name} on {spec.n_gpus} x {spec.gpu.name}, {spec.batch_size} samples per step "
        f"({spec.workload.samples_per_prompt} per prompt); constraints: {limits or 'none'}, "
        f"min trainer GPUs {c.min_trainer_gpus}",
        f"search: {result.method}, {result.n_candidates} candidates, {rungs_said(result)}; "
        f"{runs_said(result)} in {result.elapsed_s:.1f} s",
        cut_line(result),
        "pipesim {pipesim_version}, spec {spec_hash}, simulation seeds {sim_seeds}, search seed "
        "{search_seed}{part}".format(
            **provenance(result), part=" (PARTIAL: interrupted)" if result.partial else ""
        ),
        *no_pick_lines(result),
        "",
        best_heading(result, top) + ":",
        table(rows(result, result.feasible, top), header(result)),
        LEGEND,
        *slot_lines(result, top),
        *tie_lines(result),
        *verify_lines(result),
        *baseline_lines(result),
        *(["", *bad] if (bad := infeasible_lines(result, top)) else []),
        "",
        "Pareto front (feasible, non-dominated: throughput vs mean staleness vs discarded share; "
        f"within {FRONT_TOLERANCE[1]:g} in mean staleness and {FRONT_TOLERANCE[2]:g} in discarded "
        "share a faster design dominates):",
        table(rows(result, result.front), header(result)),
        "",
        "samples/h of the full runs against mean staleness (o infeasible, # feasible, F front, * best):",
        ascii_front(result),
    ]
    if best is not None:
        shown = proved_twin(result, best)  # of identical designs, the one a bound proves
        note = code_note(shown.runs, result.sim_seeds())
        code = wrap_code(scenario_code(spec, shown.design))
        out += ["", *recommended_lines(result), *([note] if note else []), code]
    if result.sensitivity:
        out += ["", *sensitivity_lines(result)]
    return "\n".join(out)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _entry(e: Evaluated, spec: PlanSpec) -> dict[str, Any]:
    """One design in the JSON: its metrics (counts whole where every seed's is: means over seeds
    otherwise, :func:`~pipesim.plan.frame.whole`), each constraint's limit, value judged, value
    measured and verdict, and why it is infeasible (:mod:`pipesim.plan.verdicts`)."""
    return {
        "label": e.design.label(spec.n_gpus),
        "design": e.design.as_dict(),
        "steps": e.steps,
        "feasible": e.feasible,
        "verified": e.verified,
        "constraints": constraint_states(spec, e),
        "why_infeasible": why_infeasible(spec, e),
        "metrics": {k: whole(k, v) for k, v in e.metrics.items()},
    }


PROVISIONAL = "not verified: the plan was interrupted before its full rung and verification finished"
"""The ``verified`` note of an interrupted plan's recommendation (``partial``): the fastest design
judged feasible among the full runs that had finished, which a finished plan could still refuse
(verification) or beat (a full run not yet done)."""


def _provisional(result: PlanResult) -> dict[str, Any]:
    """The recommendation's marks in a partial plan: ``provisional`` (True when interrupted), and a
    ``verified`` note saying it was not verified when verification had not passed it."""
    best = result.best
    if not result.partial or best is None:
        return {"provisional": False}
    held = best.verified.startswith(TAKEN)
    return {"provisional": True, "verified": best.verified if held else PROVISIONAL}


def json_notes(result: PlanResult) -> list[str]:
    """The JSON's ``recommended.notes``: the text's notes under ``recommended:`` in its order, the
    tool-latency bound line (:func:`tool_bound_lines`, unindented) and those of
    :func:`unlimited_notes`. The JSON held only the latter, so a pick the text called tool-latency
    bound read as GPU-bound to a script."""
    return [line.strip() for line in tool_bound_lines(result)] + unlimited_notes(result)


def as_json(result: PlanResult) -> dict[str, Any]:
    spec, best = result.spec, result.best
    n = spec.n_gpus
    return _clean(
        {
            **provenance(result),
            "cluster": {"gpu": spec.gpu.name, "n_gpus": n},
            "model": spec.model.name,
            "batch_size": spec.batch_size,
            "constraints": vars(spec.constraints),
            "method": result.method,
            "candidates": result.n_candidates,
            "rungs": [{"steps": s, "designs": k} for s, k in result.rungs],
            "first_cut": result.cut.as_dict(),
            "runs": result.runs,
            "runs_reused": result.reused,
            "runs_total": result.runs + result.reused,
            "elapsed_s": result.elapsed_s,
            "recommended": None
            if best is None
            else {
                **_entry(proved_twin(result, best), spec),
                **_provisional(result),
                "code": wrap_code(scenario_code(spec, proved_twin(result, best).design)),
                "code_note": code_note(best.runs, result.sim_seeds()).removeprefix("# "),
                "notes": json_notes(result),
            },
            "tool_slots": slot_json(result),
            "baseline": None if result.baseline is None else _entry(result.baseline, spec),
            "tied_with_best": [_entry(e, spec) for e in tied_with_best(result)],
            "front": [_entry(e, spec) for e in result.front],
            "full": [_entry(e, spec) for e in result.full],
            "screened": [_entry(e, spec) for e in result.screened],
            "sensitivity": result.sensitivity,
        }
    )


def _write(text: str, path: str) -> None:
    """``text`` to the file ``path``, or to standard output when ``path`` is ``-``."""
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    else:
        write_text_atomic(path, text)  # whole or not at all: an interrupt leaves the old file


def write_json(result: PlanResult, path: str) -> None:
    """The plan as JSON (:func:`as_json`) to ``path`` (``-``: standard output)."""
    _write(json.dumps(as_json(result), indent=1), path)


def figure(result: PlanResult) -> Any:
    """The Plotly figure of the report (:func:`pipesim.plan.report_html.figure`)."""
    from pipesim.plan import report_html

    return report_html.figure(result)


def write_html(result: PlanResult, path: str) -> None:
    """The HTML report (:func:`pipesim.plan.report_html.write_html`)."""
    from pipesim.plan import report_html

    report_html.write_html(result, path)
