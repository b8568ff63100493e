"""Episode-duration models: where the time of one agent episode comes from.

Every model is a small frozen dataclass with one method, ``sample(n, generator) -> ndarray[n]`` of
seconds (float64), drawing only from the numpy ``Generator`` it is handed
(``numpy.random.default_rng(seed)``). That is the one kind of generator in the simulator. The
simulator consumes a pool of durations in order, so two designs run on the same pool see exactly
the same episodes; :func:`draw` gives the pool a scenario runs on (``draw_pool`` in the API).

* :class:`AgentDurations` is the chapter's model of a coding agent: a geometric number of turns,
  uniform tokens per turn at a per-sequence decode rate, and a log-normal tool latency per turn.
  Its draw order (turn counts, then decode lengths, then tool latencies) is fixed. The chapter
  drew it from torch: handed a ``torch.Generator`` ("the chapter's generator") it reproduces those
  exact numbers, so ``agent_episode_durations(65_536, torch.Generator().manual_seed(0))`` gives the
  chapter's pool, and a scenario with ``AgentDurations()`` (``draws="chapter"``, the default) runs
  on the chapter's draws for its seed. That is the only place torch is needed, and it is imported
  there, on first use (:mod:`pipesim.workload.chapter_torch` holds the import, the generator and
  the seeds it tells apart); ``AgentDurations(draws="numpy")`` and every other model run without
  torch.
* :class:`ExponentialDurations` has a closed form for the expected slowest of B (m * H_B), which
  makes it the limit case for testing synchronous step times.
* :class:`LogNormalDurations` is a one-parameter heavy tail.
* :class:`TraceDurations` replays measured durations from an array or a CSV column.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload, runtime_checkable

import numpy as np
import numpy.typing as npt

from pipesim.core.errors import check_int, check_number, check_tail, shown
from pipesim.core.readfile import LOG_MAX_BYTES, read_text
from pipesim.core.validate import TAIL_SIGMAS, FieldError, FieldTypeError, check_bool, refuse
from pipesim.workload.chapter_torch import CHAPTER_SEEDS as CHAPTER_SEEDS  # re-exported
from pipesim.workload.chapter_torch import _torch, chapter_generator
from pipesim.workload.chapter_torch import check_chapter_seed as check_chapter_seed  # re-exported
from pipesim.workload.chapter_torch import straggler_ratios as straggler_ratios  # re-exported
from pipesim.workload.seconds import Array, as_durations

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""The largest float32: the chapter's torch draws are float32 (:meth:`AgentDurations._check_float32`)."""

if TYPE_CHECKING:
    import torch

MAX_AGENT_TURNS = 1 << 16
"""The most turns :class:`AgentDurations` allows: its draws hold ``max_turns`` columns per episode."""
MAX_WHOLE_DRAW_CELLS = 1 << 26
"""The most turn cells (durations x ``max_turns``) one :meth:`AgentDurations.sample_turns` draws
at once: 67,108,864. A draw holds [n, max_turns] arrays and peaks at about 27 bytes a cell with the
chapter's torch draws and 41 with numpy's (measured: a whole pool of 65,536 at max_turns 2,000 took
3.5 GB and 5.4 GB), so the bound is 2**26 x 27 B = 1.8 GB (torch), 2.75 GB (numpy). The chapter's
65,536 x 40 is 2.6M cells, 4% of it; a chunked pool (:mod:`pipesim.workload.pools`) draws at most
``MAX_CHUNK_CELLS`` (2**24) a chunk. Past it, max_turns 8,000 met torch's raw allocation error."""


@runtime_checkable
class DurationModel(Protocol):
    """Anything that draws ``n`` episode durations in seconds from an explicit numpy generator."""

    def sample(self, n: int, generator: np.random.Generator) -> Array: ...


