"""Side-by-side comparison of two or more designs: ``pipesim.compare({"A": s1, "B": s2})``.

Each value may be a :class:`~pipesim.config.Scenario` (run here), a
:class:`~pipesim.results.run.RunResult`, a :class:`~pipesim.compute.ComputeRun` (a run spec's
run, :func:`pipesim.plan.runspec.run`), or a run loaded with :func:`pipesim.load`. The result
holds ``table`` (one row per headline metric, one column per design) and ``figure`` (a Plotly
figure: one panel per headline metric, a bar per design), and displays as the table in a notebook.

The rows and their labels follow the engine that ran the designs, as a run's own page does
(:func:`pipesim.io.html.run_html`):

- slot runs: the headline rows (:data:`~pipesim.io.html.HEADLINE_KEYS`); a truncated episode is
  one its timeout cut ("timed out").
- compute runs (a ComputeRun, or a loaded ``pipesim run SPEC --save``): the headline rows and the
  compute rows (:data:`~pipesim.io.html.COMPUTE_HEADLINE_KEYS`: step time, decode tokens/s, engine
  busy share, replicas, ...); a truncated sample is one cut at the response cap (the compute engine
  has no timeout), and ``gen_util`` is labelled as the share of the engines' ``max_num_seqs``
  places it is, not their GPUs' (read ``engine_busy_share``, docs/compute.md). The figure shows
  episodes/hour, mean step, decode tokens/s, engine busy share and staleness. A ComputeRun's own
  summary is read: the kernel's ``.result`` lacks the compute keys (its column reads NaN in the
  compute rows; designs that are all such results get none).
- a mix of the two: the headline rows only (the rows every run has), the labels that differ
  between the engines naming both, and the slot figure.

Seeds (``seeds=N``, at most :data:`~pipesim.io.compare_seeds.MAX_SEEDS`): with 1 (the default) a
Scenario or a run spec (:class:`~pipesim.plan.runspec.RunSpec`, what ``runspec.load`` returns) runs
once at its own seed and the table has one column of values per design, as it always had. With N
> 1 each one runs at seeds 0..N-1 (the same seeds for every design, seed by seed, so an interrupt
leaves whole seeds), and the table has, per design, the mean and a 95% Student t interval over
seeds (``mean``, ``lo``, ``hi``), and for each later design its paired difference with the first
(``"B - A"``: mean, lo, hi, and ``distinguishable``: whether the interval excludes 0); how they are
computed is :mod:`pipesim.io.compare_seeds`. A design given as a run (a result or a loaded run)
has one seed: it stands as its single value, and :attr:`Comparison.notes` says so. The figure
draws the means with their intervals. ``pipesim compare A B ...`` is this function on the command
line (:mod:`pipesim.io.cli_compare`). Ctrl-C raises :class:`CompareInterrupted`, which holds the
comparison of the seeds every design had finished.

A design whose run fails (a policy that raises, a run that stalls with
:class:`~pipesim.core.errors.PipelineError`) stops the comparison with :class:`CompareFailed`: its
message names the design and the seed (``design 'B', seed 1: ...``), the original exception is its
``error`` (and ``__cause__``), and ``partial`` holds the comparison of the seeds every design had
finished, as an interrupt's does. A design refused as bad input (a
:class:`~pipesim.core.validate.FieldError`, such as a saved compute run's stand-in scenario) raises
:class:`CompareRefused`, which is both: a CompareFailed and a FieldError (a ``ValueError``) whose
``field`` is ``designs['B'].`` and the design's own field. Either is a RuntimeError, as a stalled
run's PipelineError is; ``except CompareFailed`` catches both.

Where a run spent more than 10% of its simulated time after its last training step, a note says
so per design (:func:`pipesim.io.sweep_outputs.tail_note`, as ``pipesim run`` and ``sweep`` do):
throughput counts that tail. A warning a design's runs raise (a
:class:`~pipesim.compute.tool_slots.ToolSlotWarning`) is passed on once per design, naming it.

The figure (its panels per engine, the bars and their intervals and labels) is
:mod:`pipesim.io.compare_figure`; :data:`FIGURE_METRICS` and :data:`COMPUTE_FIGURE_METRICS` are
re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.compare_figure import COMPUTE_FIGURE_METRICS, FIGURE_METRICS, comparison_figure
from pipesim.io.compare_runs import warned_once
from pipesim.io.compare_seeds import MAX_SEEDS, cell, notes, seed_table
from pipesim.io.html import COMPUTE_GEN_UTIL_LABEL, COMPUTE_HEADLINE_KEYS, HEADLINE_KEYS, truncated_label

__all__ = [
    "COMPUTE_FIGURE_METRICS",
    "CompareFailed",
    "CompareInterrupted",
    "CompareRefused",
    "Comparison",
    "FIGURE_METRICS",
    "MAX_SEEDS",
    "compare",
]

MIXED_GEN_UTIL_LABEL = "slot utilisation (a compute run's: of its max_num_seqs places)"
"""``gen_util``'s label where slot and compute runs are compared (what a slot means differs)."""


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns: the runs, the side-by-side table and the figure.

    ``results``: each design's run (over several seeds, its first seed's). ``table``: one row per
    metric; one column per design with ``seeds=1``, else the columns of
    :func:`~pipesim.io.compare_seeds.seed_table`. ``seeds``: the seeds asked for; ``per_seed``: each
    design's summaries, one row per run (index: its seed; a run given once: one row); ``keys``:
    the summary key of each row of ``table``; ``notes``: what the table's reader must know (a
    design given as one run); ``done``: the seeds every design finished (less than ``seeds`` in
    the comparison a :class:`CompareInterrupted` holds)."""

    results: dict[str, Any]
    table: pd.DataFrame
    figure: go.Figure
    seeds: int = 1
    per_seed: dict[str, pd.DataFrame] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    done: int = 1

    @property
    def partial(self) -> bool:
        """Whether an interrupt left fewer seeds than were asked for."""
        return self.done < self.seeds

    def _repr_html_(self) -> str:
        from pipesim.io.cli_common import fmt_number  # 28,096 (",.4g" wrote 2.81e+04)

        return str(self.table.to_html(float_format=fmt_number))

    def __iter__(self) -> Any:  # table, figure = pipesim.compare(...)
        return iter((self.table, self.figure))


class CompareFailed(RuntimeError):
    """A design's run failed during :func:`compare`: ``design`` (its name), ``seed`` (the seed it
    ran at), ``error`` (what it raised, also the ``__cause__``), ``done`` of ``n`` seeds every
    design had finished, and ``partial``, the comparison over those (None when none had, or with
    ``seeds=1``). The message names the design and the seed, then the error."""

    def __init__(
        self, design: str, seed: int | None, error: Exception, done: int, n: int, partial: Comparison | None
    ) -> None:
        at = f", seed {seed}" if seed is not None else ""
        super().__init__(f"design {shown(design)}{at}: {_failure_text(error)}")
        self.design, self.seed, self.error = design, seed, error
        self.done, self.n, self.partial = done, n, partial


class CompareRefused(CompareFailed, FieldError):
    """A :class:`CompareFailed` whose design was refused as bad input: also the
    :class:`~pipesim.core.validate.FieldError` (a ``ValueError``) it raised, its ``field`` under
    ``designs[name]``."""

    def __init__(
        self, design: str, seed: int | None, error: Exception, done: int, n: int, partial: Comparison | None
    ) -> None:
        super().__init__(design, seed, error, done, n, partial)
        inner = str(getattr(error, "field", "") or "")
        self.field = f"designs[{shown(design)}]" + (f".{inner}" if inner else "")
        self.file = getattr(error, "file", None)


def _failure_text(exc: BaseException) -> str:
    """``exc`` on one line, as ``pipesim`` prints a run's failure: a stalled run's
    PipelineError as "the run cannot finish", a refusal as its message, a policy's exception with
    its type and the note naming the policy."""
    from pipesim.core.blame import NOTE_END
    from pipesim.core.errors import PipelineError

    text = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip()) or type(exc).__name__
    if isinstance(exc, PipelineError):
        return f"the run cannot finish: {text}"
    if isinstance(exc, FieldError):
        return text
    culprit = [str(n) for n in getattr(exc, "__notes__", ()) if str(n).endswith(NOTE_END)]
    return f"{type(exc).__name__}: {text}" + (f" ({' '.join(culprit[0].split())})" if culprit else "")


class CompareInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, where the command maps it) during :func:`compare`: ``done`` of ``n``
    seeds had finished for every design, and ``partial`` is the comparison over those (None when
    none had). A KeyboardInterrupt, so a caller that does not know it still stops."""

    def __init__(self, done: int, n: int, partial: Comparison | None) -> None:
        super().__init__(f"interrupted after {done} of {n} seeds")
        self.done, self.n, self.partial = done, n, partial


