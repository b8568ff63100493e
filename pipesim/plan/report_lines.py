"""The sentences of a plan's conclusion, one builder per section, shared by the text report
(:func:`pipesim.plan.report.text`) and the HTML page (:mod:`pipesim.plan.report_html`), so the
page says what the text says in the same words: the paired test, verification and its fallback,
the baseline's verdict, the recommendation (with the fresher design it is tied with, if any, and
the notes on what no limit rules on), the infeasible full runs with why, and the sensitivity.
:func:`conclusion` lists the sections in the text's order; :func:`full_count` says what the count
of full runs holds beyond the search's last rung (the baseline, designs the fallback or a slice
ran)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pipesim.plan.space import MAX_SEEDS
from pipesim.plan.stats import comparison, merge_duplicates, seeds_to_separate, tied_with_best
from pipesim.plan.verify import TAKEN, verify_lines

if TYPE_CHECKING:
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.search import PlanResult

__all__ = [
    "NOTE_DISCARDED_SHARE",
    "NOTE_OFFPOLICY_SHARE",
    "baseline_lines",
    "conclusion",
    "fresher_tie",
    "full_count",
    "infeasible_lines",
    "no_pick_lines",
    "recommended_lines",
    "rungs_said",
    "sensitivity_lines",
    "tie_lines",
    "tool_bound_lines",
    "unlimited_notes",
]


def _fmt(v: float | None, spec: str = ",.0f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def full_count(result: PlanResult) -> str:
    """``61 run in full: the last rung's 60 and your baseline`` where the full runs hold designs
    beyond the search's last rung (the header's ``60 run for 12 steps`` counts that rung only):
    the ``[baseline]``, run in full beside the plan's, the designs the fallback of verification ran
    and the splits bisected along a slice."""
    n, rung = len(result.full), result.rungs[-1][1] if result.rungs else len(result.full)
    extra = n - rung
    if extra <= 0 or result.partial:
        return f"{n} run in full"
    b = result.baseline
    fallback = any(e.verified.startswith("fallback") for e in result.full)
    if b is not None and extra == 1 and not fallback and result.method != "slices":
        return f"{n} run in full: the last rung's {rung} and your baseline"
    why = [
        *(["your baseline"] if b is not None else []),
        *(["the fallback's designs"] if fallback else []),
        *(["splits along a slice"] if result.method == "slices" else []),
    ]
    return f"{n} run in full: the last rung's {rung} and {extra} more ({', '.join(why) or 'verification'})"


def rungs_said(result: PlanResult) -> str:
    """``64 run for 3 steps, 22 run for 8 steps (3 seeds in full)``: the rungs that ran. An
    interrupted plan says what it got to: ``36 run for 3 steps (interrupted before any design ran
    in full)``, or the full runs that finished before the full rung did (the header said "(3 seeds
    in full)" of a plan that had run nothing in full)."""
    spec = result.spec
    said = ", ".join(f"{n} run for {s} steps" for s, n in result.rungs)
    reached = any(s >= spec.steps for s, _ in result.rungs)
    if result.partial and not result.full:
        return f"{said} (interrupted before any design ran in full)"
    if result.partial and not reached:
        return f"{said}, {len(result.full)} run in full ({spec.seeds} seeds) before the interrupt"
    return f"{said} ({spec.seeds} seeds in full)"


def no_pick_lines(result: PlanResult) -> list[str]:
    """The header's sentence when there is no recommendation (the tables are then empty): an
    interrupted plan's (with ``--resume``) or one where no design met the constraints."""
    if result.best is not None:
        return []
    if result.partial:
        before = (
            "any design ran in full"
            if not result.full
            else f"any of the {len(result.full)} designs it ran in full was judged feasible"
        )
        return [
            f"no recommendation yet: the plan was interrupted before {before}; the same command with "
            "--resume continues from the runs cached (not under --no-cache)"
        ]
    if result.full:
        return ["no recommendation: no design run in full meets the constraints (see the infeasible runs)"]
    return []


