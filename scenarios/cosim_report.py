"""The co-simulation experiment: designs x corrections x seeds -> a table, a JSON file and a figure.

``python -m scenarios.cosim --designs sync,one-step,async-eta1,async-eta2,async-eta4 --corrections
none,tis --seeds 3 --steps 40 --json FILE --html FILE`` runs every combination one after another
(the machine is shared; each run uses one thread) and prints, per design and correction, the
simulated hours to reach the target held-out pass rate (the median over seeds, a seed that never
reached it counting as slowest, and how many reached it), the final pass rate, mean and max
staleness, the share of mixed-version episodes and the mismatch mean |log pi_old - log mu|.
``--retable JSON`` re-prints the table of stored runs (and with ``--json`` / ``--html`` rewrites
the table / the figure). ``--perf``
instead measures the CPU time of one co-simulated run against a plain ``train_rl`` run of the same
length. A run whose training diverges (an lr far too large: its numbers stop being finite) ends
there and is kept as diverged, its final pass rate 0 (collapsed). Ctrl-C (or SIGTERM) stops the
grid with one line saying how many finished runs ``--json`` keeps, and exit status 130;
``--resume`` continues from them.

The figure plots held-out pass rate against simulated hours and against trained episodes: per
design, the mean over seeds at each evaluation (seeds evaluate at the same step, at slightly
different simulated times, so the x of a point is the seeds' mean time) and a band from the lowest
to the highest seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offpolicy import CORRECTIONS, RLConfig
from offpolicy.checks import FieldError
from offpolicy.experiment import CLI_LIMITS, NumbersParser, titled_page
from offpolicy.gym import DEFAULT_GYM, GYMS
from offpolicy.interrupts import INTERRUPTED, Kept
from pipesim.io.interrupts import sigterm_as_interrupt, write_text_atomic
from scenarios.cosim import DESIGNS, CosimConfig, CosimResult, run_cosim
from scenarios.cosim_checks import (  # noqa: F401  (re-exported: the CLI's checks live there)
    DEFAULT_TARGET,
    RUN_KEYS,
    _check_flags,
    _incomplete,
    _names,
    _same_file,
    _same_settings,
    _seed_list,
    _settings_mismatch,
    _stored,
    _stored_runs,
    _stored_targets,
    eval_steps,
)
from scenarios.cosim_perf import (  # noqa: F401
    PERF_GOAL,
    PERF_RUN_LIMIT,
    PERF_SEEDS,
    PERF_STEPS,
    perf_protocol,
    perf_ratio,
)
from scenarios.cosim_tables import (  # noqa: F401  (re-exported: the report's tables live there)
    TABLE_KEYS,
    aggregate,
    claims_table,
    format_table,
    in_design_order,
    race_table,
    time_to,
)


def run_grid(
    designs: Sequence[str],
    corrections: Sequence[str],
    seeds: int | Sequence[int],
    base: CosimConfig,
    log: bool = True,
    done: Sequence[dict[str, Any]] = (),
    on_run: Any = None,
) -> list[CosimResult]:
    """Every design x correction x seed (``seeds``: a count for 0..seeds-1, or the seeds),
    sequentially, in that order; runs whose (design, correction, seed) is in ``done`` (records)
    at ``base``'s settings are skipped (:func:`~scenarios.cosim_checks._settings_mismatch`: lr,
    gym, steps and evaluation schedule; a record without a field predates it and counts as the
    default's); ``on_run(result)`` is called after each run."""
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    skip = {(r["design"], r["correction"], r["seed"]) for r in done if _same_settings(r, base)}
    out = []
    for design in designs:
        for corr in corrections:
            for seed in seed_list:
                if (design, corr, seed) in skip:
                    continue
                rl = dataclasses.replace(base.rl, seed=seed)
                r = run_cosim(dataclasses.replace(base, design=design, correction=corr, rl=rl))
                out.append(r)
                if on_run is not None:
                    on_run(r)
                if log:
                    s = r.summary()
                    d = r.diverged
                    hours = s["time_to_target_h"]  # NaN: never reached
                    reached = f"target at {hours:.3f} h" if math.isfinite(hours) else "target never reached"
                    print(
                        f"{design:11s} {corr:5s} seed {seed}: final {s['final_pass_rate']:.3f}, "
                        f"{reached}, {s['sim_hours']:.2f} h simulated, "
                        f"{r.cpu_s:.0f} s CPU"
                        + (f"; DIVERGED after {d['steps_done']} step(s) ({d['message']})" if d else ""),
                        flush=True,
                    )
    return out