def compare(
    designs: Mapping[str, Any],
    *,
    metrics: Any = None,
    seeds: int = 1,
    on_run: Callable[[str, int | None], None] | None = None,
) -> Comparison:
    """Run (where needed) and set two or more designs side by side.

    ``metrics``: the summary keys for the table's rows (default: the headline keys of
    :mod:`pipesim.io.html`, and its compute keys where every design is a compute run; they label
    the rows, as the module's docstring says). ``seeds``: 1 (each design once, at its own seed) to
    :data:`~pipesim.io.compare_seeds.MAX_SEEDS`; above 1 each Scenario or run spec runs at seeds
    0..N-1, and the table gives each metric's mean, its 95% t interval and the paired difference
    with the first design (the module's docstring). ``on_run(name, seed)`` is called after each
    run (a progress bar; ``seed`` None: the design's own). A design whose run fails raises
    :class:`CompareFailed` (:class:`CompareRefused` for a refusal), naming it and the seed, with
    the comparison of the seeds every design had finished."""
    from pipesim.io.sweep_outputs import tail_share

    names = _check(designs, seeds)
    if metrics is not None:
        given = metrics
        # a string is not a list of keys (it became one row per character)
        metrics = list(metrics) if isinstance(metrics, Sequence) and not isinstance(metrics, str) else []
        if not metrics or not all(isinstance(k, str) for k in metrics):
            raise refuse("metrics", f"must be a non-empty list of summary keys, got {shown(given)}")
    to_run = {name: d for name, d in zip(names, designs.values()) if _runnable(d)}
    results: dict[str, Any] = {n: d for n, d in zip(names, designs.values()) if n not in to_run}
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    tails: dict[str, list[float]] = {n: [] for n in names}  # each run's share after its last step
    order: list[int | None] = [None] if seeds == 1 else list(range(seeds))
    done = 0
    said: set[tuple[str, type[Warning], str]] = set()  # the warnings passed on: once a design

    def kept() -> Comparison | None:
        """The comparison of the seeds every design finished (None: none, or one run each)."""
        if not done or seeds == 1:
            return None
        return _build(names, results, rows, done, seeds, metrics, to_run, tails)

    try:
        for seed in order:  # seed by seed: an interrupt or a failure leaves whole seeds
            for name, d in to_run.items():
                try:
                    r, summary = warned_once(name, said, d, seed)
                except Exception as exc:  # a policy that raised, a stalled run: which design, which seed
                    at = _own_seed(d) if seed is None else seed
                    failed = CompareRefused if isinstance(exc, FieldError) else CompareFailed
                    raise failed(name, at, exc, done, len(order), kept()) from exc
                results.setdefault(name, r)
                rows[name].append({"seed": _seed_of(r) if seed is None else seed, **summary})
                tails[name].append(tail_share(getattr(r, "result", r)))
                if on_run is not None:
                    on_run(name, seed)
            done += 1
    except KeyboardInterrupt:
        raise CompareInterrupted(done, len(order), kept()) from None
    return _build(names, results, rows, done, seeds, metrics, to_run, tails)


