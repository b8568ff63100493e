"""``pipesim run`` and ``pipesim export`` of a run spec (``kind = "compute"``, :mod:`pipesim.plan.runspec`).

Design: :func:`pipesim.io.cli_run.cmd_run` and :func:`~pipesim.io.cli_run.cmd_export` hand a file
whose top level says ``kind = "compute"`` to this module; every other scenario (a name, a slot
scenario file, ``module:factory``) keeps its path. Output paths are checked before the run, as for
a slot run. The summary printed is :meth:`pipesim.compute.ComputeRun.summary`, the phases in verl's
names (``timing_s/gen``, ``timing_s/param_sync``, ``timing_s/update_actor``, ``timing_s/step``)
first, then the throughput and the GPUs' and engines' busy shares above ``gen_util``; a note under
the table (on standard error: standard output stays ``key value`` lines) says that ``gen_util`` and
the other slot metrics count the engines' ``max_num_seqs`` places, not GPU time (a busy engine's
read 0.03 right under the throughput), and one that ``timing_s/param_sync`` is per step, as verl
logs it, with a sync's own time beside it. ``--json`` holds the summary, the same word on each slot
metric (``notes``), the run spec's data (``runspec``: what ``pipesim export``
writes, its paths absolute so it reruns from any folder) and the recipe (the file, ``--set``
pairs and seed); ``--save`` keeps the kernel's tables
(:meth:`RunResult.save`); ``--html`` the timeline and the engines' KV and tokens/s views;
``--intervals N`` (a calibrated spec) adds the 95% range of each headline metric over ``N`` runs
with the calibrated values drawn from their intervals (:mod:`pipesim.calibrate.predict`). A bad spec
is one line naming the file and the key (:class:`~pipesim.plan.checks.PlanError`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, Any

from pipesim.io.cli_common import (
    UsageError,
    check_output,
    check_save_dir,
    one_line,
    progress_wanted,
    summary_table,
    write_run_outputs,
)
from pipesim.io.interrupts import write_text_atomic

PHASES = ("timing_s/gen", "timing_s/param_sync", "timing_s/update_actor", "timing_s/step")


def _load(args: argparse.Namespace) -> Any:
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import load

    try:
        return load(args.scenario, list(args.set or ()), args.seed)
    except PlanError as exc:
        raise UsageError(one_line(exc)) from None


HEAD = (*PHASES, "throughput_per_hour", "gpu_busy_share", "engine_busy_share")
"""The summary's first rows: the phases, the throughput and the hardware's busy shares, which sit
above ``gen_util`` so that a slot share (:data:`SLOT_SHARES`) is not read as the GPUs'."""
SLOT_SHARES = ("gen_util", "gen_util_active", "gen_util_total", "slot_idle_ratio")
"""The kernel's slot metrics: on the compute engine a replica's slots are its ``max_num_seqs``
places, so they read low (and idle high) for an engine busy with a few dozen sequences."""
SLOT_SHARE_NOTE = (
    "counts the engines' max_num_seqs places (slots), not GPU time: "
    "gpu_busy_share and engine_busy_share are the hardware's busy shares"
)
"""What each of :data:`SLOT_SHARES` is, in ``--json``'s ``notes`` (the keys keep their names:
saved runs, sweeps and tests read them)."""


def phases_first(summary: dict[str, float]) -> dict[str, float]:
    """The summary with :data:`HEAD` first (the phases, throughput, GPU and engine busy shares),
    then the rest in its order."""
    head = {k: summary[k] for k in HEAD if k in summary}
    return head | {k: v for k, v in summary.items() if k not in head}


def slot_share_note(summary: dict[str, Any]) -> str | None:
    """The line under a compute run's table saying that ``gen_util`` counts slots, not GPU time,
    with the GPU and engine busy shares to read instead (None where the summary lacks them)."""
    from pipesim.io.cli_common import fmt_number

    slots = [k for k in SLOT_SHARES if k in summary]
    if not slots or "gpu_busy_share" not in summary or "engine_busy_share" not in summary:
        return None
    return (
        f"note: {', '.join(slots)} count the engines' max_num_seqs places (slots), not GPU time: "
        f"the GPUs were busy {fmt_number(summary['gpu_busy_share'])} of the time "
        f"(gpu_busy_share), the engines {fmt_number(summary['engine_busy_share'])} "
        "(engine_busy_share)"
    )


