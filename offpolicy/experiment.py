"""Shared machinery of the experiment scripts: one run, seed aggregation, tables, JSON, figures.

A *run* is: copy the RL base, ``train_offpolicy`` for ``steps`` steps with one (lag,
correction, lr, sampler) setting and one seed, then evaluate on the held-out tasks with
``eval_episodes`` episodes per task from a generator seeded ``EVAL_SEED + seed``. Runs are
stored as plain dicts (config, per-step history, held-out stats), and every cell of a table is
the mean over seeds with its 95% Student-t interval, ``mean [lo, hi]`` (:mod:`offpolicy.stats`;
no random draw, so a table printed twice is identical); ``collapsed`` counts runs that end below
a held-out pass rate of 0.05 (a quarter of a blind guess; a diverged run counts too), and
:func:`paired_table` compares settings on the seeds they share. A metric that cannot leave a
range (a pass rate, a reward, a share in [0, 1]; a count or a mismatch at or above 0:
:data:`METRIC_BOUNDS`) has its interval cut there and the cut end marked ``*``, with a line under
the table saying what that means (:data:`offpolicy.stats.CLIP_NOTE`): pass rates 0.0 and 0.8 over
2 seeds printed ``0.40 [-4.68, 5.48]``. One seed prints ``[1 seed]``, no interval. Figures draw the
same cut t interval as a band where at least 2 runs have the step (:func:`band`). Results files
are rewritten after every run (:mod:`offpolicy.runfile`), so a long grid can be resumed (``--resume``)
after an interruption. The flag checks the scripts share, made before any training, are in
:mod:`offpolicy.cli_checks` (re-exported here).
"""

from __future__ import annotations

import copy
import html
import io
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from offpolicy import stats
from offpolicy.base import base_config, make_rl_base
from offpolicy.cli_checks import (  # noqa: F401  (re-exported: the CLIs' checks live there)
    CLI_LIMITS,
    EVAL_SEED,
    NumbersParser,
    check_cli_args,
    check_lags,
    resume_mismatch,
    seeds_from_args,
)
from offpolicy.gym import DEFAULT_GYM, Tokenizer, build_tokenizer, make_tasks
from offpolicy.rl import EvalSpec, RLConfig, evaluate
from offpolicy.rollout import Diverged
from offpolicy.runfile import METRIC_BOUNDS, write_text
from offpolicy.update import Sampler, train_offpolicy

COLLAPSED = stats.COLLAPSED
MIN_CLAIM_SEEDS = 10  # a paired difference over fewer seeds is printed but not claimed