def tie_lines(result: PlanResult) -> list[str]:
    """What the paired test says about the best, and what would separate the closest tie."""
    best, spec = result.best, result.spec
    if best is None:
        return []
    seeds = result.sim_seeds()
    if spec.seeds < 2:
        return [f"one seed per design ({seeds}): no test separates the best from the rest; use seeds >= 3"]
    ties = tied_with_best(result)
    head = f"paired t-test on the shared seeds {seeds} (95%): "
    if not ties:
        return [head + "the best is separated from every other feasible design"]
    group = next((g for g in merge_duplicates(result.full) if best in (g[0], *g[1])), (best, []))
    twins = {o.design for o in (group[0], *group[1])}  # identical seed by seed: merged in its row
    others = [e for e in ties if e.design not in twins]
    if not others:
        return [
            head + f"{len(ties)} design(s) tied with the best, each identical to it on every seed "
            "(merged in its row): no number of seeds separates them"
        ]
    closest = proved_twin(result, others[0])  # of identical designs, the one a bound proves
    p = comparison(best, closest)
    need = seeds_to_separate(p)
    if need is None:
        sep = "no number of seeds separates them (identical on every seed)"
    elif need > MAX_SEEDS:  # search.seeds is refused above MAX_SEEDS: do not suggest it
        sep = (
            f"about {need} seeds would separate it at the spread seen, more than search.seeds allows "
            f"({MAX_SEEDS}): it cannot be separated within the allowed seeds; take either"
        )
    else:
        sep = f"about {need} seeds would separate it at the spread seen (search.seeds = {need})"
    return [
        head + f"{len(ties)} design(s) tied with the best, marked 'tied'; the closest, "
        f"{closest.design.label(spec.n_gpus)}, differs by {_fmt(p.mean_diff)} ± {_fmt(p.half_width)} "
        f"samples/h: {sep}"
    ]


def baseline_lines(result: PlanResult) -> list[str]:
    """The baseline's throughput and verdict (the limits it breaks), and the recommendation's
    change against it with the paired test's word on it."""
    b, best, n = result.baseline, result.best, result.spec.n_gpus
    if b is None:
        return []
    unmet = {k: st for k, (st, _) in b.status.items() if st != "met"}
    if b.feasible:
        state = "feasible"
    elif unmet and all(st == "open" for st in unmet.values()):  # nothing broken: not yet known
        state = (
            f"not proved feasible ({', '.join(unmet)} open: its runs of {b.steps} steps reach what they "
            "can show, and the plan does not run the baseline longer to verify it)"
        )
    else:
        state = "infeasible (" + ", ".join(f"{k} {st}" for k, st in unmet.items()) + ")"
    out = [f"baseline (your design): {b.design.label(n)}: {_fmt(b.throughput)} samples/h, {state}"]
    if best is not None and best.design != b.design:
        p = comparison(best, b)
        verdict = "tied by the paired test" if p.tied else "separated by the paired test"
        if not p.tested:  # one shared seed: no test, so neither tied nor separated
            verdict = "one seed: no paired test"
        out.append(
            f"  the recommendation is {best.throughput / b.throughput - 1:+.1%} against it ({verdict})"
        )
    return out


def _freshness(e: Evaluated) -> tuple[float, float]:
    m = e.metrics
    return (m.get("offpolicy_token_share", math.nan), m.get("staleness_mean", math.nan))


def fresher_tie(result: PlanResult) -> Evaluated | None:
    """The freshest design tied with the recommendation (:func:`~pipesim.plan.stats.tied_with_best`)
    that trains no larger off-policy share and no higher mean staleness, and less of one of them;
    None when no tied design is fresher. The recommendation stays the fastest (``docs/plan.md``,
    item 7): this only says what the paired test leaves open."""
    best = result.best
    if best is None:
        return None
    mine = _freshness(best)
    fresher = [
        e
        for e in tied_with_best(result)
        if all(math.isfinite(v) for v in (*_freshness(e), *mine))
        and all(a <= b for a, b in zip(_freshness(e), mine, strict=True))
        and _freshness(e) != mine
    ]
    return min(fresher, key=lambda e: (*_freshness(e), -e.throughput), default=None)


def proved_twin(result: PlanResult, e: Evaluated) -> Evaluated:
    """The design to name for ``e``: ``e`` itself, or a feasible design whose runs are identical
    to ``e``'s seed by seed (:func:`~pipesim.plan.stats.merge_duplicates`: drain, partial and abort
    at eta 0 when no sync meets a sequence in flight) and whose staleness its declared bound
    proves when ``e``'s is not (:func:`~pipesim.plan.verify.needs_verification`). The search
    breaks throughput ties by the design's order, which put ``abort`` (AbortRestart) first."""
    from pipesim.plan.verify import needs_verification

    spec = result.spec
    if not needs_verification(spec, e.design):
        return e
    group = next((g for g in merge_duplicates(result.full) if e in (g[0], *g[1])), None)
    twins = [] if group is None else [o for o in (group[0], *group[1]) if o is not e]
    proved = [o for o in twins if o.feasible and not needs_verification(spec, o.design)]
    return min(proved, key=lambda o: o.design) if proved else e


