"""The co-simulation CLI's checks: flags, output paths and stored ``--json`` files, before any run.

``python -m scenarios.cosim`` (:mod:`scenarios.cosim_report`) runs a grid for hours, so every flag,
every output path and every stored file it reads (``--retable``, or ``--json`` with ``--resume``)
is checked here first, and a bad one is a usage error naming the flag, never a traceback after the
first run. Apart from the report (the runs, the table, the JSON and the figure) so that module stays
about running and reporting; every name here is re-exported there, so
``scenarios.cosim_report._names`` and the like keep working.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offpolicy import RLConfig
from offpolicy.checks import FieldError, check_seed, lr_problem, shown
from scenarios.cosim import CosimConfig
from scenarios.outputs import check_output

#: What every run record (:func:`~scenarios.cosim_report.run_record`) carries that the tables read:
#: a stored file whose runs lack one is refused by name rather than failing inside a table.
RUN_KEYS = frozenset({"design", "correction", "seed", "batch_size", "summary", "evals"})


def _names(text: str, valid: Sequence[str], field: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise FieldError(f"{field}: unknown name(s) {bad or [text]}; valid: {', '.join(valid)}", field)
    if len(set(names)) != len(names):  # each run would be run and counted twice
        raise FieldError(f"{field}: values must be distinct, got {', '.join(names)}", field)
    return names


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise FieldError(f"--seed-list: comma list of integers, got {shown(text)}", "--seed-list") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise FieldError(f"--seed-list: distinct seeds needed, got {shown(text)}", "--seed-list")
    for seed in seeds:  # a seed torch's generator refuses fails here, not inside the first run
        check_seed("--seed-list", seed)
    return seeds


def _check_flags(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors for the flags every mode reads, before any run (a grid runs for hours)."""
    for flag, value in (("--target", args.target), ("--also-target", args.also_target)):
        if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
            ap.error(f"{flag} is a held-out pass rate in [0, 1], got {value}")
    if args.eval_every < 1:  # the table's times to target read the held-out evaluations
        ap.error(f"--eval-every must be >= 1 (the table reads the held-out pass rate), got {args.eval_every}")
    if args.lr is not None and (problem := lr_problem("--lr", args.lr)) is not None:
        ap.error(problem)  # every mode, --perf too: the rule of RLConfig.lr
    check_output(ap, "--json", args.json)
    check_output(ap, "--html", args.html)
    for flag, path in (("--json", args.json), ("--retable", args.retable)):  # the figure replaced it
        if args.html and path and _same_file(args.html, path):
            ap.error(
                f"--html {args.html} is also {flag}: the figure would replace it; give --html another path"
            )
    grid = args.retable is None and args.perf is None
    if args.json and not (grid and args.resume) and args.retable is None and Path(args.json).is_file():
        try:  # a rerun without --resume (or a --perf) replaced the grid's finished runs with its own
            n = len(_stored_runs(args.json, "--json"))
        except ValueError:  # a file of another shape (a --perf file): no finished run to lose
            n = 0
        if n:
            how = "pass --resume to continue them, or " if grid else ""
            runs = f"{n} finished run{'s' * (n != 1)}"
            ap.error(f"--json {args.json} holds {runs}; {how}choose another path (or delete it)")


def _same_file(a: str, b: str) -> bool:
    """Whether two output paths are one file (two streams, ``/dev/stdout``, are not one file)."""
    target = Path(a).resolve()
    return target == Path(b).resolve() and (target.is_file() or not target.exists())


def _same_settings(record: dict[str, Any], base: CosimConfig) -> bool:
    """Whether a stored run was made with ``base``'s learning rate, gym and steps (a resume at
    other settings reran nothing and showed the old runs)."""
    if record.get("lr", RLConfig().lr) != base.rl.lr or record.get("gym", CosimConfig().gym) != base.gym:
        return False
    return "steps" not in record or len(record["steps"]) == base.steps


def _stored_runs(path: str, flag: str = "--retable") -> list[dict[str, Any]]:
    """The runs of a ``--json`` file written before (``--retable``, or ``--json`` with
    ``--resume``): ValueError naming the flag and the file."""
    return list(_stored(path, flag)["runs"])


def _stored(path: str, flag: str) -> dict[str, Any]:
    """A ``--json`` file written before, read once: its ``runs`` checked (ValueError naming the
    flag and the file), its ``table`` as stored."""
    bad = f"{flag} {path}: not a --json file of this command (no 'runs' list of run records)"
    try:
        data = json.loads(Path(path).read_text())
        runs = data["runs"]
    except OSError as exc:
        raise FieldError(f"{flag} {path}: cannot read it ({exc.strerror})", flag, path) from None
    except (ValueError, KeyError, TypeError):
        raise FieldError(bad, flag, path) from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and r.keys() >= RUN_KEYS for r in runs):
        raise FieldError(bad, flag, path)
    return dict(data)


def _stored_targets(stored: dict[str, Any]) -> tuple[float, float | None]:
    """The target and second target a stored ``--json`` table was aggregated at (its first row's),
    so ``--retable`` alone re-prints that table; :data:`DEFAULT_TARGET` for a file without them."""
    table = stored.get("table")
    row = table[0] if isinstance(table, list) and table and isinstance(table[0], dict) else {}

    def rate(key: str) -> float | None:
        v = row.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return float(v) if math.isfinite(v) and 0 <= v <= 1 else None

    target = rate("target")
    return DEFAULT_TARGET if target is None else target, rate("also_target")


DEFAULT_TARGET = 0.5
"""The held-out pass rate a run's time to target is read at, unless ``--target`` says otherwise."""
