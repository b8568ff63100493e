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
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offpolicy import CORRECTIONS, RLConfig
from offpolicy.checks import FieldError, check_seed, lr_problem, shown
from offpolicy.experiment import CLI_LIMITS
from offpolicy.runfile import COSIM, COSIM_PERF, read_payload, writer_of
from scenarios.cosim import DESIGNS, CosimConfig
from scenarios.cosim_tables import TABLE_SUMMARY_KEYS
from scenarios.outputs import check_output

#: What every run record (:func:`~scenarios.cosim_report.run_record`) carries that the tables read:
#: a stored file whose runs lack one is refused by name rather than failing inside a table.
RUN_KEYS = frozenset({"design", "correction", "seed", "batch_size", "summary", "evals"})


def _items(text: str, field: str) -> list[str]:
    """The items of a comma list, stripped; an empty one (``sync,``, ``1,,2``) is refused naming
    ``field``, where it was dropped silently (a doubled comma is a typo for a missing item)."""
    items = [x.strip() for x in text.split(",")]
    if len(items) > 1 and not all(items):
        raise FieldError(
            f"{field}: an empty item in {shown(text)} (a doubled, leading or trailing comma); "
            "give a comma list such as a,b",
            field,
        )
    return [x for x in items if x]


def _names(text: str, valid: Sequence[str], field: str) -> list[str]:
    names = _items(text, field)
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise FieldError(f"{field}: unknown name(s) {bad or [text]}; valid: {', '.join(valid)}", field)
    if len(set(names)) != len(names):  # each run would be run and counted twice
        raise FieldError(f"{field}: values must be distinct, got {', '.join(names)}", field)
    return names


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in _items(text, "--seed-list")]
    except FieldError:
        raise
    except ValueError:
        raise FieldError(f"--seed-list: comma list of integers, got {shown(text)}", "--seed-list") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise FieldError(f"--seed-list: distinct seeds needed, got {shown(text)}", "--seed-list")
    for seed in seeds:  # a seed torch's generator refuses fails here, not inside the first run
        check_seed("--seed-list", seed)
    return seeds