def bounds_of(metric: str) -> stats.Bounds:
    """The bounds of ``metric`` (:data:`offpolicy.runfile.METRIC_BOUNDS`, which a stored run's
    values are checked against too); none for a metric it does not list."""
    return METRIC_BOUNDS.get(metric, stats.UNBOUNDED)


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t interval (:func:`offpolicy.stats.t_interval`), with no
    bounds (a half-width is symmetric: :func:`band` cuts at a bound); 0 for a single value, which
    has no interval: a caller draws no band there, as :func:`write_reward_figure` does."""
    iv = stats.t_interval(values)
    return (iv.mean, iv.hi - iv.mean) if iv.n > 1 else (iv.mean, 0.0)


def band(values: Sequence[float], bounds: stats.Bounds = stats.UNBOUNDED) -> tuple[float, float, float]:
    """(mean, lo, hi) of the 95% t interval cut at ``bounds``, for a figure's band; for one value
    lo and hi are the bounds (no interval), which a figure leaves out rather than draw."""
    iv = stats.t_interval(values, bounds=bounds)
    return iv.mean, iv.lo, iv.hi


def run_meta(json_path: str | Path, resume: bool, command: str) -> dict[str, Any]:
    """The ``command`` fields of a results JSON: a fresh grid records ``command``; a ``--resume``
    keeps the file's own ``command`` (the one that chose the grid) and appends its command line to
    ``resumed_with`` (each resume rewrote ``command`` before, and the original was lost)."""
    if not resume or not Path(json_path).is_file():
        return {"command": command}
    try:
        payload = json.loads(Path(json_path).read_text())
    except (OSError, ValueError):  # check_cli_args has refused a file it cannot resume from
        payload = {}
    payload = payload if isinstance(payload, dict) else {}
    first = payload.get("command")
    before = payload.get("resumed_with")
    before = [c for c in before if isinstance(c, str)] if isinstance(before, list) else []
    return {"command": first if isinstance(first, str) else command, "resumed_with": [*before, command]}


def show_table(table: str, json_path: str | Path) -> None:
    """Print ``table`` and write it beside the study's JSON (``.txt``): what every experiment
    script does when it finishes or re-renders (``--table-only``)."""
    print(table)
    write_text(Path(json_path).with_suffix(".txt"), table + "\n")


def fmt_ci(values: Sequence[float], digits: int = 2, bounds: stats.Bounds = stats.UNBOUNDED) -> str:
    """'mean [lo, hi]': the mean over seeds and its 95% t interval, ``digits`` decimals, cut at
    ``bounds`` (the quantity's: :func:`bounds_of`) with the cut end marked ``*``; one value prints
    ``[1 seed]``. A NaN (a window a diverged run never reached: :func:`history_mean`) is left out
    and the cell says over how many runs it is, ``(n=2)``; ``n/a`` when none is left."""
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return "n/a"
    cell = stats.fmt_interval(stats.t_interval(kept, bounds=bounds), digits)
    return cell if len(kept) == len(values) else f"{cell} (n={len(kept)})"


def paired_table(
    runs: Sequence[dict[str, Any]],
    pairs: Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]],
    keys: Sequence[str] = ("lag", "correction"),
    metric: str = "pass_rate",
) -> str:
    """For each (setting a, setting b): the held-out ``metric`` difference a - b over the seeds
    both ran, its 95% t interval (cut at what a difference of ``metric`` can take: [-1, 1] for a
    pass rate, :func:`bounds_of`), the exact sign-flip p-value, and the verdict; then which
    differences of the table's family survive Holm's adjustment of those p-values (the comparisons
    of a table are many: each at 5% alone is not 5% for the table), and what a cut end ``*`` means
    where one was printed.

    The verdict of a row of >= :data:`MIN_CLAIM_SEEDS` seeds is its own printed p (``significant``
    when p < 0.05), the test Holm's line adjusts, so a row never contradicts itself. It took the t
    interval's side of 0 before, and ``+0.06 [+0.002, +0.112] | p=0.059 | significant`` was
    printable. The t interval is descriptive: on these skewed, bimodal outcomes it holds the mean
    less often than 95% (:func:`offpolicy.stats.resampled_coverage`), and it may exclude 0 where the
    exact test does not reject. A row of fewer seeds makes no claim and prints no verdict, only
    ``no claim (n < 10)``: it printed the interval's t-test (``p=0.250 | t-test p < 0.05 (n < 10:
    no claim)``), a second test's "p < 0.05" beside the first's p, under a header that says the
    verdict is the printed p; whether the interval excludes 0 is in the interval itself."""
    groups = group_runs(runs, keys)
    lines = [
        f"paired held-out {metric} difference, a - b over shared seeds (95% t interval, descriptive; "
        "p: exact sign-flip, two-sided; the verdict is p < 0.05)"
    ]
    family: list[tuple[str, float]] = []
    cells: list[str] = []
    rows: list[tuple[str, str, str]] = []  # name a, name b, the rest of the line
    for a, b in pairs:
        if a not in groups or b not in groups:
            continue
        seeds, va, vb = stats.paired_by_seed(
            {r["seed"]: r["heldout"][metric] for r in groups[a]},
            {r["seed"]: r["heldout"][metric] for r in groups[b]},
        )
        if not seeds:
            continue
        iv = stats.paired_t(va, vb, bounds=bounds_of(metric))
        p = stats.sign_flip_p([x - y for x, y in zip(va, vb)])  # exact to 20 pairs, then drawn
        verdict = "significant" if p < 1 - stats.LEVEL else "not significant"  # the printed p's own
        drawn = f" (from {stats.FLIP_DRAWS:,} random flips)" if iv.n > stats.MAX_EXACT_FLIPS else ""
        if iv.n < 2:  # one seed's difference is its own interval: it cannot say noise from effect
            verdict = "one seed: no interval, no claim"
        elif iv.n < MIN_CLAIM_SEEDS:  # no verdict: a t-test's "p < 0.05" beside p=0.250 read as one
            verdict = f"no claim (n < {MIN_CLAIM_SEEDS})"
        name_a, name_b = " ".join(map(str, a)), " ".join(map(str, b))
        name = f"{name_a} - {name_b}"
        if iv.n >= MIN_CLAIM_SEEDS and not math.isnan(p):
            family.append((name, p))
        cells.append(stats.fmt_interval(iv, 2, signed=True))
        rows.append((name_a, name_b, f"{cells[-1]} | n={iv.n} | p={p:.3f}{drawn} | {verdict}"))
    wa = max([12, *(len(a) for a, _, _ in rows)])  # the co-simulation's "async-eta2 seq-tis" is 18
    wb = max([12, *(len(b) for _, b, _ in rows)])
    lines += [f"{a:>{wa}} - {b:<{wb}} | {rest}" for a, b, rest in rows]
    if (
        holm := stats.holm_line(family, f"comparisons of >= {MIN_CLAIM_SEEDS} seeds (sign-flip p, 5%)")
    ) is not None:
        lines.append(holm)
    if (note := stats.clip_note(cells)) is not None:
        lines.append(note)
    return "\n".join(lines)


def run_one(
    base: torch.nn.Module,
    tok: Tokenizer,
    lag: int,
    correction: str,
    seed: int,
    steps: int,
    lr: float | None = None,
    sampler: Sampler | None = None,
    eval_episodes: int = 8,
    eval_every: int = 5,
    eval_every_episodes: int = 4,
    gym: str = DEFAULT_GYM,
) -> dict[str, Any]:
    """Train a copy of ``base`` with stale sampling and evaluate it -> run record.

    Every ``eval_every`` steps the *current* policy is also evaluated on the held-out tasks
    (``eval_every_episodes`` per task, its own generator seeded ``EVAL_SEED + seed``), so the
    history shows when a collapse happens; this never changes the training itself.

    A run whose numbers stop being finite (:class:`~offpolicy.rollout.Diverged`, an lr far too
    large) ends there and is kept: ``history`` holds the steps before it, ``diverged`` says at
    which step and what (None for a run that did not diverge), and its held-out record is
    :data:`DIVERGED_HELDOUT` (a policy that cannot act), so the tables count it as collapsed.
    """
    cfg = RLConfig(seed=seed) if lr is None else RLConfig(seed=seed, lr=lr)
    model = copy.deepcopy(base)
    spec = EvalSpec(make_tasks("heldout", gym), eval_every, eval_every_episodes, EVAL_SEED + seed)
    start = time.perf_counter()
    diverged: dict[str, Any] | None = None
    try:
        history = train_offpolicy(
            model, make_tasks("train", gym), tok, cfg, steps, lag, correction, sampler=sampler, eval_spec=spec
        )
    except Diverged as exc:
        history, diverged = exc.history, dict(step=exc.step, where=exc.where, message=str(exc))
    seconds = time.perf_counter() - start
    held = dict(DIVERGED_HELDOUT)
    if diverged is None:
        gen = torch.Generator().manual_seed(EVAL_SEED + seed)
        try:
            held = evaluate(model, make_tasks("heldout", gym), tok, eval_episodes, gen)
        except Diverged as exc:  # the last update left weights that cannot act
            diverged = dict(step=steps, where=exc.where, message=str(exc))
    return {
        "lag": lag,
        "correction": correction,
        "seed": seed,
        "lr": cfg.lr,
        "steps": steps,
        "sampler": getattr(sampler, "__name__", None),
        "gym": gym,
        "train_seconds": seconds,  # includes the in-training evaluations
        "eval_every": eval_every,
        "history": history,
        "heldout": held,
        "diverged": diverged,
    }


#: The held-out record of a diverged run: weights that are not finite sample no action at all.
DIVERGED_HELDOUT = {"pass_rate": 0.0, "reads": 0.0, "invalid": 1.0}


def diverged_note(run: dict[str, Any]) -> str:
    """For the progress line: where a diverged run stopped (``''`` for any other run)."""
    d = run.get("diverged")
    if not d:
        return ""
    at = f"in step {d['step'] + 1} of {run['steps']}" if d["step"] < run["steps"] else "after its last step"
    return f"; DIVERGED {at} ({d['message']}), counted as collapsed"


def eval_trace(run: dict[str, Any]) -> str:
    """The current policy's held-out pass rate / invalid share at each in-training evaluation,
    e.g. ``'5:0.45/0.00 10:0.10/0.85'`` (update count: pass rate / invalid share)."""
    return " ".join(
        f"{r['step'] + 1}:{r['eval_pass_rate']:.2f}/{r['eval_invalid']:.2f}"
        for r in run["history"]
        if "eval_pass_rate" in r
    )


def collapse_step(run: dict[str, Any], threshold: float = COLLAPSED) -> int | None:
    """First update count at which the current policy's held-out pass rate fell below
    ``threshold`` (from the in-training evaluations), or None."""
    for r in run["history"]:
        if "eval_pass_rate" in r and r["eval_pass_rate"] < threshold:
            return int(r["step"]) + 1
    return None


def load_base(gym: str = DEFAULT_GYM) -> tuple[torch.nn.Module, Tokenizer, dict[str, float]]:
    """The tokenizer, the cached RL base of ``gym`` and its held-out stats (seed EVAL_SEED, 8 per task)."""
    tok = build_tokenizer()
    base = make_rl_base(tok, base_config(gym))
    held = evaluate(base, make_tasks("heldout", gym), tok, 8, torch.Generator().manual_seed(EVAL_SEED))
    return base, tok, held


def group_runs(
    runs: Sequence[dict[str, Any]], keys: Sequence[str]
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Runs grouped by the values of ``keys``, in first-seen order."""
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for run in runs:
        out.setdefault(tuple(run[k] for k in keys), []).append(run)
    return out