def _check(designs: Any, seeds: Any) -> list[str]:
    """The designs' names as text; FieldError naming ``designs``, ``designs[name]`` or ``seeds``."""
    if not isinstance(designs, Mapping) or len(designs) < 2:
        raise FieldError("compare needs a mapping of two or more designs, e.g. {'A': s1, 'B': s2}", "designs")
    names = [str(name) for name in designs]
    if len(set(names)) != len(names):  # {1: a, "1": b} kept one of the two
        raise FieldError(
            f"compare: the designs' names must be distinct as text, got {shown(list(designs))}", "designs"
        )
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise refuse(
            "seeds", f"must be an integer from 1 to {MAX_SEEDS} (runs per design), got {shown(seeds)}"
        )
    from pipesim.compute.compute_run import ComputeRun

    for name, d in designs.items():
        if not (
            _runnable(d) or isinstance(d, ComputeRun) or (hasattr(d, "summary") and hasattr(d, "scenario"))
        ):
            raise FieldError(
                f"compare: designs[{shown(name)}] is a {type(d).__name__}; give a Scenario, a run spec, "
                "a RunResult, a ComputeRun or a loaded run",
                f"designs[{shown(name)}]",
            )
    return names


def _runnable(d: Any) -> bool:
    """Whether ``compare`` runs ``d`` (a Scenario or a run spec) rather than reading its results."""
    from pipesim.plan.runspec import RunSpec

    return isinstance(d, Scenario | RunSpec)


