"""A response-length trajectory: how the length distribution moves as the weights train.

Published runs lengthen (or shorten) as they train: verl's fully-async README says response length
changes during training and moves step times; DeepScaleR's R1-Distill-Qwen-1.5B run falls from
about 5,500 to 3,500 tokens under an 8K cap, then grows again at 16K and 24K. A
:class:`LengthTrajectory` is a table of :class:`LengthPoint` rows, one per step (the weights'
version: trainer steps completed) where something is known: the mean response length, and at
most one of the 99th percentile or the share clipped at the cap. It generalises
``TokenWorkload.drift_per_version`` (a geometric mean, the same shape): a trajectory whose means
grow by ``1 + d`` per step draws exactly what ``drift_per_version = d`` draws.

**How a point moves the draws.** The workload draws ``x`` (a response length times its group's
difficulty, before the cap) from a base distribution; at version ``v`` the sample is
``a_v * x ** b_v`` instead, a monotone map, so the same seed keeps each sample's rank: a run
with a trajectory is the same run with its samples stretched. For a log-normal base (median
``m0``, log-space spread ``s0``, the group's difficulty included: ``hypot(sigma,
difficulty_sigma)``) the map gives a log-normal of median ``m`` and spread ``s``: ``b = s / s0``,
``a = m / m0 ** b``. A point's mean alone keeps the spread (``s = s0``: the distribution scales,
``b = 1``, ``a = mean / base mean``, for any base distribution). A point's p99 or clip share
sets the spread as well: a log-normal with mean ``M`` and ``q``-quantile ``Q`` has ``ln(Q / M) =
z s - s**2 / 2`` with ``z`` the standard normal quantile of ``q``, so ``s = z - sqrt(z**2 -
2 ln(Q / M))`` (the root below ``z``); a clip share ``c`` at the cap ``C`` is the ``1 - c``
quantile at ``C``. Between points the log of the mean and the spread are interpolated linearly
(a geometric drift is log-linear, so two points reproduce it); before the first point and after
the last the nearest point holds.

**Windows.** Published totals are over a window of steps (verl's 400 steps, its first 100).
:meth:`LengthTrajectory.window_point` is the point that stands for a window: the mean over its
steps of the per-step mean and the per-step p99; a prediction over the window runs the stationary
workload of that point (:meth:`pipesim.compute.workload.TokenWorkload.over_window`). Step time is
close to linear in the tokens of a step, so the mean step over the window is close to the step of
the window's mean lengths; a short run cannot simulate 400 steps of a 28K-token workload.

**Before or after the cap.** ``mean_tokens`` is the mean *before* the cap (of the lengths the
model would write). What training logs report (verl's ``response_length/mean`` and
``response_length/clip_ratio``) is *after* it: a point with ``capped=True`` (a CSV's
``mean_capped_tokens`` column) takes that mean, and is solved for the log-normal whose mean after
the cap (and clip share, where given) match it (:func:`capped_solution`, a 1-D bisection; the
capped mean of ``min(X, C)`` is decreasing in the spread at a fixed clip share, and in the cap's
``z`` at a fixed spread). Read as a mean before the cap, a logged mean of 3,000 with 7% clipped
at 8,192 draws a capped mean of 2,555 (15% low), and 10% clipped is refused outright.
"""

from __future__ import annotations

import bisect
import csv
import difflib
import io
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from pipesim.compute.capped import capped_solution
from pipesim.compute.models import MAX_MODEL_DIM
from pipesim.core.errors import check_int, check_number, shown
from pipesim.core.readfile import LOG_MAX_BYTES, read_text
from pipesim.core.validate import FieldError

P99_Z = NormalDist().inv_cdf(0.99)
"""The standard normal 99th percentile (a p99 point's ``z``)."""

MAX_MEAN_TOKENS = float(MAX_MODEL_DIM)
"""The largest mean a point may give: the workload's bound on a token count (the largest int32).
The smallest is one token, the least a response is."""

MAX_WINDOW_STEPS = 1_000_000
"""The most steps :meth:`LengthTrajectory.window_point` averages over (one Python step each: about
a second); published windows are hundreds."""

CSV_COLUMNS = ("step", "mean_tokens", "mean_capped_tokens", "p99_tokens", "clip_share")
"""The columns :meth:`LengthTrajectory.from_csv` reads (one of the two means)."""

_ALIASES = {
    "clip_ratio": "clip_share",
    "response_length/clip_ratio": "clip_share",
    "p99": "p99_tokens",
    "mean": "mean_tokens",
    "response_length/mean": "mean_capped_tokens",
}
"""Names other tools give these columns (verl's metrics), for a did-you-mean."""


