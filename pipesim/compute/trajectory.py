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
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from pipesim.core.errors import check_int, check_number, shown
from pipesim.core.readfile import LOG_MAX_BYTES, read_text
from pipesim.core.validate import FieldError

P99_Z = NormalDist().inv_cdf(0.99)
"""The standard normal 99th percentile (a p99 point's ``z``)."""


@dataclass(frozen=True)
class LengthPoint:
    """What is known of the response lengths at ``step`` (the weights' version)."""

    step: int
    mean_tokens: float
    p99_tokens: float | None = None
    """The 99th percentile before the cap (None: the spread is the base distribution's)."""
    clip_share: float | None = None
    """The share of samples past the cap, in (0, 0.5) (None: it follows from the spread)."""

    def __post_init__(self) -> None:
        check_int("step", self.step, 0)
        check_number("mean_tokens", self.mean_tokens, 0, strict=True)
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
        steps = [p.step for p in self.points]
        if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise FieldError(f"points: steps must strictly increase, got {steps}", "points")

    @classmethod
    def from_csv(cls, path: str | Path) -> LengthTrajectory:
        """Columns ``step`` and ``mean_tokens``; optional ``p99_tokens`` and ``clip_share`` (an
        empty cell: not known at that step). Errors name the file, the line and the column."""
        if Path(path).is_dir():
            raise FieldError(f"{path} is a directory, not a CSV file", "path")
        with io.StringIO(read_text(path, "length trajectories", LOG_MAX_BYTES), newline="") as f:
            reader = csv.DictReader(f)
            names = reader.fieldnames or []
            for need in ("step", "mean_tokens"):
                if need not in names:
                    raise FieldError(
                        f"column {shown(need)} not in {path} (columns: {names})", "column", str(path)
                    )
            points = []
            for line, row in enumerate(reader, start=2):
                values = {k: _optional(path, line, k, row.get(k)) for k in (*names,)}
                step = values.get("step")
                try:
                    points.append(
                        LengthPoint(
                            step=int(step) if step is not None and float(step).is_integer() else step,  # type: ignore[arg-type]
                            mean_tokens=values.get("mean_tokens"),  # type: ignore[arg-type]
                            p99_tokens=values.get("p99_tokens"),
                            clip_share=values.get("clip_share"),
                        )
                    )
                except ValueError as e:
                    raise FieldError(f"{path}, line {line}: {e}", "path", str(path)) from None
        return cls(tuple(points))

    @classmethod
    def geometric(cls, base_mean_tokens: float, rate: float, steps: int) -> LengthTrajectory:
        """``drift_per_version = rate`` as a table: the mean ``base * (1 + rate) ** k`` at steps 0
        and ``steps`` (log-linear in between, as the drift is)."""
        check_int("steps", steps, 1)
        return cls(
            (
                LengthPoint(0, base_mean_tokens),
                LengthPoint(steps, base_mean_tokens * (1.0 + rate) ** steps),
            )
        )

    def resolved(self, cap: int, base_sigma: float | None) -> tuple[tuple[int, float, float], ...]:
        """``(step, ln mean, spread)`` per point under ``cap`` (the spread NaN where the base is
        not log-normal and the point gives no shape)."""
        return tuple((p.step, math.log(p.mean_tokens), p.spread(cap, base_sigma)) for p in self.points)

    @staticmethod
    def at(resolved: tuple[tuple[int, float, float], ...], version: float) -> tuple[float, float]:
        """``(mean, spread)`` at ``version``, interpolated between the resolved points."""
        steps = [r[0] for r in resolved]
        i = bisect.bisect_right(steps, version)
        if i == 0:
            return math.exp(resolved[0][1]), resolved[0][2]
        if i == len(resolved):
            return math.exp(resolved[-1][1]), resolved[-1][2]
        (s0, l0, g0), (s1, l1, g1) = resolved[i - 1], resolved[i]
        t = (version - s0) / (s1 - s0)
        return math.exp(l0 + t * (l1 - l0)), g0 + t * (g1 - g0)

    def window_point(self, start: int, stop: int, cap: int, base_sigma: float | None) -> LengthPoint:
        """The point standing for steps ``start`` to ``stop - 1``: the mean over those steps of the
        per-step mean, and (where the spread is known) of the per-step p99."""
        check_int("start", start, 0)
        check_int("stop", stop, start + 1)
        res = self.resolved(cap, base_sigma)
        pts = [self.at(res, v) for v in range(start, stop)]
        mean = sum(m for m, _ in pts) / len(pts)
        if any(math.isnan(s) for _, s in pts):
            return LengthPoint(start, mean)
        p99 = sum(m * math.exp(P99_Z * s - s * s / 2) for m, s in pts) / len(pts)
        return LengthPoint(start, mean, p99_tokens=p99 if p99 > mean else None)