def recommended_lines(result: PlanResult) -> list[str]:
    """``recommended: LABEL``; the fresher design it is tied with (:func:`fresher_tie`), with the
    difference and what it trains off-policy; the notes of :func:`unlimited_notes`."""
    best, n = result.best, result.spec.n_gpus
    if best is None:
        return []
    shown = proved_twin(result, best)
    out = [f"recommended: {shown.design.label(n)}"]
    if shown is not best:
        out.append(
            f"  identical on every seed to {best.design.label(n)}; named by the twin whose declared "
            "bound proves its staleness"
        )
    if result.partial and not best.verified.startswith(TAKEN):
        out.append(
            "  provisional: the plan was interrupted before its full rung and verification finished; "
            "this design is not verified (--resume finishes it)"
        )
    other = fresher_tie(result)
    if other is not None:
        other = proved_twin(result, other)
        p = comparison(best, other)
        off, stale = _freshness(other)
        mine_off, mine_stale = _freshness(best)
        out.append(
            f"  tied with {other.design.label(n)} (the pick differs by {_fmt(p.mean_diff)} ± "
            f"{_fmt(p.half_width)} samples/h), which trains {off:.0%} of its tokens off-policy at mean "
            f"staleness {stale:.2f} (the pick: {mine_off:.0%}, {mine_stale:.2f}): the pick is faster on "
            "these seeds, not proved faster"
        )
    return out + tool_bound_lines(result) + unlimited_notes(result)


TOOL_BOUND_SHARE = 0.5
"""A recommendation whose run spends at least this share of its time with the trainer waiting for
rollout *and* the engines idle (:func:`tool_bound_lines`) is said to be tool-latency bound: more
than half of it is no GPU's work, so more GPUs cannot shorten the step."""


def tool_bound_lines(result: PlanResult) -> list[str]:
    """One line where the recommendation's step is bound by tool latency, not by its GPUs: a
    workload with tool calls, and at least :data:`TOOL_BOUND_SHARE` of the run in which the
    trainer waits for rollout while the engines sit idle. The rows carry the two shares, not their
    overlap, so the overlap is their lower bound ``wait / step + (1 - engine busy) - 1`` (both
    cannot be apart for longer than the run): no more is claimed than they show. The engines'
    idle share is over replicas, so a last turn decoding on one replica of many counts as idle:
    the step then waits on the slowest episodes' tool calls and turns. The walkthrough's pick,
    colocated TP 2 eta 0 drain on 64 H100s, waited 151.2 s of a 155.7 s step with the engines 72%
    idle: at least 69%.

    A pick whose runs were held back by their tool-call slots (:mod:`pipesim.plan.slots`) idles
    its engines for want of slots, not of tool results: more slots per replica, or more replicas,
    shorten its step (a walkthrough's split 4:4 eta 1 with 30 s tools, idle 75%, went from 2,015
    to 3,029 samples/h with 64 slots a replica and to 3,030 on 16 GPUs). Its line then says it is
    slot-limited and points to the slot note, never that more GPUs will not help."""
    from pipesim.plan.slots import pick_slot_limited

    best = result.best
    agent = result.spec.workload.agent
    if best is None or agent is None or agent.turns < 2 or agent.tool_latency_s <= 0:
        return []
    m = proved_twin(result, best).metrics
    step, wait, busy = (m.get(k, math.nan) for k in ("step_time_s", "wait_time_s", "engine_busy_share"))
    if not all(math.isfinite(v) for v in (step, wait, busy)) or step <= 0:
        return []
    waits = min(wait / step, 1.0)
    both = waits + (1.0 - busy) - 1.0
    if both < TOOL_BOUND_SHARE:
        return []
    shares = (
        f"for at least {both:.0%} of the run the trainer waits for rollout while the engines sit idle "
        f"(it waits {waits:.0%} of its mean {step:,.1f} s step; the engines are idle {1 - busy:.0%} of "
        "the run)"
    )
    if pick_slot_limited(result):
        return [
            f"  slot-limited: {shares}, but its episodes waited for a free tool-call slot (the "
            "tool-call slot note): the slots, not the tool calls alone, hold its step back, so more "
            "slots per replica (model.episodes_per_replica) or more GPUs may shorten it"
        ]
    return [
        f"  tool-latency bound: {shares}: the step waits on tool calls and the slowest episodes' "
        "turns, not on GPU time, so more GPUs will not shorten it"
    ]