def _own_seed(d: Any) -> int | None:
    """The seed a Scenario or a run spec runs at on its own (None where it does not say)."""
    seed = getattr(d, "seed", None)
    return seed if isinstance(seed, int) else None


def _seed_of(r: Any) -> float:
    """The seed a run given as a result ran at (NaN where it does not say)."""
    inner = getattr(r, "result", r)
    seed = getattr(getattr(inner, "scenario", None), "seed", None)
    return float(seed) if isinstance(seed, int) else math.nan


def _build(
    names: list[str],
    results: Mapping[str, Any],
    rows: Mapping[str, list[dict[str, Any]]],
    done: int,
    seeds: int,
    metrics: list[str] | None,
    to_run: Mapping[str, Any],
    tails: Mapping[str, list[float]],
) -> Comparison:
    """The comparison of the first ``done`` seeds of each design that ran, and the runs given
    (``tails``: each run's share of its time after its last training step, by design)."""
    from pipesim.compute.compute_run import ComputeRun

    tails = {n: list(t[:done]) for n, t in tails.items()}  # the whole seeds', as the rows
    per_seed: dict[str, pd.DataFrame] = {}
    for n in names:
        got = rows[n][:done] if n in to_run else [{"seed": _seed_of(results[n]), **results[n].summary()}]
        per_seed[n] = pd.DataFrame(got).set_index("seed")
    summaries = {n: results[n].summary() for n in names}  # a ComputeRun's: with the compute keys
    inner = {k: r.result if isinstance(r, ComputeRun) else r for k, r in results.items()}
    inner = {n: inner[n] for n in names}
    kinds = {_engine(r) for r in inner.values()}  # "slots", "compute"
    compute, mixed = kinds == {"compute"}, len(kinds) > 1
    keys = list(metrics) if metrics is not None else _default_keys(summaries, compute)
    unknown = [k for k in keys if not any(k in s for s in summaries.values())]
    if metrics is not None and unknown:  # a typo read as a row of NaN
        known = sorted(set().union(*summaries.values()))
        raise FieldError(f"metrics: unknown summary key(s) {unknown}; known: {', '.join(known)}", "metrics")
    labels = _labels(inner, compute, mixed)
    panels: tuple[tuple[str, str], ...] = COMPUTE_FIGURE_METRICS if compute else FIGURE_METRICS
    if mixed:  # a panel's title carries the table row's qualifier
        panels = tuple((k, MIXED_GEN_UTIL_LABEL if k == "gen_util" else t) for k, t in panels)
    common = dict(
        results={n: results[n] for n in names}, seeds=seeds, per_seed=per_seed, keys=tuple(keys), done=done
    )
    engines = {n: _engine(r) for n, r in inner.items()}
    if seeds == 1:
        table = pd.DataFrame(
            {name: [float(s.get(k, float("nan"))) for k in keys] for name, s in summaries.items()},
            index=pd.Index([labels.get(k, k) for k in keys], name="metric"),
        )
        figure = comparison_figure(summaries, panels)
        return Comparison(table=table, figure=figure, notes=_tail_notes(tails, results), **common)  # type: ignore[arg-type]
    single = {n for n in names if n not in to_run}
    table = seed_table(per_seed, keys, labels, single, engines)
    every = list(dict.fromkeys([*keys, *(k for k, _ in panels)]))
    stats = seed_table(per_seed, every, {}, single, engines)  # the figure's panels, by key
    means = {n: {k: cell(stats, k, (n, "mean")) for k in every} for n in names}
    bounds = {n: {k: (cell(stats, k, (n, "lo")), cell(stats, k, (n, "hi"))) for k in every} for n in names}
    over = f"{done} seeds, 95% t interval" if done > 1 else "1 seed: no interval"
    figure = comparison_figure(means, panels, bounds, f"designs side by side (mean over {over})")
    said = (*notes(per_seed, keys, single, seeds, engines), *_tail_notes(tails, results))
    return Comparison(table=table, figure=figure, notes=said, **common)  # type: ignore[arg-type]


