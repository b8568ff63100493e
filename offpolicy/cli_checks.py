"""The command-line checks the training CLIs (``offpolicy.staleness``, ``lr_sweep``, ``fp8``) share.

Everything here runs before any training, on the parsed flags: :func:`check_cli_args` turns a bad
value, an output path that cannot be written, or a ``--json`` file that a run would overwrite or
cannot resume into a usage error naming the flag (exit 2), never a traceback after minutes of
training. It is apart from :mod:`offpolicy.experiment` (the runs, the tables and the figures) so
that module stays about running and reporting; every name here is re-exported there, so
``from offpolicy.experiment import check_cli_args`` and the like keep working.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from offpolicy.checks import SEED_MAX, FieldError, check_output, lr_problem, refuse, refuse_empty_path
from offpolicy.rl import RLConfig
from offpolicy.runfile import read_runs
from offpolicy.update import CORRECTIONS

EVAL_SEED = 1000
"""The evaluation's generator is seeded ``EVAL_SEED + seed`` (:func:`offpolicy.experiment.run_one`),
so a ``--seed-list`` seed is at most ``SEED_MAX - EVAL_SEED``."""


def resume_mismatch(stored: Sequence[dict[str, Any]], args: argparse.Namespace) -> str | None:
    """Why the runs of a ``--json`` file cannot be resumed with ``args`` (None: they can): a run
    of other steps or, where the command has one learning rate, another lr would be tabled in the
    same cell as the new runs (a seed counted twice, 5- and 6-step runs pooled). Said plainly
    (``holds runs of 8 steps, not --steps 6``; it printed the stored values as a list of strings)."""
    steps = {r.get("steps") for r in stored}
    if stored and steps != {args.steps}:
        fix = f"--steps {next(iter(steps))}" if len(steps) == 1 and None not in steps else "its settings"
        return f"holds runs of {held_values(steps)} steps, not --steps {args.steps}: resume with {fix}"
    lr = getattr(args, "lr", None)
    if not hasattr(args, "lrs") and stored:  # one lr a command (the lr sweep has it as an axis)
        want = lr if lr is not None else RLConfig().lr
        lrs = {r.get("lr") for r in stored}
        if lrs != {want}:
            fix = f"--lr {next(iter(lrs)):g}" if len(lrs) == 1 and None not in lrs else "its settings"
            return f"holds runs at lr {held_values(lrs)}, not --lr {want:g}: resume with {fix}"
    return None


def held_values(values: Collection[object]) -> str:
    """The values stored runs hold, as a sentence says them: ``8``, ``6 and 8``, ``0.0003 and
    unrecorded`` (a run without the field)."""
    known = sorted(f"{v:g}" if isinstance(v, float) else str(v) for v in values if v is not None)
    said = known + ["unrecorded"] * (None in values)
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + f" and {said[-1]}"


TABLE_READS_COMMON = ("steps", "heldout.pass_rate", "history.reward", "history.mismatch", "history.over_cap")
"""What every script's table reads in each stored run (beside the key fields of
:data:`offpolicy.runfile.RUN_KEYS`)."""

TABLE_READS = {
    "python -m offpolicy.staleness": (*TABLE_READS_COMMON, "lag", "heldout.reads", "history.clip_frac"),
    "python -m offpolicy.fp8": (*TABLE_READS_COMMON, "sampler", "history.health_p99", "history.health_max"),
    "python -m offpolicy.lr_sweep": (*TABLE_READS_COMMON, "lr", "lag", "heldout.reads"),
}
"""The fields of a stored run each script's table (and figure) reads, by the script's ``prog``:
``--table-only`` refuses a run without one by index and field (:func:`offpolicy.runfile.read_runs`),
where the table raised a ``KeyError``. ``--resume`` checks only the values present: it trains again
a run that lacks its held-out result (:func:`offpolicy.runfile.complete`)."""


CLI_LIMITS = {"steps": 100_000, "seeds": 1_000}
"""The most steps a run and seeds a study takes on the training CLIs: a run of 40 steps takes
seconds, so these are hours to days, and far past them a typo ran until killed (``--seeds 10**8``
first built a list of the seeds)."""


def check_cli_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks the training CLIs (``offpolicy.staleness``, ``lr_sweep``, ``fp8``) share, made
    before any training: a bad value is ``parser.error`` (usage, exit 2) naming the flag, not a
    traceback, and never an error raised after minutes of training (``--steps 0`` divided by
    zero in the report). Flags a CLI does not have are skipped.

    Each flag's own refusal comes first, the cross-check of ``--lags`` against ``--steps``
    (:func:`check_lags`) last: the default lags reach up to 8, so with ``--steps 4`` that check,
    made first, hid the real error (``--corrections tiss``, ``--lrs -1e-3``, a ``--json`` path with
    no directory) behind a complaint about a flag the user never gave. ``--grid chapter`` runs
    its own lags, which its script checks after this."""
    for dest in ("json", "html"):  # first: --json '' is '.', which --resume read as a file
        refuse_empty_path(parser, f"--{dest}", getattr(args, dest, None))
    for flag in ("steps", "seeds", "eval_every"):
        v = getattr(args, flag, None)
        if flag == "seeds" and getattr(args, "seed_list", None):
            continue  # --seed-list replaces --seeds
        least = 0 if flag == "eval_every" else 1  # --eval-every 0: never
        if v is not None and v < least:
            parser.error(f"--{flag.replace('_', '-')} must be at least {least}, got {v}")
        most = CLI_LIMITS.get(flag)
        if v is not None and most is not None and v > most:
            parser.error(
                f"--{flag.replace('_', '-')} must be at most {most:,} (split a longer study), got {v:,}"
            )
    for flag in ("lags", "seed_list"):
        bad = [v for v in getattr(args, flag, None) or () if v < 0]
        if bad:
            parser.error(f"--{flag.replace('_', '-')} must be >= 0, got {bad[0]}")
    for flag in ("seed_list", "lags", "lrs", "corrections"):  # a repeat trains one seed twice, counted as two
        values = getattr(args, flag, None) or []
        if len(set(values)) != len(values):
            parser.error(f"--{flag.replace('_', '-')}: values must be distinct, got {values}")
    unknown = [c for c in getattr(args, "corrections", None) or () if c not in CORRECTIONS]
    if unknown:
        known = ", ".join(CORRECTIONS)
        parser.error(f"--corrections: unknown correction {unknown[0]!r} (choose from {known})")
    for flag in ("lr", "lrs"):  # --lr: one float or None (RLConfig's); --lrs: a list
        value = getattr(args, flag, None)
        for lr in [value] if isinstance(value, float) else value or ():
            if (problem := lr_problem(f"--{flag}", lr)) is not None:
                parser.error(problem)
    check_output(parser, "--html", getattr(args, "html", None))  # before training
    for seed in getattr(args, "seed_list", None) or ():  # the evaluation's generator is EVAL_SEED + seed
        if seed > SEED_MAX - EVAL_SEED:
            parser.error(f"--seed-list: a seed must be at most {SEED_MAX - EVAL_SEED}, got {seed}")
    unread = ""  # why --json, which a rerun would replace, is not a results file of these scripts
    if getattr(args, "resume", False) and Path(args.json).is_file():
        try:
            stored = read_runs(args.json)  # a file of another shape, refused before any training
        except ValueError as exc:
            parser.error(f"--resume: {exc}")
        if (problem := resume_mismatch(stored, args)) is not None:
            parser.error(f"--resume: {args.json} {problem}")
    if getattr(args, "table_only", False):
        if not Path(args.json).is_file():
            parser.error(f"--table-only reads --json {args.json}, which does not exist")
        try:  # every value the table reads, checked here: not a traceback (or a wrong row) in it
            stored = read_runs(args.json, TABLE_READS.get(parser.prog, TABLE_READS_COMMON))
        except ValueError as exc:
            parser.error(f"--table-only: {exc}")
        if not stored:
            parser.error(f"--table-only: --json {args.json} holds no runs")
    else:
        # the results are written after each run (write_json: a temporary file and a rename): a
        # path that cannot be written would fail after the first run's minutes of training
        check_output(parser, "--json", getattr(args, "json", None), replace=True)
        try:  # a rerun without --resume replaced a study's finished runs with its own
            n = 0 if getattr(args, "resume", False) else len(read_runs(args.json))
        except ValueError as exc:  # not JSON, another command's file: never written over unread
            n, unread = 0, f"--json {exc}; a run would replace it: choose another path (or delete it)"
        if n:
            how = "pass --resume to continue them, or " if hasattr(args, "resume") else ""  # fp8 has none
            parser.error(
                f"--json {args.json} holds {n} finished run{'s' * (n != 1)}; {how}choose another path "
                "(or delete it)"
            )
    beside = Path(args.json)  # the table is written beside it, and (staleness) the figure unless --html
    outs = [("--json", args.json), ("--json (the table beside it)", str(beside.with_suffix(".txt")))]
    if hasattr(args, "html"):
        figure = str(beside.with_suffix(".html"))
        outs.append(("--html", args.html) if args.html else ("--json (the figure beside it)", figure))
    for i, (flag, path) in enumerate(outs):  # one file for two: --json run.txt lost its runs to the table
        for other, other_path in outs[:i]:
            if Path(path).resolve() == Path(other_path).resolve():
                what = "table" if "table" in flag else "figure"
                fix = "give --html another path" if flag == "--html" else "give --json a name ending in .json"
                parser.error(f"{flag} {path} is also {other}: the {what} would replace it; {fix}")
        if flag.startswith("--json ("):
            check_output(parser, flag, path)
    if unread:  # after the clashes above: --json run.txt is first the table's own path
        parser.error(unread)
    lags = getattr(args, "lags", None)  # last: a cross-check of two flags, one of them maybe a default
    if lags and not getattr(args, "table_only", False) and getattr(args, "grid", None) != "chapter":
        check_lags(parser, lags, args.steps, "--lags", given=lags is not parser.get_default("lags"))