def run_spec(args: argparse.Namespace) -> int:
    """``pipesim run SPEC.toml`` for a run spec (see the module docstring)."""
    from pipesim.plan.runspec import resolved, run

    check_output("json", args.json, stdout=True)
    check_output("html", args.html)
    check_output("events", args.events, (".parquet", ".csv"))
    check_output("trace", args.trace)
    check_save_dir(args.save)
    n = getattr(args, "intervals", None)
    if n is not None:
        from pipesim.calibrate.predict import MAX_DRAWS

        if not 2 <= n <= MAX_DRAWS:
            raise UsageError(f"--intervals must be 2 to {MAX_DRAWS:,} runs (each is a whole run), got {n}")
    rs = _load(args)
    from pipesim.plan.build import trainer_memory_note

    if (note := trainer_memory_note(rs.plan, rs.design)) is not None:
        print(note, file=sys.stderr)
    if n is not None and not rs.data.get("calibration", {}).get("values"):
        raise UsageError(
            f"--intervals needs a calibrated spec ([calibration] values; pipesim calibrate): {args.scenario}"
        )
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    bar = _step_bar(rs.steps, getattr(args, "quiet", False))
    try:
        crun = run(rs, record=bool(args.html), observer=bar)
    except ValueError as exc:
        raise UsageError(f"{args.scenario}: the run cannot start: {one_line(exc)}") from None
    finally:
        if bar is not None:
            bar.close()
    summary = phases_first(crun.summary())
    given = ", ".join(args.set or ())
    print(
        f"{args.scenario}: {rs.label} on {rs.plan.n_gpus} {rs.plan.gpu.name}, "
        f"{rs.steps} steps (seed {rs.seed})" + (f" with {given}" if given else ""),
        file=out,
    )
    print(summary_table(summary), file=out)
    out.flush()  # the notes below the table, where standard error shares its pipe
    from pipesim.io.cli_run import staleness_note  # (cli_run imports this module when called)

    notes = (slot_share_note(summary), param_sync_note(crun.result, summary))
    for note in (*notes, verl_step_note(rs, summary), staleness_note(crun.result)):
        if note is not None:
            print(note, file=sys.stderr)  # stdout stays the table: key and value per line
    intervals = None
    if getattr(args, "intervals", None) is not None:
        asked = [f"--{o} {getattr(args, o)}" for o in _OUTPUTS if getattr(args, o, None)]
        intervals = _intervals(rs, args.intervals, out, getattr(args, "quiet", False), asked)
        if intervals is None:  # interrupted: the ranges of the draws done are printed, partial
            return 130
    result = crun.result
    payload: dict[str, Any] | None = None
    recipe = {"scenario": str(Path(args.scenario).resolve()), "set": list(args.set or ()), "seed": rs.seed}
    # its paths absolute: the saved spec reruns from any folder (from_dict(saved.runspec["runspec"]))
    data = resolved(rs.data, rs.base)
    if args.json:
        from pipesim.io.saved import json_number

        payload = {
            "summary": {k: json_number(v) for k, v in summary.items()},
            "notes": {k: SLOT_SHARE_NOTE for k in SLOT_SHARES if k in summary},
            **({"intervals": intervals} if intervals is not None else {}),
            "runspec": data,
            "recipe": recipe,
        }

    def save(path: str) -> None:
        """The kernel's tables, with the summary printed above and the spec to rerun it from."""
        from pipesim.io.saved import save as save_run

        save_run(result, path, summary=dict(summary), spec={"runspec": data, "recipe": recipe})

    def html_page() -> str:
        from pipesim.io.viz import run_page

        return str(run_page(crun, title=f"pipesim run {args.scenario}: {rs.label}", name=rs.label))

    write_run_outputs(
        args,
        result,
        out,
        payload,
        saved=f"saved the run's tables to {args.save} (pipesim.load, `pipesim report {args.save}`)",
        html_page=html_page,
        save=save,
    )
    return 0


_OUTPUTS = ("json", "html", "events", "trace", "save")
"""``pipesim run``'s output options: what an interrupted ``--intervals`` leaves unwritten."""


def _intervals(
    rs: Any, n: int, out: IO[str], quiet: bool = False, asked: list[str] | None = None
) -> dict[str, dict[str, float]] | None:
    """``--intervals N``: the calibrated prediction's 95% ranges (:mod:`pipesim.calibrate.predict`),
    then a ``note:`` line for each thing they hold fixed (``conditional_on``). The draws have a
    progress bar (1,000 draws ran minutes without a word). Ctrl-C or SIGTERM: the ranges of the
    draws finished, headed as partial, a line on stderr naming what was not written (``asked``,
    the outputs asked for), and None; a later signal is dropped while they print
    (:func:`~pipesim.io.interrupts.interrupt_once`). Before, an interrupt lost every draw."""
    import numpy as np
    from tqdm import tqdm

    from pipesim.calibrate.predict import PredictInterrupted, predict, ranges_head
    from pipesim.io.interrupts import interrupt_once

    with interrupt_once():
        bar = tqdm(total=n, desc="draws", unit="run", leave=False, disable=not progress_wanted(quiet))
        try:
            got = predict(rs, n, np.random.default_rng(rs.seed), on_draw=lambda _: bar.update(1))
        except ValueError as exc:
            raise UsageError(one_line(exc)) from None
        except PredictInterrupted as exc:
            bar.close()  # its line cleared before the ranges
            k = exc.done
            if exc.ranges is None:
                print(f"interrupted after {k} of {n} draws: too few for a range", file=out)
            else:
                head = f"interrupted after {k} of {n} draws: partial, 95% range over those {k}"
                _print_ranges(rs, exc.ranges, k, head, out)
            skipped = f"; not written: {', '.join(asked)}" if asked else ""
            print(
                f"pipesim: interrupted: --intervals stopped after {k} of {n} draws{skipped}", file=sys.stderr
            )
            return None
        finally:
            bar.close()
        head = ranges_head(rs, n)  # what was drawn: values without an interval, or outside it, are held
        _print_ranges(rs, got, n, head, out)
        return got