def window_of(runs: Sequence[dict[str, Any]], window: int = 10) -> int:
    """The reward window of a table over ``runs``: ``window`` steps, or the shortest run's steps
    when it has fewer (a run of 8 steps is read over its 8, and the header says 8, not 10)."""
    return max(1, min([window, *(int(r["steps"]) for r in runs)]))


def history_mean(run: dict[str, Any], key: str, lo: int = 0, hi: int | None = None) -> float:
    """Mean of ``key`` over steps [lo, hi) of a run's history; NaN when it has none of them (a
    diverged run stops early), which :func:`fmt_ci` leaves out."""
    rows = run["history"][lo:hi]
    return sum(float(r[key]) for r in rows) / len(rows) if rows else math.nan


def summary_table(
    runs: Sequence[dict[str, Any]], keys: Sequence[str] = ("lag", "correction"), window: int = 10
) -> str:
    """The chapter's staleness table, every cell a mean [95% t interval] over seeds, cut at what
    its metric can take (:data:`METRIC_BOUNDS`), with :data:`~offpolicy.stats.CLIP_NOTE` under it
    where a cell was cut."""
    groups = group_runs(runs, keys)
    steps = min(r["steps"] for r in runs)
    windows = [(lo, min(lo + window, steps)) for lo in range(0, steps, window)]
    head = (
        " ".join(f"{k:>10}" for k in keys)
        + " | n | reward by window "
        + " ".join(f"[{lo}-{hi})" for lo, hi in windows)
    )
    head += " | mismatch | over cap | clip frac | held-out | reads | collapsed"
    lines, printed = [head], []
    for key, group in groups.items():
        cells = [
            fmt_ci([history_mean(r, "reward", lo, hi) for r in group], bounds=bounds_of("reward"))
            for lo, hi in windows
        ]
        cols = [
            fmt_ci([history_mean(r, m) for r in group], digits, bounds_of(m))
            for m, digits in (("mismatch", 3), ("over_cap", 3), ("clip_frac", 4))
        ]
        cols += [fmt_ci([r["heldout"][m] for r in group], 2, bounds_of(m)) for m in ("pass_rate", "reads")]
        printed += cells + cols
        cols.append(f"{sum(r['heldout']['pass_rate'] < COLLAPSED for r in group)}/{len(group)}")
        label = " ".join(f"{str(v):>10}" for v in key)
        lines.append(f"{label} | {len(group)} | " + " ".join(cells) + " | " + " | ".join(cols))
    if (note := stats.clip_note(printed)) is not None:
        lines.append(note)
    return "\n".join(lines)