def _tail_notes(tails: Mapping[str, list[float]], results: Mapping[str, Any]) -> tuple[str, ...]:
    """Per design whose runs spent more than 10% of their time after the last training step, the
    note ``pipesim run`` and ``sweep`` print (:func:`~pipesim.io.sweep_outputs.tail_note`)."""
    from pipesim.io.sweep_outputs import tail_note

    out = []
    for n, shares in tails.items():
        one = float(getattr(getattr(results[n], "result", results[n]), "sim_time_s", math.nan))
        note = tail_note(shares, one if len(shares) == 1 and math.isfinite(one) else None)
        if note is not None:
            out.append(f"{n}: {note.removeprefix('note: ')}")
    return tuple(out)


def _engine(result: Any) -> str:
    """The engine that ran ``result`` (``RunResult.engine``, ``SavedRun.engine``)."""
    return str(getattr(result, "engine", "slots"))


def _default_keys(summaries: Mapping[str, Mapping[str, Any]], compute: bool) -> list[str]:
    """The default rows: the headline keys, and where every run is a compute run the compute keys
    any of them has (a kernel's ``.result`` among them reads NaN there); slot runs, and a mix of
    engines, get the headline keys only (the rows every run has)."""
    keys = [k for k, _ in HEADLINE_KEYS]
    if compute:
        keys += [k for k, _ in COMPUTE_HEADLINE_KEYS if any(k in s for s in summaries.values())]
    return keys


def _labels(inner: Mapping[str, Any], compute: bool, mixed: bool) -> dict[str, str]:
    """Row labels by summary key: a slot run truncates at its timeout ("timed out"), a compute run
    at the response cap (:func:`~pipesim.io.html.truncated_label`); a mix names both."""
    labels = dict(HEADLINE_KEYS) | dict(COMPUTE_HEADLINE_KEYS)
    slot_cut = labels["episodes_truncated"]
    cuts = {truncated_label(r.scenario) if _engine(r) == "compute" else slot_cut for r in inner.values()}
    labels["episodes_truncated"] = " / ".join(sorted(cuts, key=lambda c: c != slot_cut))  # slot runs' first
    if mixed:
        labels["gen_util"] = MIXED_GEN_UTIL_LABEL
    elif compute:
        labels["gen_util"] = COMPUTE_GEN_UTIL_LABEL
    return labels