def _check_flags(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors for the flags every mode reads, before any run (a grid runs for hours)."""
    for dest in ("json", "html", "retable", "seed_list", "perf", "designs", "corrections"):
        value = getattr(args, dest)  # '' was taken as "not given" (--json '' wrote nothing)
        if value is not None and not value.strip():
            what = "path; give a file" if dest in ("json", "html", "retable") else "value; give a comma list"
            ap.error(f"--{dest.replace('_', '-')} {value!r}: an empty {what}")
    if not 1 <= args.steps <= CLI_LIMITS["steps"]:  # CosimConfig's own error named no flag
        ap.error(f"--steps must be 1 to {CLI_LIMITS['steps']:,}, got {args.steps:,}")
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
    elsewhere = args.retable is None or not _same_file(args.json or "", args.retable)  # --retable A --json B
    if args.json and not (grid and args.resume) and elsewhere and Path(args.json).is_file():
        try:  # a rerun without --resume (or a --perf) replaced the grid's finished runs with its own
            payload = read_payload(args.json, f"--json {args.json}", "--json")
            perf_file = writer_of(payload) == COSIM_PERF and not grid  # a --perf measures afresh
            n = 0 if payload == {} or perf_file else len(_runs_of(payload, args.json, "--json", deep=False))
        except ValueError as exc:  # not JSON, another command's file: never written over unread
            ap.error(f"{exc}; a run would replace it: choose another path (or delete it)")
        if n:
            how = "pass --resume to continue them, or " if grid else ""
            runs = f"{n} finished run{'s' * (n != 1)}"
            ap.error(f"--json {args.json} holds {runs}; {how}choose another path (or delete it)")


def _same_file(a: str, b: str) -> bool:
    """Whether two output paths are one file (two streams, ``/dev/stdout``, are not one file)."""
    target = Path(a).resolve()
    return target == Path(b).resolve() and (target.is_file() or not target.exists())


def eval_steps(every: int, steps: int) -> list[int]:
    """The training steps after which a run of ``steps`` steps evaluating every ``every`` is
    evaluated (:class:`~scenarios.cosim.CosimDriver`): 0, each multiple of ``every``, and the last."""
    if not every:
        return []
    return [0, *(s for s in range(1, steps + 1) if s % every == 0 or s == steps)]


def _settings_mismatch(record: dict[str, Any], base: CosimConfig) -> str | None:
    """Why a stored run cannot share a table with runs made at ``base`` (None: it can), a phrase
    after "holds runs" naming the flag (``of --lr 0.001, not 0.0003``): another learning rate,
    gym or number of steps (a resume at other settings reran nothing and showed the old runs), or
    another evaluation schedule (``--eval-every``: the time to target
    is the first evaluation at or above it, so runs evaluated every 4 steps against every 1 step
    compared first passages at different cadences) or number of evaluation episodes. Not the
    targets: the tables recompute every time to target from the stored evaluations. A record
    without ``lr`` or ``gym`` predates the field and counts as the default's; one without
    ``eval_every`` is judged by the steps of its evaluations (a diverged run's stop early), and
    one without ``eval_episodes`` is not judged on it."""
    lr = record.get("lr", RLConfig().lr)
    if lr != base.rl.lr:
        return f"of --lr {lr:g}, not {base.rl.lr:g}"
    gym = record.get("gym", CosimConfig().gym)
    if gym != base.gym:
        return f"of --gym {gym}, not {base.gym}"
    total = record.get("train_steps")  # else the steps it logged: a diverged run logs fewer
    logged = len(record["steps"]) if isinstance(record.get("steps"), list) else None
    if total is None and logged is not None and (logged > base.steps or not record.get("diverged")):
        total = logged
    if total is not None and total != base.steps:
        return f"of --steps {total}, not {base.steps}"
    episodes = record.get("eval_episodes")  # unrecorded: the CLI's only value, 8, or a caller's
    if episodes is not None and episodes != base.eval_episodes_per_task:
        return f"of {episodes} evaluation episodes per task, not {base.eval_episodes_per_task}"
    want = eval_steps(base.eval_every_steps, base.steps)
    evals = record.get("evals")
    done = [e.get("step") for e in evals if isinstance(e, dict)] if isinstance(evals, list) else []
    if "eval_every" in record:
        every = record["eval_every"]
        if eval_steps(every, base.steps) != want:
            return f"of --eval-every {every}, not {base.eval_every_steps}"
    elif done and (done != want[: len(done)] or (len(done) < len(want) and not record.get("diverged"))):
        every = base.eval_every_steps
        return f"evaluated at steps {shown(done)}, not at --eval-every {every}'s {shown(want)}"
    return None


def _same_settings(record: dict[str, Any], base: CosimConfig) -> bool:
    """Whether a stored run was made at ``base``'s settings (:func:`_settings_mismatch`)."""
    return _settings_mismatch(record, base) is None


def _stored_runs(path: str, flag: str = "--json") -> list[dict[str, Any]]:
    """The runs of a ``--json`` file ``--resume`` continues: ValueError naming the flag and the
    file. A file with nothing in it, or an empty ``runs`` list, holds no runs: the grid starts
    afresh."""
    return list(_stored(path, flag, empty_ok=True)["runs"])


def _stored(path: str, flag: str, empty_ok: bool = False) -> dict[str, Any]:
    """A ``--json`` file written before, read once: its ``runs`` checked (ValueError naming the
    flag, the file and, for a malformed run, its index and field: :func:`_record_problem`), its
    ``table`` as stored. A file with nothing in it (blank, ``{}`` or ``[]``:
    :func:`~offpolicy.runfile.read_payload`) or with an empty ``runs`` list is refused like any
    file without run records, unless ``empty_ok`` (``--resume``: no run yet, start afresh).
    ``--retable`` reads one to print its table, and no file this command writes is empty: the grid
    writes after each finished run, and ``--retable A --json B`` writes only A's runs. It printed
    the tables' headers with no row under them, exit 0, and advice about the missing rows."""
    payload = read_payload(path, f"{flag} {path}", flag)
    if payload == {} and empty_ok:
        return {"runs": []}
    runs = _runs_of(payload, path, flag, deep=True)
    if not runs and not empty_ok:
        raise FieldError(
            f"{flag} {path}: not a --json file of this command (its 'runs' list is empty)", flag, path
        )
    assert isinstance(payload, dict)  # _runs_of refused anything else
    return dict(payload)


def _runs_of(payload: object, path: str, flag: str, deep: bool) -> list[dict[str, Any]]:
    """The run records of a parsed ``--json`` file, else a FieldError naming the flag and the file
    (and the command that wrote it, where it is another's); ``deep``: each record's values are
    checked too, as a table or a resume reads them (:func:`_record_problem`)."""
    writer = writer_of(payload)
    if writer not in (None, COSIM):
        what = "a --perf file of this command (timings), not a grid's runs"
        what = what if writer == COSIM_PERF else f"a results file of {writer}, not of this command"
        raise FieldError(f"{flag} {path}: {what}", flag, path)
    runs = payload.get("runs") if isinstance(payload, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and r.keys() >= RUN_KEYS for r in runs):
        raise FieldError(
            f"{flag} {path}: not a --json file of this command (no 'runs' list of run records)", flag, path
        )
    for i, record in enumerate(runs if deep else ()):
        if (problem := _record_problem(record)) is not None:
            raise FieldError(f"{flag} {path}: runs[{i}].{problem}", flag, path)
    return runs


def _rate(value: object, low: float = 0.0, high: float = 1.0) -> bool:
    """Whether ``value`` is a finite real number (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and low <= value <= high


def _record_problem(r: dict[str, Any]) -> str | None:
    """What is wrong in a stored run record (None: nothing), as a phrase naming the field: a
    design or correction this command does not know, a seed or batch size that is not an integer,
    a summary value that is not a finite number (a stored NaN is written as null), a final pass
    rate outside [0, 1], or an evaluation without an integer step, finite hours and a pass rate
    in [0, 1]. The tables read each of them; a bad one printed a wrong row or a traceback."""
    for field, valid in (("design", DESIGNS), ("correction", CORRECTIONS)):
        if not isinstance(r[field], str) or r[field] not in valid:
            return f"{field} {shown(r[field])} is not one of {', '.join(valid)}"
    for field, least in (("seed", 0), ("batch_size", 1)):
        if isinstance(r[field], bool) or not isinstance(r[field], int) or r[field] < least:
            return f"{field} {shown(r[field])} is not an integer >= {least}"
    summary = r["summary"]
    if not isinstance(summary, dict) or not _rate(summary.get("final_pass_rate")):
        final = summary.get("final_pass_rate") if isinstance(summary, dict) else summary
        return f"summary.final_pass_rate {shown(final)} is not a pass rate in [0, 1]"
    if missing := [k for k in TABLE_SUMMARY_KEYS if k not in summary]:  # the tables read each one
        return f"summary lacks {', '.join(missing)}"
    for key, value in summary.items():
        if value is not None and not _rate(value, -math.inf, math.inf):
            return f"summary.{key} {shown(value)} is not a finite number"
    if not isinstance(r["evals"], list):
        return f"evals {shown(r['evals'])} is not a list of evaluations"
    for j, e in enumerate(r["evals"]):
        step = e.get("step") if isinstance(e, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            return f"evals[{j}].step {shown(step)} is not an integer >= 0"
        if not _rate(e.get("sim_h"), 0.0, math.inf):
            return f"evals[{j}].sim_h {shown(e.get('sim_h'))} is not a finite number of hours >= 0"
        if not _rate(e.get("pass_rate")):
            return f"evals[{j}].pass_rate {shown(e.get('pass_rate'))} is not a pass rate in [0, 1]"
    return None


def _incomplete(record: dict[str, Any], base: CosimConfig) -> bool:
    """Whether a stored run (of ``base``'s settings) stopped short: it has not every evaluation
    ``base`` makes (:func:`eval_steps`), and did not diverge (a diverged run stops early, and is
    finished). ``--resume`` runs it again, as the offpolicy scripts re-train an incomplete run."""
    done = [e["step"] for e in record["evals"]]
    want = eval_steps(base.eval_every_steps, base.steps)
    return done != want and not (record.get("diverged") and done == want[: len(done)])


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
