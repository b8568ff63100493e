"""Section 13.6 on TinyAgent: an fp8-rounded sampler, with and without correction, over seeds.

``python -m offpolicy.fp8 --seeds 3 --steps 40 --json results/offpolicy/fp8.json`` trains at
lag 0 with ``sampler=fp8_copy`` (every weight of the behaviour copy rounded to float8 e4m3 and
back) for each correction, plus an exact-sampler baseline, and prints the mismatch, its health
distribution (mean / p99 / max of |log pi_old - log mu|), the share of tokens over the cap,
the last-10-step reward and the held-out pass rate, each as mean [lo, hi] with a 95% t
interval over seeds, the collapsed-run count, and the paired held-out difference of each fp8
setting against the exact sampler. ``--seed-list`` runs exactly the given seeds. A run that
diverges (its numbers stop being finite) is kept as diverged and counted as collapsed. Ctrl-C (or
SIGTERM) stops it with one line saying how many finished runs the JSON keeps, and exit status 130;
``--resume`` continues from them (:func:`offpolicy.runfile.run_cells`, the loop of ``staleness``
and ``lr_sweep`` too), and refuses a file of another gym, steps, lr or script.
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
    history_mean,
    load_base,
    paired_table,
    run_one,
    seeds_from_args,
    show_table,
    window_of,
)
from offpolicy.gym import DEFAULT_GYM, GYMS, Tokenizer
from offpolicy.interrupts import Kept, run_keeping
from offpolicy.rl import RLConfig
from offpolicy.runfile import Cell, check_resume, read_runs, run_cells, stored_runs
from offpolicy.stats import clip_note
from offpolicy.update import fp8_copy

PROG = "python -m offpolicy.fp8"
KEY_FIELDS = ("sampler", "correction", "seed", "lr", "steps")  # a run of the study; --resume skips those held


def main(argv: list[str] | None = None) -> int:
    parser = NumbersParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--corrections", nargs="+", default=["none", "tis"])
    parser.add_argument("--seeds", type=int, default=3, help="run seeds 0 .. N-1")
    parser.add_argument("--seed-list", type=int, nargs="+", default=None, help="run exactly these seeds")
    parser.add_argument(
        "--eval-every", type=int, default=5, help="evaluate the current policy every k steps (0: never)"
    )
    parser.add_argument("--gym", choices=list(GYMS), default=DEFAULT_GYM, help="which bug-fix gym")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: RLConfig's)")
    parser.add_argument("--json", default="results/offpolicy/fp8.json")
    parser.add_argument("--resume", action="store_true", help="skip runs already in the JSON file")
    parser.add_argument("--table-only", action="store_true", help="re-render the table from the JSON")
    args = parser.parse_args(argv)
    check_cli_args(parser, args)
    check_resume(parser, args, {"gym": [args.gym], "sampler": ["exact", "fp8"]})
    if args.table_only:
        runs = read_runs(args.json)
        if not any(r.get("sampler") == "exact" for r in runs):  # another script's file (IndexError before)
            parser.error(
                f"--table-only: {args.json} holds no runs of the exact sampler: not a results file of {PROG}"
            )
        found = list(dict.fromkeys(r["correction"] for r in runs if r.get("sampler") == "fp8"))
        show_table(fp8_table(runs, found), args.json)
        return 0
    torch.set_num_threads(1)
    return run_keeping(PROG, args.json, lambda kept: compare(args, argv, kept), resumable=True)


def compare(args: argparse.Namespace, argv: list[str] | None, kept: Kept) -> None:
    """Every (sampler, correction, seed), then the table; ``kept`` follows what the JSON holds."""
    seeds = seeds_from_args(args.seeds, args.seed_list)
    base, tok, base_held = load_base(args.gym)
    settings = [("exact", "none")] + [("fp8", c) for c in args.corrections]
    runs = stored_runs(args.json, args.resume, KEY_FIELDS)
    lr = args.lr or RLConfig().lr
    cells = [
        Cell(
            (name, correction, seed, lr, args.steps),
            functools.partial(one_run, args, base, tok, name, correction, seed),
        )
        for name, correction in settings
        for seed in seeds
    ]
    meta = {"command": f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)}

    def said(run: dict[str, Any]) -> None:
        if note := diverged_note(run):
            print(f"{run['sampler']} {run['correction']} seed {run['seed']}{note}", flush=True)

    runs = run_cells(args.json, meta, cells, KEY_FIELDS, runs, kept, said)
    print(f"RL base held-out pass rate {base_held['pass_rate']:.3f}")
    show_table(fp8_table(runs, list(args.corrections)), args.json)


def one_run(
    args: argparse.Namespace, base: torch.nn.Module, tok: Tokenizer, sampler: str, correction: str, seed: int
) -> dict[str, Any]:
    """One run at lag 0 with the ``sampler`` (``exact`` or ``fp8``) and ``correction``."""
    run = run_one(
        base,
        tok,
        0,
        correction,
        seed,
        args.steps,
        args.lr,
        sampler=fp8_copy if sampler == "fp8" else None,
        eval_every=args.eval_every,
        gym=args.gym,
    )
    run["sampler"] = sampler
    return run


def fp8_table(runs: list[dict[str, Any]], corrections: list[str]) -> str:
    """The exact sampler's row and one per fp8 correction, then each fp8 row against the exact
    one on shared seeds (what ``--json``'s ``.txt`` holds; ``--table-only`` re-renders it). Each
    interval is cut at what its metric can take (:func:`~offpolicy.experiment.bounds_of`: the
    mismatch and its health at or above 0, the over-cap share, reward and pass rate in [0, 1]), the
    cut end marked ``*`` and explained by a line under the rows."""
    settings = [("exact", "none")] + [("fp8", c) for c in corrections]
    w = window_of(runs)  # 10 steps, or every step of a shorter run (a label that says so)
    lines = [
        f"sampler correction | n | mismatch | health p99 | health max | over cap | last-{w} reward "
        "| held-out | collapsed"
    ]
    printed: list[str] = []
    for name, correction in settings:
        group = [r for r in runs if r["sampler"] == name and r["correction"] == correction]
        steps = group[0]["steps"]
        cells = [
            fmt_ci([history_mean(r, m) for r in group], 4, bounds_of(m))
            for m in ("mismatch", "health_p99", "health_max", "over_cap")
        ]
        cells += [
            fmt_ci([history_mean(r, "reward", steps - w) for r in group], 3, bounds_of("reward")),
            fmt_ci([r["heldout"]["pass_rate"] for r in group], 3, bounds_of("pass_rate")),
        ]
        printed += cells
        cells.append(f"{sum(r['heldout']['pass_rate'] < COLLAPSED for r in group)}/{len(group)}")
        lines.append(f"{name:<7} {correction:<10} | {len(group)} | " + " | ".join(cells))
    if (note := clip_note(printed)) is not None:  # a cell cut at its metric's bound: say what * means
        lines.append(note)
    pairs = [(("fp8", c), ("exact", "none")) for c in corrections]
    return "\n".join(lines) + "\n\n" + paired_table(runs, pairs, ("sampler", "correction"))


if __name__ == "__main__":
    from offpolicy.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