def run_record(r: CosimResult) -> dict[str, Any]:
    """One run as JSON-ready plain data (NaN -> None): what the table and a re-table need."""

    def clean(x: Any) -> Any:
        return None if isinstance(x, float) and math.isnan(x) else x

    return dict(
        design=r.config.design,
        correction=r.config.correction,
        seed=r.config.seed,
        gym=r.config.gym,
        lr=r.config.rl.lr,
        train_steps=r.config.steps,
        eval_every=r.config.eval_every_steps,
        eval_episodes=r.config.eval_episodes_per_task,
        batch_size=r.config.batch_size,
        summary={k: clean(v) for k, v in r.summary().items()},
        counts=r.counts,
        evals=r.evals,
        steps=[{k: clean(v) for k, v in s.items()} for s in r.steps],
        diverged=r.diverged,
    )


def curves(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (design, correction) and evaluation: mean sim hours, trained episodes, mean/min/max pass
    rate, each over the runs that made that evaluation (a diverged run stops early)."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for key in dict.fromkeys((r["design"], r["correction"]) for r in records):
        runs = [r for r in records if (r["design"], r["correction"]) == key]
        n = max(len(r["evals"]) for r in runs)
        b = runs[0]["batch_size"]
        at = [[r["evals"][i] for r in runs if i < len(r["evals"])] for i in range(n)]
        out[key] = dict(
            sim_h=[statistics.fmean(e["sim_h"] for e in es) for es in at],
            episodes=[es[0]["step"] * b for es in at],
            mean=[statistics.fmean(e["pass_rate"] for e in es) for es in at],
            lo=[min(e["pass_rate"] for e in es) for es in at],
            hi=[max(e["pass_rate"] for e in es) for es in at],
        )
    return out


PAGE_TITLE = "TinyAgent co-simulated in the pipeline: held-out pass rate by design and correction"
"""The ``<title>`` of the page :func:`write_html` writes (its tab, bookmark and history entry)."""


def write_html(records: Sequence[dict[str, Any]], path: str | Path, target: float) -> None:
    """Held-out pass rate vs simulated hours (top) and trained episodes (bottom); a column per correction."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    cv = curves(records)
    corrs = list(dict.fromkeys(c for _, c in cv))
    designs = list(dict.fromkeys(d for d, _ in cv))
    fig = make_subplots(
        rows=2, cols=len(corrs), subplot_titles=[f"correction: {c}" for c in corrs], vertical_spacing=0.12
    )
    palette = qualitative.Plotly
    for (design, corr), c in cv.items():
        col, color = corrs.index(corr) + 1, palette[designs.index(design) % len(palette)]
        for row, xkey in ((1, "sim_h"), (2, "episodes")):
            x = c[xkey]
            fig.add_trace(
                go.Scatter(
                    x=x + x[::-1], y=c["hi"] + c["lo"][::-1], fill="toself", fillcolor=color, opacity=0.15,
                    mode="lines",  # plotly's default for 20 points or fewer ringed the band with markers
                    line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=design,
                ),
                row=row, col=col,
            )  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    x=x, y=c["mean"], mode="lines+markers", name=design, line=dict(color=color),
                    legendgroup=design, showlegend=row == 1 and col == 1,
                ),
                row=row, col=col,
            )  # fmt: skip
    for col in range(1, len(corrs) + 1):
        fig.update_xaxes(title_text="simulated hours", row=1, col=col)
        fig.update_xaxes(title_text="trained episodes", row=2, col=col)
        fig.update_yaxes(title_text="held-out pass rate", range=[0, 1], row=1, col=col)
        fig.update_yaxes(title_text="held-out pass rate", range=[0, 1], row=2, col=col)
        for row in (1, 2):
            fig.add_hline(
                y=target, line_dash="dot", line_color="grey", annotation_text=f"target {target:g}",
                annotation_position="bottom right", row=row, col=col,  # type: ignore[arg-type]
            )  # fmt: skip
    seeds = max(sum(1 for r in records if (r["design"], r["correction"]) == k) for k in cv)
    what = f"mean of {seeds} seeds, band = min..max" if seeds > 1 else "one seed"
    fig.update_layout(
        title=dict(text=f"TinyAgent co-simulated in the pipeline: {what}", y=0.985),
        height=900,  # no width: the page's (a column per correction, 4 of them fit a laptop's)
        legend=dict(orientation="h", x=0.0, y=1.045, xanchor="left", yanchor="bottom"),
        margin=dict(t=150),
    )  # fmt: skip
    page = io.StringIO()
    fig.write_html(  # embedded: a CDN script renders blank offline
        page,
        include_plotlyjs=True,
        div_id="figure",  # the same runs, the same bytes (plotly's default id is random)
        config={"responsive": True},
        default_width="100%",
        default_height="900px",
    )
    write_text_atomic(path, titled_page(page.getvalue(), PAGE_TITLE))


def to_json(records: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def clean(x: Any) -> Any:
        return None if isinstance(x, float) and not math.isfinite(x) else x

    return dict(table=[{k: clean(v) for k, v in r.items()} for r in rows], runs=list(records))


PROG = "python -m scenarios.cosim"


def cli(argv: Sequence[str]) -> int:
    ap = NumbersParser(prog=PROG, description=__doc__.split("\n\n")[0])  # --lr -1e-3: a number
    ap.add_argument("--designs", default=",".join(DESIGNS), help=f"comma list of: {', '.join(DESIGNS)}")
    ap.add_argument("--corrections", default="none,tis", help=f"comma list of: {', '.join(CORRECTIONS)}")
    ap.add_argument("--seeds", type=int, default=3, help="run seeds 0 .. N-1")
    ap.add_argument("--seed-list", help="comma list of seeds to run exactly (instead of --seeds)")
    ap.add_argument("--gym", choices=list(GYMS), default=DEFAULT_GYM, help="which bug-fix gym")
    ap.add_argument("--resume", action="store_true", help="keep the runs already in --json, skip them")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default: RLConfig's)")
    ap.add_argument(
        "--target",
        type=float,
        default=None,
        help=f"target held-out pass rate (default {DEFAULT_TARGET}; with --retable, the stored table's)",
    )
    ap.add_argument(
        "--also-target",
        type=float,
        help="a second target pass rate for the table (with --retable, the stored table's if it has one)",
    )
    ap.add_argument("--eval-every", type=int, default=5, help="evaluate every k steps")
    ap.add_argument("--json", help="write the table, per-run summaries and curves here")
    ap.add_argument("--html", help="write the figure here")
    ap.add_argument(
        "--perf",
        metavar="DESIGN",
        help="only measure CPU time against train_rl (a design or a comma list; --json writes the "
        "runs): one run per seed (default 5 seeds, "
        f"{','.join(map(str, PERF_SEEDS))}; --seed-list overrides), per-run ratios and their median",
    )
    ap.add_argument("--retable", metavar="JSON", help="only re-print the table of a stored --json file")
    args = ap.parse_args(list(argv))
    _check_flags(ap, args)
    kept = Kept(args.json or "")
    try:
        with sigterm_as_interrupt():  # SIGTERM unwinds as Ctrl-C does
            return _run(ap, args, kept)
    except KeyboardInterrupt:  # one line, never SimPy's traceback: --json holds every finished run
        if args.json:  # what it keeps, or that it was not changed (it may hold earlier runs)
            return kept.interrupted(PROG, resumable=True)
        print(f"{PROG}: interrupted: no run was saved (without --json none is)", file=sys.stderr, flush=True)
        return INTERRUPTED


def _run(ap: argparse.ArgumentParser, args: argparse.Namespace, kept: Kept) -> int:
    """The mode the flags ask for; ``kept`` follows what ``--json`` holds in the grid."""
    try:
        if args.retable is not None:
            stored_file = _stored(args.retable, "--retable")
            records = in_design_order(stored_file["runs"])
            stored_target, stored_also = _stored_targets(stored_file)
            if args.target is None:  # re-print what was stored, unless asked for another target
                args.target = stored_target
                if args.also_target is None:
                    args.also_target = stored_also
            rows = aggregate(records, args.target, args.also_target)
            print(format_table(rows, args.target))
            print("\n" + claims_table(records))
            print("\n" + race_table(records, args.target))
            if args.also_target is not None:
                print("\n" + race_table(records, args.also_target))
            if args.json:  # rewrite the stored table with this aggregation
                write_text_atomic(args.json, json.dumps(to_json(records, rows), indent=1))
            if args.html:
                write_html(records, args.html, args.target)
            return 0
        if args.target is None:
            args.target = DEFAULT_TARGET
        seed_list = _seed_list(args.seed_list) if args.seed_list else None
        if args.perf is not None:  # one design or a comma list, each over the same seeds
            outs = [
                perf_protocol(d, args.steps, seed_list or PERF_SEEDS, args.gym, lr=args.lr)
                for d in _names(args.perf, list(DESIGNS), "--perf")
            ]
            lines = ["design      | per-run ratio (cosim / train_rl CPU s) | median | max | goal"]
            for out in outs:
                verdict = ("met" if out["meets_goal"] else "NOT met") if out["judged"] else "not judged"
                lines.append(
                    f"{out['design']:11s} | {' '.join(f'{x:.2f}' for x in out['ratios']):38s} | "
                    f"{out['median']:6.2f} | {out['max']:4.2f} | {verdict}"
                )
            lines.append(
                f"goal: median <= {PERF_GOAL} and every run <= {PERF_RUN_LIMIT}, on {PERF_STEPS}-step runs "
                f"over {len(PERF_SEEDS)} seeds or more (others are not judged against it)"
            )
            print("\n".join(lines))
            if args.json:
                write_text_atomic(args.json, json.dumps(dict(table="\n".join(lines), designs=outs), indent=1))
            return 0
        designs = _names(args.designs, list(DESIGNS), "--designs")
        corrections = _names(args.corrections, list(CORRECTIONS), "--corrections")
        if not 1 <= args.seeds <= CLI_LIMITS["seeds"]:
            raise FieldError(f"--seeds must be 1 to {CLI_LIMITS['seeds']:,}, got {args.seeds:,}", "--seeds")
        rl = RLConfig() if args.lr is None else RLConfig(lr=args.lr)
        base = CosimConfig(
            steps=args.steps,
            target_pass_rate=args.target,
            eval_every_steps=args.eval_every,
            gym=args.gym,
            rl=rl,
        )
        if args.resume and not args.json:
            raise FieldError("--resume needs --json", "--resume")
        stored = args.resume and Path(args.json).exists()
        records = _stored_runs(args.json, "--json") if stored else []
        for r in records:  # a run of other settings would share a cell (and a race) with the new
            if (problem := _settings_mismatch(r, base)) is not None:
                raise FieldError(
                    f"--resume: {args.json} holds runs {problem}: resume with its settings, "
                    "or write another --json",
                    "--resume",
                )
        if left := [r for r in records if _incomplete(r, base)]:  # run again, as offpolicy's scripts do
            records = [r for r in records if not _incomplete(r, base)]
            print(f"{args.json}: {len(left)} incomplete run(s) left out, run again", file=sys.stderr)
    except ValueError as exc:
        ap.error(str(exc))
    kept.before = len(records)

    def save(r: CosimResult) -> None:  # after every run, so an interrupted grid can --resume
        done = [*records, run_record(r)]
        if args.json:  # whole or not at all: an interrupt mid-write leaves the runs before
            write_text_atomic(
                args.json, json.dumps(to_json(done, aggregate(done, args.target, args.also_target)), indent=1)
            )
            kept.written = len(done)
        records[:] = done

    run_grid(designs, corrections, seed_list or args.seeds, base, done=list(records), on_run=save)
    records[:] = in_design_order(records)
    rows = aggregate(records, args.target, args.also_target)
    print(format_table(rows, args.target))
    print("\n" + claims_table(records))
    print("\n" + race_table(records, args.target))
    if args.json:
        write_text_atomic(args.json, json.dumps(to_json(records, rows), indent=1))
    if args.html:
        write_html(records, args.html, args.target)
    return 0