def write_reward_figure(
    runs: Sequence[dict[str, Any]], path: str | Path, keys: Sequence[str], title: str
) -> None:
    """Plotly HTML: mean training reward per step for each group with a 95% band over seeds (the t
    interval cut at [0, 1], :func:`band`), drawn over the steps at least 2 of its runs reached: one
    run has no interval, and a band of no width would read as a certain one."""
    import plotly.graph_objects as go  # lazy: the package itself needs only torch

    fig = go.Figure()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    for i, (key, group) in enumerate(group_runs(runs, keys).items()):
        steps = max(len(r["history"]) for r in group)  # a diverged run stops early: the rest go on
        at = [[r["history"][s]["reward"] for r in group if s < len(r["history"])] for s in range(steps)]
        cells = [band(values, bounds_of("reward")) for values in at]
        mean = [m for m, _, _ in cells]
        banded = sum(len(values) > 1 for values in at)  # runs only stop early: a prefix of the steps
        lo, hi = [c[1] for c in cells[:banded]], [c[2] for c in cells[:banded]]
        color, name = palette[i % len(palette)], ", ".join(f"{k}={v}" for k, v in zip(keys, key))
        xs = list(range(steps))
        fig.add_trace(
            go.Scatter(
                x=xs[:banded] + xs[:banded][::-1],
                y=hi + lo[::-1],
                fill="toself",
                mode="lines",  # plotly's default for 20 points or fewer adds markers round the band
                line={"width": 0},
                fillcolor=color,
                opacity=0.15,
                showlegend=False,
                hoverinfo="skip",
                legendgroup=name,  # hidden with its line
            )
        )
        line = go.Scatter(
            x=xs, y=mean, name=f"{name} (n={len(group)})", line={"color": color}, legendgroup=name
        )
        fig.add_trace(line)
    fig.update_layout(
        title=title, xaxis_title="training step", yaxis_title="mean episode reward", template="plotly_white"
    )
    few = max((len(r["history"]) for r in runs), default=0) <= 12  # plotly would tick between steps
    fig.update_xaxes(tickformat="d", dtick=1 if few else None)
    page = io.StringIO()
    # embedded: a CDN script renders blank offline; a fixed div id: the same runs, the same bytes
    fig.write_html(page, include_plotlyjs=True, div_id="figure")
    write_text(path, titled_page(page.getvalue(), title))


def titled_page(page: str, title: str) -> str:
    """``page`` (plotly's ``write_html``, which writes no ``<title>``: a tab, a bookmark and the
    history then showed the file's name) with ``<title>title</title>`` first in its head."""
    return page.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
