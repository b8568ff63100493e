"""Episode-duration models: where the time of one agent episode comes from.

Every model is a small frozen dataclass with one method, ``sample(n, generator) -> Tensor[n]`` of
seconds, drawing only from the ``torch.Generator`` it is handed. The simulator consumes a pool of
durations in order, so two designs run on the same pool see exactly the same episodes.

* :class:`AgentDurations` is the chapter's model of a coding agent: a geometric number of turns,
  uniform tokens per turn at a per-sequence decode rate, and a log-normal tool latency per turn.
  Its draw order (turn counts, then decode lengths, then tool latencies) is fixed, so
  ``agent_episode_durations(65_536, torch.Generator().manual_seed(0))`` gives the chapter's pool.
* :class:`ExponentialDurations` has a closed form for the expected slowest of B (m * H_B), which
  makes it the limit case for testing synchronous step times.
* :class:`LogNormalDurations` is a one-parameter heavy tail.
* :class:`TraceDurations` replays measured durations from an array or a CSV column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class DurationModel(Protocol):
    """Anything that draws ``n`` episode durations in seconds from an explicit generator."""

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor: ...


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_count(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")


def agent_episode_durations(
    n: int,
    generator: torch.Generator,
    mean_turns: float = 8,
    max_turns: int = 40,
    tokens_per_turn: tuple[float, float] = (100, 600),
    decode_rate: float = 40.0,
    tool_median: float = 2.0,
    tool_sigma: float = 1.0,
) -> torch.Tensor:
    """Seconds of ``n`` simulated coding-agent episodes -> float32 tensor [n].

    Turns are geometric with mean ``mean_turns`` (drawn by inverting the CDF of one uniform per
    episode), capped at ``max_turns``. Each turn decodes U(lo, hi) tokens at ``decode_rate`` tokens
    per second and then waits for a tool whose latency is log-normal with median ``tool_median``.
    The three draws happen in that order; changing the order changes every number downstream.
    """
    return AgentDurations(
        mean_turns=mean_turns,
        max_turns=max_turns,
        tokens_per_turn=tokens_per_turn,
        decode_rate_tok_s=decode_rate,
        tool_median_s=tool_median,
        tool_sigma=tool_sigma,
    ).sample(n, generator)


@dataclass(frozen=True)
class AgentDurations:
    """The chapter's coding-agent duration model (see :func:`agent_episode_durations`)."""

    mean_turns: float = 8
    max_turns: int = 40
    tokens_per_turn: tuple[float, float] = (100, 600)
    decode_rate_tok_s: float = 40.0
    tool_median_s: float = 2.0
    tool_sigma: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_turns) and self.mean_turns > 1):
            raise ValueError(f"mean_turns must be > 1 (geometric mean), got {self.mean_turns!r}")
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ValueError(f"max_turns must be an integer >= 1, got {self.max_turns!r}")
        lo, hi = self.tokens_per_turn
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
            raise ValueError(
                f"tokens_per_turn must be (lo, hi) with 0 <= lo <= hi, got {self.tokens_per_turn!r}"
            )
        _check_positive("decode_rate_tok_s", self.decode_rate_tok_s)
        _check_positive("tool_median_s", self.tool_median_s)
        if not (math.isfinite(self.tool_sigma) and self.tool_sigma >= 0):
            raise ValueError(f"tool_sigma must be finite and >= 0, got {self.tool_sigma!r}")

    def sample_turns(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-turn decode and tool seconds -> ([n, max_turns], [n, max_turns]), zero past the last turn.

        Exposed so that co-simulation can charge a real episode per turn with the same model.
        """
        _check_count(n)
        u = torch.rand(n, generator=generator)  # [n]
        turns = (torch.log1p(-u) / math.log(1 - 1 / self.mean_turns)).ceil().clamp(1, self.max_turns)  # [n]
        lo, hi = self.tokens_per_turn
        tokens = lo + (hi - lo) * torch.rand(n, self.max_turns, generator=generator)  # [n, max_turns]
        decode = tokens / self.decode_rate_tok_s
        tool = self.tool_median_s * torch.exp(
            self.tool_sigma * torch.randn(n, self.max_turns, generator=generator)
        )  # [n, max_turns]
        used = torch.arange(self.max_turns) < turns[:, None]  # [n, max_turns]
        return decode * used, tool * used

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        decode, tool = self.sample_turns(n, generator)
        return (decode + tool).sum(-1)  # [n]


@dataclass(frozen=True)
class ExponentialDurations:
    """Exponential durations with mean ``mean_s``: E[max of B] = mean_s * H_B in closed form."""

    mean_s: float = 96.0

    def __post_init__(self) -> None:
        _check_positive("mean_s", self.mean_s)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        _check_count(n)
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        return (-self.mean_s * torch.log1p(-u)).float()  # inverse CDF, [n]


@dataclass(frozen=True)
class LogNormalDurations:
    """Log-normal durations with median ``median_s`` and log-space spread ``sigma``."""

    median_s: float = 68.0
    sigma: float = 0.9

    def __post_init__(self) -> None:
        _check_positive("median_s", self.median_s)
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be finite and >= 0, got {self.sigma!r}")

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        _check_count(n)
        return self.median_s * torch.exp(self.sigma * torch.randn(n, generator=generator))


@dataclass(frozen=True)
class TraceDurations:
    """Replays measured durations in order (``cycle=True`` wraps around instead of failing).

    Build it from a sequence (``TraceDurations.from_values``) or a CSV column
    (``TraceDurations.from_csv(path, column)``). The generator is ignored: a trace is data.
    """

    values: tuple[float, ...] = field(default=())
    cycle: bool = False

    def __post_init__(self) -> None:
        if len(self.values) == 0:
            raise ValueError("values must hold at least one duration")
        check_durations(self.values, name="values")

    @classmethod
    def from_values(cls, values: Sequence[float] | torch.Tensor, cycle: bool = False) -> TraceDurations:
        seq = values.tolist() if isinstance(values, torch.Tensor) else list(values)
        return cls(values=tuple(float(v) for v in seq), cycle=cycle)

    @classmethod
    def from_csv(cls, path: str | Path, column: str, cycle: bool = False) -> TraceDurations:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or column not in reader.fieldnames:
                raise ValueError(f"column {column!r} not in {path}; columns are {reader.fieldnames}")
            rows = []
            for i, row in enumerate(reader):
                try:
                    rows.append(float(row[column]))
                except (TypeError, ValueError):
                    raise ValueError(  # noqa: B904 - the row and column say more than float()'s message
                        f"{path}: row {i + 1} column {column!r} is not a number: {row[column]!r}"
                    )
        return cls.from_values(rows, cycle=cycle)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        _check_count(n)
        data = torch.tensor(self.values, dtype=torch.float64)
        if n > len(data):
            if not self.cycle:
                raise ValueError(f"trace holds {len(data)} durations but {n} were requested (set cycle=True)")
            data = data.repeat(math.ceil(n / len(data)))
        return data[:n]


def check_durations(values: Sequence[float] | torch.Tensor, name: str = "durations") -> None:
    """Raise ValueError naming ``name`` and the first bad index if any value is NaN, inf or < 0."""
    t = values if isinstance(values, torch.Tensor) else torch.tensor(list(values), dtype=torch.float64)
    if t.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(t.shape)}")
    bad = ~torch.isfinite(t) | (t < 0)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{name}[{i}] = {t[i].item()!r}: durations must be finite and >= 0")


@cache
def chapter_pool() -> torch.Tensor:
    """The chapter's pool: ``agent_episode_durations(65_536, Generator().manual_seed(0))``.

    Drawn once per process and shared, so callers must not modify it in place.
    """
    return agent_episode_durations(65_536, torch.Generator().manual_seed(0))


def straggler_ratios(durations: torch.Tensor, batch_sizes: Sequence[int] = (8, 64, 512)) -> dict[int, float]:
    """E[slowest of B] / mean for each B, estimated by splitting the pool into batches of B."""
    out = {}
    for b in batch_sizes:
        usable = (len(durations) // b) * b
        if usable == 0:
            raise ValueError(f"pool of {len(durations)} durations is smaller than batch size {b}")
        out[b] = (durations[:usable].view(-1, b).max(-1).values.mean() / durations.mean()).item()
    return out
