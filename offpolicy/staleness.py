"""Section 13.5 over several seeds: what a behaviour policy ``lag`` updates old does to learning.

``python -m offpolicy.staleness --lags 0 2 4 8 --corrections none tis mis --seeds 3 --steps 40
--json results/offpolicy/staleness.json`` trains one copy of the RL base per (lag, correction,
seed), prints the chapter's table with every cell a mean ± 95% interval over seeds, writes all
runs to the JSON file (after each run, so ``--resume`` continues an interrupted grid) and a
Plotly figure of reward curves with seed bands next to it (``--html``). ``--grid chapter``
runs only the chapter's seven configurations; corrections at lag 0 are skipped unless
``--grid full`` (at lag 0 there is nothing to correct). ``--seed-list 101 202 ...`` runs exactly
those seeds (instead of ``range(--seeds)``). Every cell is ``mean [lo, hi]`` with a 95% t
interval, and a paired table follows: each correction minus ``none`` at the same lag, and each
uncorrected lag minus lag 0, on the seeds both ran, marked significant only when the interval
excludes 0. ``--gym defect`` runs the defect gym instead of the default issue gym.

A run whose numbers stop being finite (a learning rate far too large) is kept as diverged and
counted as collapsed. Ctrl-C (or SIGTERM) stops the grid with one line saying how many finished
runs the JSON keeps, and exit status 130; ``--resume`` continues from them.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

import torch

from offpolicy.checks import FieldError
from offpolicy.experiment import (
    NumbersParser,
    check_cli_args,
    check_lags,
    diverged_note,
    eval_trace,
    load_base,
    paired_table,
    run_meta,
    run_one,
    seeds_from_args,
    show_table,
    summary_table,
    write_reward_figure,
)
from offpolicy.gym import DEFAULT_GYM, GYMS
from offpolicy.interrupts import Kept, run_keeping
from offpolicy.rl import RLConfig
from offpolicy.runfile import Cell, check_resume, read_runs, run_cells, stored_runs
from offpolicy.update import CORRECTIONS

PROG = "python -m offpolicy.staleness"
KEY_FIELDS = ("lag", "correction", "seed", "lr", "steps")  # a run of the grid; --resume skips those held
CHAPTER_GRID = [(0, "none"), (2, "none"), (4, "none"), (8, "none"), (4, "tis"), (8, "tis"), (8, "mis")]


def build_grid(lags: list[int], corrections: list[str], grid: str) -> list[tuple[int, str]]:
    """(lag, correction) pairs to run for ``grid`` in {'cross', 'full', 'chapter'}."""
    for c in corrections:
        if c not in CORRECTIONS:
            raise FieldError(f"corrections: unknown correction {c!r}", "corrections")
    for lag in lags:
        if lag < 0:
            raise FieldError(f"lags: lag must be >= 0, got {lag}", "lags")
    if grid == "chapter":
        return list(CHAPTER_GRID)
    pairs = [(lag, c) for lag in lags for c in corrections]
    if grid == "cross":
        pairs = [(lag, c) for lag, c in pairs if lag > 0 or c == "none"]
    return pairs


def empty_grid(lags: list[int], corrections: list[str], grid: str) -> str | None:
    """Why ``build_grid`` would give no (lag, correction) pair (None: it gives some). Only
    ``--grid cross`` can: it drops every correction at lag 0, so ``--lags 0 --corrections tis``
    left nothing to train, and the table crashed after the base was loaded."""
    if build_grid(lags, corrections, grid):
        return None
    dropped = ", ".join(corrections)
    return (
        f"--lags {' '.join(map(str, lags))} with --corrections {dropped}: no run to train, since --grid "
        f"{grid} skips every correction at lag 0 (there is nothing to correct); add a lag > 0, "
        "add 'none' to --corrections, or pass --grid full"
    )


def main(argv: list[str] | None = None) -> int:
    parser = NumbersParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--lags", type=int, nargs="+", default=[0, 2, 4, 8])
    parser.add_argument("--corrections", nargs="+", default=["none", "tis", "mis"])
    parser.add_argument("--seeds", type=int, default=3, help="run seeds 0 .. N-1")
    parser.add_argument("--seed-list", type=int, nargs="+", default=None, help="run exactly these seeds")
    parser.add_argument(
        "--eval-every", type=int, default=5, help="evaluate the current policy every k steps (0: never)"
    )
    parser.add_argument("--gym", choices=list(GYMS), default=DEFAULT_GYM, help="which bug-fix gym")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: RLConfig's)")
    parser.add_argument("--grid", choices=["cross", "full", "chapter"], default="cross")
    parser.add_argument("--json", default="results/offpolicy/staleness.json")
    parser.add_argument("--html", default=None, help="figure path (default: JSON path with .html)")
    parser.add_argument("--resume", action="store_true", help="skip runs already in the JSON file")
    parser.add_argument("--table-only", action="store_true", help="re-render table and figure from the JSON")
    args = parser.parse_args(argv)
    check_cli_args(parser, args)
    if args.grid == "chapter" and not args.table_only:  # its lags, not --lags
        check_lags(parser, sorted({lag for lag, _ in CHAPTER_GRID}), args.steps, "--grid chapter")
    if not args.table_only and (problem := empty_grid(args.lags, args.corrections, args.grid)):
        parser.error(problem)  # before the base is loaded and evaluated: a min() of no runs after
    check_resume(parser, args, {"gym": [args.gym], "sampler": [None]})
    torch.set_num_threads(1)
    if args.table_only:
        body = lambda _: report(read_runs(args.json), args.json, args.html)  # noqa: E731
    else:
        body = lambda kept: run_grid(args, argv, kept)  # noqa: E731
    return run_keeping(PROG, args.json, body, resumable=True)


def run_grid(args: argparse.Namespace, argv: list[str] | None, kept: Kept) -> None:
    """Every (lag, correction, seed) of the grid not yet in the JSON, then the report; ``kept``
    follows what the JSON holds."""
    pairs = build_grid(args.lags, args.corrections, args.grid)
    seeds = seeds_from_args(args.seeds, args.seed_list)
    base, tok, base_held = load_base(args.gym)
    print(
        f"RL base held-out: pass rate {base_held['pass_rate']:.3f}, reads {base_held['reads']:.2f}",
        flush=True,
    )
    runs = stored_runs(args.json, args.resume, KEY_FIELDS)
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = {**run_meta(args.json, args.resume, command), "base_heldout": base_held, "gym": args.gym}
    lr = args.lr or RLConfig().lr
    cells = [
        Cell(
            (lag, correction, seed, lr, args.steps),
            functools.partial(
                run_one,
                base,
                tok,
                lag,
                correction,
                seed,
                args.steps,
                args.lr,
                eval_every=args.eval_every,
                gym=args.gym,
            ),
        )
        for lag, correction in pairs
        for seed in seeds
    ]

    def said(run: dict[str, Any]) -> None:
        trace = eval_trace(run)  # empty: no evaluation fell within the run's steps (or --eval-every 0)
        print(
            f"lag {run['lag']} {run['correction']:<7} seed {run['seed']}: held-out "
            f"{run['heldout']['pass_rate']:.3f} ({run['train_seconds']:.0f} s, {time.strftime('%H:%M:%S')})"
            + (f"; current policy by update (pass/invalid): {trace}" if trace else "")
            + diverged_note(run),
            flush=True,
        )

    runs = run_cells(args.json, meta, cells, KEY_FIELDS, runs, kept, said)
    report(runs, args.json, args.html)


def comparison_pairs(runs: list[dict[str, Any]]) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """The "X beats Y" questions: each correction vs none at its lag, each stale none vs lag 0."""
    cells = sorted({(r["lag"], r["correction"]) for r in runs})
    out: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    for lag, c in cells:
        if c != "none" and (lag, "none") in cells:
            out.append(((lag, c), (lag, "none")))
        if c == "none" and lag > 0 and (0, "none") in cells:
            out.append(((lag, "none"), (0, "none")))
    return out


def report(runs: list[dict[str, Any]], json_path: str, html: str | None) -> None:
    """Print the table, write it next to the JSON (.txt) and the reward figure (.html)."""
    pairs = comparison_pairs(runs)
    table = summary_table(runs) + ("\n\n" + paired_table(runs, pairs) if pairs else "")
    title = "TinyAgent reward under stale sampling (95% band over seeds)"
    write_reward_figure(runs, html or str(Path(json_path).with_suffix(".html")), ("lag", "correction"), title)
    show_table(table, json_path)


if __name__ == "__main__":
    from offpolicy.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