def check_lags(
    parser: argparse.ArgumentParser, lags: Sequence[int], steps: int, flag: str, given: bool = True
) -> None:
    """``parser.error`` naming ``flag`` and ``--steps`` for a lag of ``steps`` or more.

    ``given=False``: ``lags`` are the script's default ``--lags`` (the user gave ``--steps`` and
    no ``--lags``), and the error opens with ``--steps``, says the lags are the default ones and
    suggests ``--lags`` below ``--steps``. :func:`check_cli_args` tells the two apart by identity:
    argparse puts the default list itself in the namespace when the flag is absent, and a new list
    when it is given (even with the default's values).

    At update t the behaviour policy is version ``max(0, t - lag)``
    (:func:`offpolicy.update.train_offpolicy`), so in a run of ``steps`` updates it is never more
    than ``steps - 1`` updates old: every lag from ``steps - 1`` up is the same run, draw for draw
    (``--lags 3 20 --steps 4`` tabled two identical runs as lag 3 and lag 20). A lag of ``steps``
    or more is therefore refused rather than warned about: the table would print it under a label
    it never had. Lags below ``steps`` all give different behaviour schedules."""
    lag = max(lags, default=0)
    if lag >= steps and not given:
        below = " ".join(map(str, sorted({*(x for x in lags if x < steps), steps - 1})))
        parser.error(
            f"--steps {steps}: the default --lags {' '.join(map(str, lags))} (--lags not given) include "
            f"lag {lag}, not below --steps {steps}: in {steps} update(s) the behaviour policy is never more "
            f"than {steps - 1} update(s) old; give --lags below {steps} (such as --lags {below}), "
            f"or --steps {lag + 1} or more"
        )
    if lag >= steps:
        parser.error(
            f"{flag}: lag {lag} is not below --steps {steps}: in {steps} update(s) the behaviour policy "
            f"is never more than {steps - 1} update(s) old, so lag {lag} would be the run of lag "
            f"{steps - 1} under another label; give lags below --steps (or --steps {lag + 1} or more)"
        )


class NumbersParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that reads a negative number in any float spelling (``-1e-3``,
    ``-.5``, ``-2E+1``) as a value, not as a flag: argparse's own rule takes ``-1e-3`` for an
    unknown option, so ``--lrs -1e-3`` said "expected at least one argument" instead of the
    learning-rate rule naming ``--lrs``. None of the scripts has an option that starts with a
    digit, so nothing else changes. This is the one place that sets argparse's private
    ``_negative_number_matcher`` (its default is ``^-\\d+$|^-\\d*\\.\\d+$``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def seeds_from_args(seeds: int, seed_list: Sequence[int] | None) -> list[int]:
    """The seeds a CLI runs: ``--seed-list`` when given, else ``range(--seeds)``."""
    if seed_list:
        if len(set(seed_list)) != len(seed_list):
            raise FieldError(f"seed-list: seeds must be distinct, got {list(seed_list)}", "seed-list")
        return list(seed_list)
    if seeds <= 0:
        raise refuse("seeds", f"must be > 0, got {seeds}")
    return list(range(seeds))