def _print_ranges(rs: Any, got: dict[str, dict[str, float]], n: int, head: str, out: IO[str]) -> None:
    """``head``, each metric's value and range over ``n`` runs, and the notes on what they hold."""
    from pipesim.calibrate.predict import conditional_on
    from pipesim.io.cli_common import fmt_number

    print(f"{head}:", file=out)
    w = max(len(k) for k in got)
    for k, v in got.items():
        print(
            f"{k:<{w}}  {fmt_number(v['value']):>10}  [{fmt_number(v['lo'])}, {fmt_number(v['hi'])}]",
            file=out,
        )
    outside = [k for k, v in got.items() if not v["lo"] <= v["value"] <= v["hi"]]
    if outside:  # the value is one run (the spec's seed), the range other seeds' runs
        print(
            f"note: {', '.join(outside)}: the value (the spec's own run, at seed {rs.seed}) lies "
            f"outside its range, which spans {n} runs at other seeds with the values drawn: it is "
            "not an interval around that one run (and a range of few runs is rough)",
            file=out,
        )
    for line in conditional_on(rs):
        print(f"note: {line}", file=out)


def rerun(path: str, sets: list[str], seed: int | None) -> Any:
    """The kernel's result of a run spec run again (``pipesim trace RUN.json`` of a run spec)."""
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import load, run

    try:
        return run(load(path, sets, seed)).result
    except PlanError as exc:
        raise UsageError(one_line(exc)) from None


def export_spec(args: argparse.Namespace) -> int:
    """``pipesim export SPEC.toml --out FILE`` for a run spec: its data with ``--set`` applied, each
    relative path rewritten relative to ``FILE``'s folder (to the working folder for ``-``), so
    the written spec reads the files the original read (:func:`~pipesim.plan.runspec.relocated`)."""
    from pipesim.plan.runspec import dumps, relocated

    fmt = args.format or "toml"
    if args.out != "-":
        suffix = Path(args.out).suffix.lower()
        check_output("out", args.out, (".toml", ".yaml", ".yml"))
        by_suffix = "toml" if suffix == ".toml" else "yaml"
        if args.format is not None and args.format != by_suffix:
            raise UsageError(f"--format {args.format} does not match --out {args.out} (a {by_suffix} file)")
        fmt = by_suffix
    rs = _load(args)
    text = dumps(relocated(rs.data, rs.base, args.out if args.out != "-" else "./-"), fmt)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.out, text)
        print(f"wrote {args.out} (run it: pipesim run {args.out})")
    return 0


def param_sync_note(result: Any, summary: dict[str, Any]) -> str | None:
    """``timing_s/param_sync`` is per step, as verl logs it (the sync seconds inside the steps over
    the steps, :func:`~pipesim.compute.series.step_breakdown`): 1.089 beside syncs of 1.188 s each
    (11 of 12 inside the steps) read as a wrong sync time. The note gives a sync's own time; None
    where the run has no sync or the summary no ``timing_s/param_sync``."""
    from pipesim.io.cli_common import fmt_number

    syncs = [b - a for a, b, _ in result.sync_log]
    steps = len(result.train_log)  # the rows the summary's mean is over
    if not syncs or not steps or "timing_s/param_sync" not in summary:
        return None
    each = fmt_number(sum(syncs) / len(syncs))
    return (
        f"note: timing_s/param_sync is per step (verl's: sync time inside steps / {steps:,} steps); "
        f"a sync took {each} s on average ({len(syncs):,} syncs)"
    )


def verl_step_note(rs: Any, summary: dict[str, Any]) -> str | None:
    """A split design's ``timing_s/step`` holds its weight sync (pipesim's step, every design);
    verl's fully-async trainer, which a split design is (:mod:`pipesim.calibrate.steptime`), logs
    its step without it: the note gives the step to compare with such a log."""
    step, sync = summary.get("timing_s/step"), summary.get("timing_s/param_sync")
    if rs.design.colocated or not step or not sync:
        return None
    return (
        f"note: timing_s/step holds the weight sync (timing_s/param_sync, averaged over every step); "
        f"verl's fully-async trainer logs its step without it: compare such a log's step with "
        f"{float(step) - float(sync):,.4g} s"
    )


class _StepBar:
    """A tqdm bar of the trainer's steps, fed as a :class:`~pipesim.core.seams.BatchObserver`: a
    run of 30,000 steps ran minutes without a word."""

    def __init__(self, steps: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=steps, desc="steps", unit="step", leave=False)

    def on_batch(self, step: int, version: int, batch: list[Any], now_s: float) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _step_bar(steps: int, quiet: bool) -> _StepBar | None:
    """The progress bar of a run spec's run, where progress is shown (a terminal, not --quiet)."""
    return _StepBar(steps) if progress_wanted(quiet) else None