NOTE_DISCARDED_SHARE = 0.10
"""A recommendation that discards more than this share of the tokens it generates, with no
``discarded_share`` limit set, is printed with a note: its samples/h counts the samples that
finish first (the aborted ones are the long ones), so it rewards throwing work away."""
NOTE_OFFPOLICY_SHARE = 0.5
"""Likewise for a recommendation training more than this share of its tokens from an older
policy with no ``offpolicy_token_share`` limit set (what that costs in learning is not in the plan)."""


def unlimited_notes(result: PlanResult) -> list[str]:
    """Notes on what the recommended design does that no limit of the spec rules on (and, for the
    discarded share, a limit looser than the note's threshold, since discarding biases samples/h
    itself: ``discarded_share = 1.0`` let a design that aborts 79% of its samples win at 10x the
    samples/h and 2x the tokens/h of drain, unflagged; a set off-policy limit is the user's choice): a large
    discarded share or off-policy share (see :data:`NOTE_DISCARDED_SHARE`), each with the limit
    that would rule such designs out."""
    best = result.best
    if best is None:
        return []
    c = result.spec.constraints
    out = []
    for key, threshold, does, why, limit in (
        (
            "discarded_share",
            NOTE_DISCARDED_SHARE,
            "discards {:.0%} of the tokens it generates",
            "its samples/h counts the samples that finish first, biased short",
            "[constraints] discarded_share = 0.05 (or --set constraints.discarded_share=0.05) rules "
            "such designs out",
        ),
        (
            "offpolicy_token_share",
            NOTE_OFFPOLICY_SHARE,
            "trains {:.0%} of its tokens from an older policy",
            "its cost in learning is not in samples/h: docs/offpolicy.md",
            "[constraints] offpolicy_token_share = 0.5 (or lower) limits it",
        ),
    ):
        share, set_to = best.metrics.get(key, 0.0), getattr(c, key)
        loose = key == "discarded_share" and set_to is not None and set_to > threshold  # samples/h biased
        if share > threshold and (set_to is None or loose):  # an off-policy limit is the user's choice
            head = f"no limit on {key}" if set_to is None else f"{key} may reach {set_to:g}"
            why += _per_sample(best, key)
            out.append(f"note: {head}, and this design {does.format(share)} ({why}); {limit}")
    return out


def _per_sample(best: Evaluated, key: str) -> str:
    """The trained tokens a sample of a design that discards (its samples are the short ones)."""
    m = best.metrics
    if key != "discarded_share" or not m.get("throughput_per_hour"):
        return ""
    return f": {m.get('tokens_per_hour', 0.0) / m['throughput_per_hour']:,.0f} trained tokens a sample"


def sensitivity_lines(result: PlanResult) -> list[str]:
    """The sensitivity section, its heading line first (none when it was not run)."""
    if not result.sensitivity:
        return []
    out = ["sensitivity (the best designs re-run in full):"]
    for s in result.sensitivity:
        move = (
            "recommendation unchanged"
            if s["best_after"] == s["recommended"]
            else f"best becomes {s['best_after']} ({_fmt(s['best_after_throughput'])} samples/h)"
            if s["best_after"]
            else "none of the best designs stays feasible"
        )
        out.append(
            f"  {s['variant']}: {_fmt(s['throughput_before'])} -> "
            f"{_fmt(s['throughput_after'])} samples/h "
            f"({s['change']:+.1%}{'' if s['still_feasible'] else ', infeasible'}); {move}"
        )
    return out


def infeasible_lines(result: PlanResult, top: int = 8) -> list[str]:
    """The fastest ``top`` full-run designs that are not feasible, each with why
    (:func:`~pipesim.plan.verdicts.why_infeasible`): the tables print the whole run's mean
    staleness, and the judge reads the settled one."""
    from pipesim.plan.verdicts import why_infeasible

    bad = [e for e in result.full if not e.feasible][:top]
    if not bad:
        return []
    n = result.spec.n_gpus
    out = ["infeasible full runs, fastest first (the value judged, not always the one printed):"]
    for e in bad:
        out.append(f"  {e.design.label(n)}, {_fmt(e.throughput)} samples/h: {why_infeasible(result.spec, e)}")
    return out


def conclusion(result: PlanResult) -> list[tuple[str, list[str]]]:
    """The conclusion's sections in the text's order, as (title, lines), empty ones left out:
    what the HTML page prints under its tables (the text prints the same lines)."""
    sections = [
        ("Paired test", tie_lines(result)),
        ("Verification", verify_lines(result)),
        ("Baseline", baseline_lines(result)),
        ("Infeasible", infeasible_lines(result)),
        ("Recommended", recommended_lines(result)),
        ("Sensitivity", sensitivity_lines(result)),
    ]
    return [(title, lines) for title, lines in sections if lines]