@dataclass(frozen=True)
class LengthPoint:
    """What is known of the response lengths at ``step`` (the weights' version)."""

    step: int
    mean_tokens: float
    """The mean response length in tokens, before the cap (``capped``: after it), in [1, 2**31 - 1]."""
    p99_tokens: float | None = None
    """The 99th percentile before the cap (None: the spread is the base distribution's)."""
    clip_share: float | None = None
    """The share of samples past the cap, in (0, 0.5) (None: it follows from the spread)."""
    capped: bool = False
    """``mean_tokens`` is the mean after the cap, as training logs report it (verl's
    ``response_length/mean``); the point is solved for the log-normal that matches it (module
    docstring). Needs a log-normal response model; not with ``p99_tokens``."""

    def __post_init__(self) -> None:
        check_int("step", self.step, 0)
        check_number("mean_tokens", self.mean_tokens, 1.0)
        if self.mean_tokens > MAX_MEAN_TOKENS:
            raise FieldError(
                f"mean_tokens must be at most 2**31 - 1 tokens (a workload's token bound), got "
                f"{shown(self.mean_tokens)}",
                "mean_tokens",
            )
        if self.p99_tokens is not None:
            check_number("p99_tokens", self.p99_tokens, 0, strict=True)
            if self.p99_tokens <= self.mean_tokens:
                raise FieldError(
                    f"p99_tokens ({self.p99_tokens}) must exceed mean_tokens ({self.mean_tokens}) at step "
                    f"{self.step}: a log-normal's p99 is above its mean",
                    "p99_tokens",
                )
        if self.clip_share is not None:
            check_number("clip_share", self.clip_share, 0, strict=True)
            if not self.clip_share < 0.5:
                raise FieldError(
                    f"clip_share must be in (0, 0.5), got {shown(self.clip_share)}", "clip_share"
                )
        if self.p99_tokens is not None and self.clip_share is not None:
            raise FieldError(
                f"p99_tokens and clip_share: give at most one at step {self.step} (each sets the spread)",
                "clip_share",
            )
        if not isinstance(self.capped, bool):
            raise FieldError(f"capped must be a bool, got {shown(self.capped)}", "capped")
        if self.capped and self.p99_tokens is not None:
            raise FieldError(
                f"capped: a mean after the cap takes a clip share, not p99_tokens (step {self.step})",
                "capped",
            )

    def solved(self, cap: int, base_sigma: float | None) -> tuple[float, float]:
        """``(mean before the cap, spread)`` at this point under ``cap`` (the spread NaN where the
        base is not log-normal and the point gives no shape: the base's shape is kept)."""
        if not self.capped:
            return self.mean_tokens, self.spread(cap, base_sigma)
        if base_sigma is None:
            raise FieldError("capped: a mean after the cap needs a log-normal response model", "capped")
        try:
            mean, s = capped_solution(self.mean_tokens, cap, base_sigma, self.clip_share)
        except FieldError as e:
            raise FieldError(f"{e} (step {self.step})", e.field) from None
        if not mean <= MAX_MEAN_TOKENS:
            raise FieldError(
                f"mean_tokens: the log-normal with mean {shown(self.mean_tokens)} after the cap {cap} has "
                f"a mean past 2**31 - 1 tokens before it (step {self.step})",
                "mean_tokens",
            )
        return mean, s

    def spread(self, cap: int, base_sigma: float | None) -> float:
        """The log-space spread at this point under the cap ``cap`` (``base_sigma`` where the point
        gives no p99 or clip share; None: the base is not log-normal, and a shape is refused)."""
        if self.p99_tokens is None and self.clip_share is None:
            if base_sigma is None:
                return math.nan  # scale only: the caller keeps the base's shape
            return base_sigma
        if base_sigma is None:
            field = "p99_tokens" if self.p99_tokens is not None else "clip_share"
            raise FieldError(f"{field}: a shape needs a log-normal response model (LogNormalLengths)", field)
        if self.p99_tokens is not None:
            field, z, value = "p99_tokens", P99_Z, self.p99_tokens
        else:
            assert self.clip_share is not None
            field, z, value = "clip_share", NormalDist().inv_cdf(1.0 - self.clip_share), float(cap)
        lnr = math.log(value / self.mean_tokens)
        if lnr <= 0 or z * z < 2 * lnr:
            what = (
                f"p99 {value}"
                if field == "p99_tokens"
                else f"{self.clip_share} of samples past the cap {cap}"
            )
            raise FieldError(
                f"{field}: no log-normal has mean {self.mean_tokens} tokens and {what} (step {self.step})",
                field,
            )
        return z - math.sqrt(z * z - 2 * lnr)


