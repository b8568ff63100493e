"""Exercise 3: does lag 8 still hurt at a lower or higher learning rate?

``python -m offpolicy.lr_sweep --lrs 3e-4 1e-3 3e-3 --lags 0 8 --seeds 3 --steps 40
--json results/offpolicy/lr_sweep.json`` runs uncorrected training at each (learning rate,
lag) and prints held-out pass rate, training reward of the last 10 steps and the mean
mismatch, each mean ± 95% interval over seeds. Staleness is measured in updates, so the
chapter's "policy speed" argument predicts that the damage of a fixed lag grows with the
learning rate, and the ``mismatch`` column (mean |log pi_old - log mu|) shows by how much
the sampler has drifted from the trainer.

An lr at which training diverges (its numbers stop being finite) is what the sweep exists to find:
such a run is kept as diverged and counted as collapsed, and its reward cells leave out the steps
it never reached. Ctrl-C (or SIGTERM) stops the sweep with one line saying how many finished runs
the JSON keeps, and exit status 130; ``--resume`` continues from them.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

import torch

from offpolicy.experiment import (
    COLLAPSED,
    NumbersParser,
    bounds_of,
    check_cli_args,
    diverged_note,
    fmt_ci,
    group_runs,
    history_mean,
    load_base,
    paired_table,
    run_meta,
    run_one,
    seeds_from_args,
    show_table,
    window_of,
)
from offpolicy.gym import DEFAULT_GYM, GYMS
from offpolicy.interrupts import Kept, run_keeping
from offpolicy.runfile import Cell, check_resume, read_runs, run_cells, stored_runs
from offpolicy.stats import clip_note

PROG = "python -m offpolicy.lr_sweep"
KEY_FIELDS = ("lr", "lag", "correction", "seed", "steps")  # a run of the sweep; --resume skips those held


def main(argv: list[str] | None = None) -> int:
    parser = NumbersParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    parser.add_argument("--lags", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--corrections", nargs="+", default=["none"])
    parser.add_argument("--seeds", type=int, default=3, help="run seeds 0 .. N-1")
    parser.add_argument("--seed-list", type=int, nargs="+", default=None, help="run exactly these seeds")
    parser.add_argument(
        "--eval-every", type=int, default=5, help="evaluate the current policy every k steps (0: never)"
    )
    parser.add_argument("--gym", choices=list(GYMS), default=DEFAULT_GYM, help="which bug-fix gym")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--json", default="results/offpolicy/lr_sweep.json")
    parser.add_argument("--resume", action="store_true", help="skip runs already in the JSON file")
    parser.add_argument("--table-only", action="store_true", help="re-render the table from the JSON")
    args = parser.parse_args(argv)
    check_cli_args(parser, args)
    check_resume(parser, args, {"gym": [args.gym], "sampler": [None]})
    if args.table_only:
        show_table(lr_table(read_runs(args.json)), args.json)
        return 0
    torch.set_num_threads(1)
    return run_keeping(PROG, args.json, lambda kept: sweep(args, argv, kept), resumable=True)


def sweep(args: argparse.Namespace, argv: list[str] | None, kept: Kept) -> None:
    """Every (lr, lag, correction, seed) not yet in the JSON, then the table; ``kept`` follows
    what the JSON holds."""
    seeds = seeds_from_args(args.seeds, args.seed_list)
    base, tok, _ = load_base(args.gym)
    runs = stored_runs(args.json, args.resume, KEY_FIELDS)
    meta = run_meta(args.json, args.resume, f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv))
    cells = [
        Cell(
            (lr, lag, correction, seed, args.steps),
            functools.partial(
                run_one,
                base,
                tok,
                lag,
                correction,
                seed,
                args.steps,
                lr,
                eval_every=args.eval_every,
                gym=args.gym,
            ),
        )
        for lr in args.lrs
        for lag in args.lags
        for correction in args.corrections
        for seed in seeds
    ]

    def said(run: dict[str, Any]) -> None:
        setting = f"lr {run['lr']:g} lag {run['lag']} {run['correction']} seed {run['seed']}"
        print(f"{setting} done{diverged_note(run)}", flush=True)

    runs = run_cells(args.json, meta, cells, KEY_FIELDS, runs, kept, said)
    show_table(lr_table(runs), args.json)


def lr_table(runs: list[dict[str, Any]]) -> str:
    """One row per (lr, lag, correction), then each lag against lag 0 at the same lr and
    correction on shared seeds (what ``--json``'s ``.txt`` holds; ``--table-only`` re-renders it).
    Each interval is cut at what its metric can take (:func:`~offpolicy.experiment.bounds_of`: a
    reward or pass rate in [0, 1], a mismatch or reads at or above 0), the cut end marked ``*`` and
    explained by a line under the rows."""
    w = window_of(runs)  # 10 steps, or every step of a shorter run (a label that says so)
    lines = [
        f"      lr lag correction | n | reward [0-{w}) | reward last {w} | mismatch | over cap"
        " | held-out | reads | collapsed"
    ]
    printed: list[str] = []
    for (lr, lag, correction), group in group_runs(runs, ("lr", "lag", "correction")).items():
        steps = group[0]["steps"]
        cells = [
            fmt_ci([history_mean(r, "reward", 0, w) for r in group], bounds=bounds_of("reward")),
            fmt_ci([history_mean(r, "reward", steps - w) for r in group], bounds=bounds_of("reward")),
            fmt_ci([history_mean(r, "mismatch") for r in group], 3, bounds_of("mismatch")),
            fmt_ci([history_mean(r, "over_cap") for r in group], 3, bounds_of("over_cap")),
            fmt_ci([r["heldout"]["pass_rate"] for r in group], bounds=bounds_of("pass_rate")),
            fmt_ci([r["heldout"]["reads"] for r in group], bounds=bounds_of("reads")),
        ]
        printed += cells
        cells.append(f"{sum(r['heldout']['pass_rate'] < COLLAPSED for r in group)}/{len(group)}")
        lines.append(f"{lr:8.0e} {lag:3d} {correction:<10} | {len(group)} | " + " | ".join(cells))
    if (note := clip_note(printed)) is not None:  # a cell cut at its metric's bound: say what * means
        lines.append(note)
    settings = list(group_runs(runs, ("lr", "lag", "correction")))
    pairs: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [
        (c, (c[0], 0, c[2])) for c in settings if c[1] != 0 and (c[0], 0, c[2]) in settings
    ]
    if not pairs:  # the header of a paired table with no row under it said nothing
        lags = sorted({lag for _, lag, _ in settings})
        why = "no lag 0 to compare with" if 0 not in lags else "no lag above 0 to compare with lag 0"
        return "\n".join(lines) + f"\n\nno paired table: {why} (lags {lags})"
    return "\n".join(lines) + "\n\n" + paired_table(runs, pairs, ("lr", "lag", "correction"))


if __name__ == "__main__":
    from offpolicy.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