def _check_count(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise refuse("n", f"must be an integer >= 0, got {shown(n)}")


def _numpy_generator(model: object, generator: object) -> np.random.Generator:
    if not isinstance(generator, np.random.Generator):
        raise FieldTypeError(
            f"{type(model).__name__}.sample draws from a numpy Generator "
            f"(numpy.random.default_rng(seed)), got {type(generator).__module__}.{type(generator).__name__}",
            "generator",
        )
    return generator


@overload
def agent_episode_durations(
    n: int,
    generator: np.random.Generator,
    mean_turns: float = ...,
    max_turns: int = ...,
    tokens_per_turn: tuple[float, float] = ...,
    decode_rate: float = ...,
    tool_median: float = ...,
    tool_sigma: float = ...,
) -> Array: ...
@overload
def agent_episode_durations(
    n: int,
    generator: torch.Generator,
    mean_turns: float = ...,
    max_turns: int = ...,
    tokens_per_turn: tuple[float, float] = ...,
    decode_rate: float = ...,
    tool_median: float = ...,
    tool_sigma: float = ...,
) -> torch.Tensor: ...
def agent_episode_durations(
    n: int,
    generator: np.random.Generator | torch.Generator,
    mean_turns: float = 8,
    max_turns: int = 40,
    tokens_per_turn: tuple[float, float] = (100, 600),
    decode_rate: float = 40.0,
    tool_median: float = 2.0,
    tool_sigma: float = 1.0,
) -> Array | torch.Tensor:
    """Seconds of ``n`` simulated coding-agent episodes -> [n].

    Turns are geometric with mean ``mean_turns`` (drawn by inverting the CDF of one uniform per
    episode), capped at ``max_turns``. Each turn decodes U(lo, hi) tokens at ``decode_rate`` tokens
    per second and then waits for a tool whose latency is log-normal with median ``tool_median``.
    The three draws happen in that order; changing the order changes every number downstream.
    With a ``torch.Generator`` (the chapter's call) the result is the chapter's float32 tensor;
    with a numpy Generator, a float64 array.
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
    """The chapter's coding-agent duration model (see :func:`agent_episode_durations`).

    ``draws`` says which generator a scenario draws its pool from: ``"chapter"`` (the default) is
    the chapter's ``torch.Generator().manual_seed(seed)``, which gives the chapter's exact numbers
    and needs torch; ``"numpy"`` is ``numpy.random.default_rng(seed)``, the same distribution
    without torch. ``sample`` itself follows the generator it is handed.

    ``mean_turns`` is the mean of the geometric turn count *before* the ``max_turns`` cap, so it may
    exceed ``max_turns`` (the episodes then pile up at the cap; with ``max_turns=1`` every episode
    is one turn): ``pipesim fit`` relies on it for a trace whose episodes mostly run to the cap.

    The numbers may be ints or floats, kept as given (a file writes back what it read); the draws
    read each as its float (:meth:`sample_turns`), and construction refuses one a float cannot hold
    (``10**400``). An int past 2**63 (``tool_median_s = 100000000000000000000`` in a file) was
    accepted and then stopped the chapter's torch draws with ``OverflowError: int too big to
    convert``.
    """

    mean_turns: float = 8
    max_turns: int = 40
    tokens_per_turn: tuple[float, float] = (100, 600)
    decode_rate_tok_s: float = 40.0
    tool_median_s: float = 2.0
    tool_sigma: float = 1.0
    draws: Literal["chapter", "numpy"] = "chapter"

    def __post_init__(self) -> None:
        check_number("mean_turns", self.mean_turns, 1, strict=True)  # a geometric mean of turns
        check_int("max_turns", self.max_turns, 1, MAX_AGENT_TURNS, "each turn is a column of the draws")
        pair = self.tokens_per_turn
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise refuse("tokens_per_turn", f"must be a pair of numbers (lo, hi), got {shown(pair)}")
        for i, x in enumerate(pair):
            check_number(f"tokens_per_turn[{i}]", x, 0.0)
        if type(pair) is not tuple:  # a list kept made the scenario unhashable
            object.__setattr__(self, "tokens_per_turn", tuple(pair))
        lo, hi = pair
        if not lo <= hi:
            raise refuse(
                "tokens_per_turn", f"must be (lo, hi) with 0 <= lo <= hi, got {shown(self.tokens_per_turn)}"
            )
        check_number("decode_rate_tok_s", self.decode_rate_tok_s, 0, strict=True)
        check_number("tool_median_s", self.tool_median_s, 0, strict=True)
        check_number("tool_sigma", self.tool_sigma, 0.0)
        check_tail(("tool_median_s", "tool_sigma"), self.tool_median_s, self.tool_sigma)
        # every turn may decode hi tokens: their time must be a finite float
        if not self.max_turns * (hi / self.decode_rate_tok_s) < math.inf:
            raise FieldError(
                f"tokens_per_turn ({shown(self.tokens_per_turn)}) over decode_rate_tok_s "
                f"({shown(self.decode_rate_tok_s)}): a turn's decode time overflows to infinity",
                "decode_rate_tok_s",
            )
        if self.draws not in ("chapter", "numpy"):
            raise refuse("draws", f"must be 'chapter' or 'numpy', got {shown(self.draws)}")
        if self.draws == "chapter":
            self._check_float32(hi)

    def _check_float32(self, hi: float) -> None:
        """The chapter's draws are torch's float32: an episode of ``max_turns`` turns, each at its
        largest decode and a tool call :data:`~pipesim.core.validate.TAIL_SIGMAS` sigmas up, must
        stay below float32's largest value, or a draw becomes inf (and inf times a turn not taken,
        NaN). Past that, ``draws="numpy"`` draws in float64. The field named is the larger part."""
        log_max = math.log(FLOAT32_MAX)
        log_turns = math.log(self.max_turns)
        log_decode = log_turns + math.log(hi / self.decode_rate_tok_s) if hi > 0 else -math.inf
        log_tool = log_turns + math.log(self.tool_median_s) + TAIL_SIGMAS * self.tool_sigma
        if not max(log_decode, log_tool) + math.log(2) < log_max:  # their sum below float32's max
            name = "tokens_per_turn" if log_decode >= log_tool else "tool_median_s"
            top = max(log_decode, log_tool)
            took = f"{math.exp(top):.3g}" if top < 709 else f"e^{top:.0f}"
            raise FieldError(
                f"{name}: an episode of {self.max_turns} turns may take {took} s, "
                f"past what the chapter's float32 draws hold ({FLOAT32_MAX:.3g}); lower it, or draw in "
                "float64 with draws='numpy'",
                name,
            )

    @overload
    def sample_turns(self, n: int, generator: np.random.Generator) -> tuple[Array, Array]: ...
    @overload
    def sample_turns(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]: ...
    def sample_turns(
        self, n: int, generator: np.random.Generator | torch.Generator
    ) -> tuple[Array, Array] | tuple[torch.Tensor, torch.Tensor]:
        """Per-turn decode and tool seconds -> ([n, max_turns], [n, max_turns]), zero past the last turn.

        Exposed so that co-simulation can charge a real episode per turn with the same model.
        The fields are read as floats (an int past 2**63 is no torch scalar; construction has
        refused one no float holds); for the ints a float holds exactly, as every default, the
        draws are the same numbers.
        """
        _check_count(n)
        if n * self.max_turns > MAX_WHOLE_DRAW_CELLS:  # [n, max_turns] arrays: many GB, or torch's raw error
            raise refuse(
                "n",
                f"({n:,}) x max_turns ({self.max_turns:,}) is {n * self.max_turns:,} turn cells, past the "
                f"{MAX_WHOLE_DRAW_CELLS:,} one draw holds (MAX_WHOLE_DRAW_CELLS, about 2 GB): draw fewer at "
                "a time (pipesim.workload.pools.draw_stable draws a pool in chunks) or fewer turns",
            )
        lo, hi = float(self.tokens_per_turn[0]), float(self.tokens_per_turn[1])
        rate, median, sigma = float(self.decode_rate_tok_s), float(self.tool_median_s), float(self.tool_sigma)
        log_q = math.log(1 - 1 / self.mean_turns)
        if isinstance(generator, np.random.Generator):
            u = generator.random(n)  # [n]
            turns = np.clip(np.ceil(np.log1p(-u) / log_q), 1, self.max_turns)  # [n]
            tokens = lo + (hi - lo) * generator.random((n, self.max_turns))  # [n, max_turns]
            z = generator.standard_normal((n, self.max_turns))  # [n, max_turns]
            tool_np = median * np.exp(sigma * z)
            used_np = np.arange(self.max_turns) < turns[:, None]  # [n, max_turns]
            return tokens / rate * used_np, tool_np * used_np
        torch = _torch("AgentDurations with the chapter's generator (a torch.Generator)")
        if not isinstance(generator, torch.Generator):
            raise FieldTypeError(
                "AgentDurations.sample draws from a numpy Generator (numpy.random.default_rng(seed)) or "
                f"the chapter's torch.Generator, got {type(generator).__module__}.{type(generator).__name__}",
                "generator",
            )
        # the chapter's exact draws: this order and these torch calls are what its numbers come from
        ut = torch.rand(n, generator=generator)  # [n]
        turns_t = (torch.log1p(-ut) / log_q).ceil().clamp(1, self.max_turns)  # [n]
        tokens_t = lo + (hi - lo) * torch.rand(n, self.max_turns, generator=generator)  # [n, max_turns]
        decode_t = tokens_t / rate
        tool_t = median * torch.exp(
            sigma * torch.randn(n, self.max_turns, generator=generator)
        )  # [n, max_turns]
        used_t = torch.arange(self.max_turns) < turns_t[:, None]  # [n, max_turns]
        return decode_t * used_t, tool_t * used_t

    @overload
    def sample(self, n: int, generator: np.random.Generator) -> Array: ...
    @overload
    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor: ...
    def sample(self, n: int, generator: np.random.Generator | torch.Generator) -> Array | torch.Tensor:
        decode, tool = self.sample_turns(n, generator)
        return (decode + tool).sum(-1)  # [n]


@dataclass(frozen=True)
class ExponentialDurations:
    """Exponential durations with mean ``mean_s``: E[max of B] = mean_s * H_B in closed form."""

    mean_s: float = 96.0

    def __post_init__(self) -> None:
        check_number("mean_s", self.mean_s, 0, strict=True)

    def sample(self, n: int, generator: np.random.Generator) -> Array:
        _check_count(n)
        u = _numpy_generator(self, generator).random(n)
        return -self.mean_s * np.log1p(-u)  # inverse CDF, [n]


@dataclass(frozen=True)
class LogNormalDurations:
    """Log-normal durations with median ``median_s`` and log-space spread ``sigma``."""

    median_s: float = 68.0
    sigma: float = 0.9

    def __post_init__(self) -> None:
        check_number("median_s", self.median_s, 0, strict=True)
        check_number("sigma", self.sigma, 0.0)  # a str, None, bool or Fraction: refused as median_s's
        check_tail(("median_s", "sigma"), self.median_s, self.sigma)

    def sample(self, n: int, generator: np.random.Generator) -> Array:
        _check_count(n)
        z = _numpy_generator(self, generator).standard_normal(n)
        return self.median_s * np.exp(self.sigma * z)  # [n]


@dataclass(frozen=True)
class TraceDurations:
    """Replays measured durations in order (``cycle=True`` wraps around instead of failing).

    Build it from a sequence (``TraceDurations.from_values``) or a CSV column
    (``TraceDurations.from_csv(path, column)``). The generator is ignored: a trace is data.
    """

    values: tuple[float, ...] = field(default=())
    cycle: bool = False

    def __post_init__(self) -> None:
        check_bool("cycle", self.cycle)  # "no" was kept and read as true
        data = as_durations(self.values, "values")  # one-dimensional real seconds: no bool, no grid
        if len(data) == 0:
            raise refuse("values", "must hold at least one duration")
        if type(self.values) is not tuple:  # a list (or an array) kept made the scenario unhashable
            object.__setattr__(self, "values", tuple(data.tolist()))

    @classmethod
    def from_values(cls, values: Sequence[float] | npt.ArrayLike, cycle: bool = False) -> TraceDurations:
        """From a list, a numpy array or anything array-like (a CPU torch tensor included): one
        dimension of real seconds, checked as a run's pool is (a 2-D array was flattened, booleans
        read as 1.0 and 0.0)."""
        return cls(values=tuple(as_durations(values, "values").tolist()), cycle=cycle)

    @classmethod
    def from_csv(cls, path: str | Path, column: str, cycle: bool = False) -> TraceDurations:
        with io.StringIO(read_text(path, "trace CSVs", LOG_MAX_BYTES, encoding="utf-8"), newline="") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:  # not even a header line
                raise FieldError(f"{path}: the file is empty (no header line)", "path")
            if column not in reader.fieldnames:
                raise FieldError(
                    f"column {shown(column)} not in {path}; columns are {reader.fieldnames}",
                    "column",
                    str(path),
                )
            rows = []
            for i, row in enumerate(reader):
                try:
                    rows.append(float(row[column]))
                except (TypeError, ValueError):
                    raise FieldError(  # noqa: B904 - the row and column say more than float()'s message
                        f"{path}: row {i + 1} column {shown(column)} is not a number: {shown(row[column])}",
                        f"{column}[{i}]",
                        str(path),
                    )
        return cls.from_values(rows, cycle=cycle)

    def sample(self, n: int, generator: object = None) -> Array:
        _check_count(n)
        data = np.asarray(self.values, dtype=np.float64)
        if n > len(data):
            if not self.cycle:
                raise FieldError(
                    f"TraceDurations holds {len(data)} durations but the run needs {n} (the pool_size; "
                    "set cycle=True to repeat the trace, or a smaller pool_size)",
                    "cycle",
                )
            data = np.tile(data, math.ceil(n / len(data)))
        return data[:n]


def draw(model: DurationModel, n: int, seed: int) -> Array:
    """The ``n`` durations a scenario with duration model ``model`` and ``seed`` runs on.

    ``numpy.random.default_rng(seed)`` for every model, except :class:`AgentDurations` with
    ``draws="chapter"``, which draws from the chapter's generator (torch) for its exact numbers.
    """
    if isinstance(model, AgentDurations) and model.draws == "chapter":
        pool: Any = model.sample(n, chapter_generator(seed))
        return as_durations(pool.numpy())
    return as_durations(model.sample(n, np.random.default_rng(seed)))


@cache
def chapter_pool() -> torch.Tensor:
    """The chapter's pool: ``agent_episode_durations(65_536, Generator().manual_seed(0))`` (torch).

    Drawn once per process and shared, so callers must not modify it in place.
    """
    return agent_episode_durations(65_536, chapter_generator(0))