def _optional(path: str | Path, line: int, column: str, cell: str | None) -> float | None:
    if cell is None or not cell.strip():
        return None
    try:
        return float(cell)
    except ValueError:
        raise FieldError(
            f"{path}, line {line}, column {shown(column)}: {shown(cell)} is not a number", "column", str(path)
        ) from None


class _Resolved(tuple):  # type: ignore[type-arg]
    """:meth:`LengthTrajectory.resolved`'s points with their steps kept (``steps``), so that
    :meth:`LengthTrajectory.at` bisects without rebuilding the list (a 20,000-point window cost
    8.3 s that way)."""

    steps: tuple[int, ...]


def _columns(path: str | Path, names: list[str]) -> None:
    """FieldError (``column``, the file) for a duplicate or unknown column, or a missing mean."""
    dup = [n for n, k in Counter(names).items() if k > 1]
    if dup:
        raise FieldError(f"{path}: column {shown(dup[0])} appears twice in the header", "column", str(path))
    for n in names:
        if n not in CSV_COLUMNS:
            near = _ALIASES.get(n.strip().lower()) or next(
                iter(difflib.get_close_matches(n, CSV_COLUMNS, n=1, cutoff=0.6)), None
            )
            hint = f" (did you mean {shown(near)}?)" if near else ""
            raise FieldError(
                f"{path}: unknown column {shown(n)}{hint}; the columns are {', '.join(CSV_COLUMNS)}",
                "column",
                str(path),
            )
    means = [n for n in ("mean_tokens", "mean_capped_tokens") if n in names]
    for need in ("step", "mean_tokens"):
        if need not in names and not (need == "mean_tokens" and means):
            raise FieldError(f"column {shown(need)} not in {path} (columns: {names})", "column", str(path))
    if len(means) > 1:
        raise FieldError(
            f"{path}: give mean_tokens (before the cap) or mean_capped_tokens (after it), not both",
            "column",
            str(path),
        )


@dataclass(frozen=True)
class LengthTrajectory:
    """Points of the length distribution by step, in increasing step order (module docstring)."""

    points: tuple[LengthPoint, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.points, tuple) or not self.points:
            raise FieldError(
                f"points must be a non-empty tuple of LengthPoint, got {shown(self.points)}", "points"
            )
        for i, p in enumerate(self.points):
            if not isinstance(p, LengthPoint):
                raise FieldError(f"points[{i}] must be a LengthPoint, got {shown(p)}", f"points[{i}]")
        for i in range(1, len(self.points)):
            a, b = self.points[i - 1].step, self.points[i].step
            if b <= a:
                raise FieldError(
                    f"points: steps must strictly increase; points[{i}] (step {b}) does not follow "
                    f"points[{i - 1}] (step {a})",
                    "points",
                )

    @classmethod
    def from_csv(cls, path: str | Path) -> LengthTrajectory:
        """Columns ``step`` and ``mean_tokens`` (before the cap) or ``mean_capped_tokens`` (after
        it: ``capped`` points); optional ``p99_tokens`` and ``clip_share`` (an empty cell: not known
        at that step). Any other column is refused. Errors name the file, the line and the column."""
        if Path(path).is_dir():
            raise FieldError(f"{path} is a directory, not a CSV file", "path")
        try:
            text = read_text(path, "length trajectories", LOG_MAX_BYTES)
        except UnicodeDecodeError as e:  # NotText: names the file and the byte
            raise FieldError(str(e), "path", str(path)) from None
        with io.StringIO(text, newline="") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:  # not even a header line
                raise FieldError(f"{path}: the file is empty (no header line)", "path", str(path))
            names = list(reader.fieldnames)
            _columns(path, names)
            capped = "mean_capped_tokens" in names
            points: list[LengthPoint] = []
            last_line = 0
            for row in reader:
                line = reader.line_num
                if None in row:
                    raise FieldError(
                        f"{path}, line {line}: more cells than the header's {len(names)} columns",
                        "column",
                        str(path),
                    )
                values = {k: _optional(path, line, k, row.get(k)) for k in names}
                step = values.get("step")
                try:
                    point = LengthPoint(
                        step=int(step) if step is not None and float(step).is_integer() else step,  # type: ignore[arg-type]
                        mean_tokens=values.get("mean_capped_tokens" if capped else "mean_tokens"),  # type: ignore[arg-type]
                        p99_tokens=values.get("p99_tokens"),
                        clip_share=values.get("clip_share"),
                        capped=capped,
                    )
                except ValueError as e:
                    field = e.field if isinstance(e, FieldError) and e.field else "path"
                    raise FieldError(f"{path}, line {line}: {e}", field, str(path)) from None
                if points and point.step <= points[-1].step:
                    raise FieldError(
                        f"{path}, line {line}: step {point.step} does not follow step {points[-1].step} "
                        f"(line {last_line}): steps must strictly increase",
                        "step",
                        str(path),
                    )
                points.append(point)
                last_line = line
        if not points:
            raise FieldError(
                f"{path}: no rows under the header (a trajectory needs a step)", "rows", str(path)
            )
        return cls(tuple(points))

    @classmethod
    def geometric(cls, base_mean_tokens: float, rate: float, steps: int) -> LengthTrajectory:
        """``drift_per_version = rate`` as a table: the mean ``base * (1 + rate) ** k`` at steps 0
        and ``steps`` (log-linear in between, as the drift is). A drift whose mean leaves [1,
        2**31 - 1] tokens within ``steps`` is refused, naming the step where it does."""
        check_int("steps", steps, 1)
        check_number("drift_per_version", rate, -1.0, strict=True)
        start = LengthPoint(0, base_mean_tokens)
        growth = math.log1p(rate)
        log_end = math.log(base_mean_tokens) + steps * growth
        bound, word = (
            (MAX_MEAN_TOKENS, "grows past 2**31 - 1 tokens") if growth > 0 else (1.0, "falls below one token")
        )
        if (growth > 0 and log_end > math.log(bound)) or (growth < 0 and log_end < 0.0):
            k = math.floor(math.log(bound / base_mean_tokens) / growth) + 1
            raise FieldError(
                f"drift_per_version={shown(rate)} over steps 0 to {steps:,}: the mean response length "
                f"({base_mean_tokens:,.6g} tokens at step 0) {word} at step {k:,}; shorten the window "
                "or lower the drift",
                "drift_per_version",
            )
        return cls((start, LengthPoint(steps, math.exp(log_end))))

    def resolved(self, cap: int, base_sigma: float | None) -> tuple[tuple[int, float, float], ...]:
        """``(step, ln mean, spread)`` per point under ``cap``, the mean before the cap (the spread
        NaN where the base is not log-normal and the point gives no shape)."""
        rows = []
        for p in self.points:
            mean, s = p.solved(cap, base_sigma)
            rows.append((p.step, math.log(mean), s))
        res = _Resolved(rows)
        res.steps = tuple(p.step for p in self.points)
        return res

    @staticmethod
    def at(resolved: tuple[tuple[int, float, float], ...], version: float) -> tuple[float, float]:
        """``(mean, spread)`` at ``version``, interpolated between the resolved points."""
        steps = getattr(resolved, "steps", None)
        if steps is None:
            steps = tuple(r[0] for r in resolved)
        i = bisect.bisect_right(steps, version)
        if i == 0:
            return math.exp(resolved[0][1]), resolved[0][2]
        if i == len(resolved):
            return math.exp(resolved[-1][1]), resolved[-1][2]
        (s0, l0, g0), (s1, l1, g1) = resolved[i - 1], resolved[i]
        t = (version - s0) / (s1 - s0)
        return math.exp(l0 + t * (l1 - l0)), g0 + t * (g1 - g0)

    def window_point(self, start: int, stop: int, cap: int, base_sigma: float | None) -> LengthPoint:
        """The point standing for steps ``start`` to ``stop - 1`` (at most
        :data:`MAX_WINDOW_STEPS`): the mean over those steps of the per-step mean (before the cap),
        and (where the spread is known) of the per-step p99."""
        check_int("start", start, 0)
        check_int(
            "stop",
            stop,
            start + 1,
            start + MAX_WINDOW_STEPS,
            f"a window is at most {MAX_WINDOW_STEPS:,} steps",
        )
        res = self.resolved(cap, base_sigma)
        pts = [self.at(res, v) for v in range(start, stop)]
        mean = sum(m for m, _ in pts) / len(pts)
        if any(math.isnan(s) for _, s in pts):
            return LengthPoint(start, mean)
        p99 = sum(m * math.exp(P99_Z * s - s * s / 2) for m, s in pts) / len(pts)
        return LengthPoint(start, mean, p99_tokens=p99 if p99 > mean else None)
