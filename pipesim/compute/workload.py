"""A rollout workload in tokens, and the episode source that feeds it to the engine.

A *task* of the kernel (one entry of its pool, one launched episode) is one **sample**; samples
come in **prompt groups** of ``samples_per_prompt`` (GRPO's ``rollout.n``): kernel task ``t`` is
sample ``t % n`` of group ``t // n``. A group has a prompt length and a *difficulty*, a
multiplier on the response lengths of all its samples drawn once per group (log-normal with
``difficulty_sigma``), so a requeued task -- the same kernel task id, relaunched -- draws its new
sample from its own group's distribution: a hard task stays long. Response lengths are drawn
from a :class:`LengthModel` (:class:`LogNormalLengths`, or :class:`EmpiricalLengths` from a trace
such as Vidur's ``splitwise_code.csv``), scaled by the difficulty and by an optional drift with
the weights' version (``(1 + drift_per_version) ** version``: mean length changing over training)
or, more generally, by a :class:`~pipesim.compute.trajectory.LengthTrajectory` (the mean, p99 or
clip share by step; ``length_warp``), rounded, at least one token, and truncated at
``max_response_tokens`` (the sample is marked truncated): lengths are in absolute tokens and the
cap does not place them, so truncation emerges from it (:mod:`pipesim.compute.lengths`, the
registry of lengths per model and dataset kind). Whether the trainer takes samples one by one or
whole groups (a group being ready when its last sample is), and which groups a filter rejects, is
the batch policy's choice: :class:`pipesim.policies.groups.WholeGroups` numbers groups the same
way (``task // n``).

The engine reads the samples from :class:`pipesim.compute.source.TokenSource`, the side table
of one run's draws by episode id (:mod:`pipesim.compute.source`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from pipesim.compute.models import MAX_MODEL_DIM
from pipesim.compute.trajectory import LengthTrajectory
from pipesim.core.errors import check_int, check_number, check_tail, shown
from pipesim.core.readfile import LOG_MAX_BYTES, read_text
from pipesim.core.validate import TAIL_SIGMAS, FieldError

if TYPE_CHECKING:
    pass


_TOKENS_WHY = "the largest int32, as for a model's dimensions: no context comes near it"
"""Why a token count (or a count of turns) stops at :data:`~pipesim.compute.models.MAX_MODEL_DIM`:
a 300-digit int read from 1e308 made a 300-digit message and overflowed float arithmetic."""


def _power(base: float, exponent: float) -> float:
    """``base ** exponent``, infinite where it overflows (a length factor: lengths are capped)."""
    try:
        return base**exponent
    except OverflowError:
        return math.inf


@runtime_checkable
class LengthModel(Protocol):
    """Token counts (floats, before scaling and rounding), ``n`` at a time."""

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray: ...

    @property
    def mean_tokens(self) -> float: ...


@dataclass(frozen=True)
class LogNormalLengths:
    """Log-normal token counts with median ``median_tokens`` and log-space spread ``sigma``."""

    median_tokens: float
    sigma: float = 0.8

    def __post_init__(self) -> None:
        m, s = self.median_tokens, self.sigma
        check_number("median_tokens", m, 0, strict=True)
        check_number("sigma", s, 0)
        check_tail(("median_tokens", "sigma"), m, s)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(self.median_tokens * np.exp(self.sigma * rng.standard_normal(n)))

    @property
    def mean_tokens(self) -> float:
        return float(self.median_tokens * _power(math.e, self.sigma**2 / 2))


@dataclass(frozen=True)
class EmpiricalLengths:
    """Token counts resampled (with replacement) from observed ones: a trace or a histogram."""

    tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, tuple) or not self.tokens:
            raise FieldError("tokens must be a non-empty tuple of positive ints", "tokens")
        for i, t in enumerate(self.tokens):  # tuple(array) holds numpy ints: check_int names int(x)
            check_int(f"tokens[{i}]", t, 1)

    @classmethod
    def from_csv(cls, path: str | Path, column: str = "num_decode_tokens") -> EmpiricalLengths:
        """The values of ``column`` in a CSV file (e.g. Vidur's ``splitwise_code.csv``): whole token
        counts >= 1 (``12.0`` is 12; ``12.5`` is refused, naming its line, not cut to 12). A byte
        order mark before the header is read as one (``utf-8-sig``), not as part of the first
        column's name."""
        if Path(path).is_dir():
            raise FieldError(f"{path}: path is a directory, not a CSV file", "path", str(path))
        # a regular file under the logs' cap: a FIFO hung here, /dev/zero filled the memory
        with io.StringIO(read_text(path, "trace CSVs", LOG_MAX_BYTES), newline="") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:  # not even a header line
                raise FieldError(f"{path}: the file is empty (no header line)", "path", str(path))
            if column not in reader.fieldnames:
                raise FieldError(
                    f"column {shown(column)} not in {path} (columns: {reader.fieldnames})",
                    "column",
                    str(path),
                )
            tokens = []
            for line, row in enumerate(reader, start=2):
                cell = row.get(column)
                try:
                    value = float(cell)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    value = math.nan
                if not (math.isfinite(value) and value >= 1 and value.is_integer()):
                    raise FieldError(
                        f"{path}, line {line}, column {shown(column)}: {shown(cell)} is not a whole token "
                        "count >= 1",
                        "column",
                        str(path),
                    )
                tokens.append(int(value))
            return cls(tuple(tokens))

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = np.asarray(self.tokens, dtype=np.float64)
        return np.asarray(values[rng.integers(0, len(values), n)])

    @property
    def mean_tokens(self) -> float:
        return float(np.mean(self.tokens))


@dataclass(frozen=True)
class AgentTurns:
    """Multi-turn episodes: ``turns`` turns of response tokens, each but the last followed by a
    tool call (log-normal latency, median ``tool_latency_s``) whose ``observation_tokens`` join the
    context and are prefilled when the sequence returns to the GPU. Each turn's response is drawn
    from the workload's response model (with the group's difficulty) and capped at
    ``max_response_tokens``."""

    turns: int = 4
    tool_latency_s: float = 5.0
    tool_latency_sigma: float = 1.0
    observation_tokens: int = 256

    def __post_init__(self) -> None:
        check_int("turns", self.turns, 1, MAX_MODEL_DIM, _TOKENS_WHY)
        check_int("observation_tokens", self.observation_tokens, 0, MAX_MODEL_DIM, _TOKENS_WHY)
        for name in ("tool_latency_s", "tool_latency_sigma"):
            check_number(name, getattr(self, name), 0)
        check_tail(("tool_latency_s", "tool_latency_sigma"), self.tool_latency_s, self.tool_latency_sigma)


def _length_model(name: str, value: object) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is a length model instance whose draws (a
    probe of 16, from a generator of its own: the run's draws are untouched) are finite and >= 0."""
    if isinstance(value, type) or not isinstance(value, LengthModel):
        raise FieldError(
            f"{name} must be a length model instance (LogNormalLengths(...), EmpiricalLengths(...)), "
            f"got {shown(value)}",
            name,
        )
    try:
        probe = np.asarray(value.draw(np.random.default_rng(0), 16), dtype=np.float64)
    except Exception as e:  # a user's model: say which field holds it
        raise FieldError(f"{name}: {shown(value)}.draw(rng, 16) failed: {e}", name) from None
    if probe.shape != (16,) or not (np.isfinite(probe) & (probe >= 0)).all():
        raise FieldError(
            f"{name}: {shown(value)}.draw(rng, 16) must give 16 finite token counts >= 0, got {shown(probe)}",
            name,
        )


@dataclass(frozen=True)
class TokenWorkload:
    """Prompt groups of ``samples_per_prompt`` samples; lengths in tokens (see the module docstring)."""

    response: LengthModel = field(default_factory=lambda: LogNormalLengths(2000.0, 0.8))
    prompt: LengthModel | int = 512
    """Prompt tokens of a group: a fixed count, or a length model (capped at ``max_prompt_tokens``)."""
    samples_per_prompt: int = 1
    max_response_tokens: int = 8192
    """Samples are truncated here (their ``max_tokens``)."""
    max_prompt_tokens: int = 4096
    difficulty_sigma: float = 0.0
    """Log-space spread of each group's length multiplier (0: every group alike)."""
    drift_per_version: float = 0.0
    """Response lengths scale by ``(1 + drift_per_version) ** version`` (a geometric
    :class:`~pipesim.compute.trajectory.LengthTrajectory`; give one or the other)."""
    trajectory: LengthTrajectory | None = None
    """The length distribution by step (:mod:`pipesim.compute.trajectory`); None: stationary (or
    ``drift_per_version``)."""
    agent: AgentTurns | None = None
    """Multi-turn episodes (None: one turn, no tool calls)."""

    def __post_init__(self) -> None:
        _length_model("response", self.response)
        for name in ("samples_per_prompt", "max_response_tokens", "max_prompt_tokens"):
            check_int(name, getattr(self, name), 1, MAX_MODEL_DIM, _TOKENS_WHY)
        if isinstance(self.prompt, numbers.Real):  # a count: check_int names np.int64, 100.0 or True
            check_int("prompt", self.prompt, 1, MAX_MODEL_DIM, _TOKENS_WHY)
        if isinstance(self.prompt, int):
            if self.prompt > self.max_prompt_tokens:
                msg = f"prompt ({shown(self.prompt)}) exceeds max_prompt_tokens ({self.max_prompt_tokens})"
                raise FieldError(msg, "prompt")
        else:
            _length_model("prompt", self.prompt)
        check_number("difficulty_sigma", self.difficulty_sigma, 0.0)
        self._check_difficulty_tail()
        if self.agent is not None and not isinstance(self.agent, AgentTurns):
            raise FieldError(f"agent must be an AgentTurns or None, got {shown(self.agent)}", "agent")
        check_number("drift_per_version", self.drift_per_version, -1.0, strict=True)
        if self.trajectory is not None:
            if not isinstance(self.trajectory, LengthTrajectory):
                raise FieldError(
                    f"trajectory must be a LengthTrajectory or None, got {shown(self.trajectory)}",
                    "trajectory",
                )
            if self.drift_per_version:
                raise FieldError(
                    "trajectory and drift_per_version: give one (a drift is a geometric trajectory)",
                    "trajectory",
                )
            if self.base_sigma == 0 and any(
                p.p99_tokens is not None or p.clip_share is not None for p in self.trajectory.points
            ):
                raise FieldError(
                    "trajectory: a p99 or clip share needs a base spread (sigma or difficulty_sigma) > 0",
                    "trajectory",
                )
            self.length_warp(0)  # every point resolved now: a point no log-normal meets is refused here

    def _check_difficulty_tail(self) -> None:
        """A length times its group's multiplier, :data:`~pipesim.core.validate.TAIL_SIGMAS` of
        their joint spread above the median, must be a finite float (``difficulty_sigma`` names it:
        the response model's own spread was checked alone)."""
        if not self.difficulty_sigma:
            return
        r = self.response
        median, spread = 1.0, self.difficulty_sigma
        if isinstance(r, LogNormalLengths):
            median, spread = float(r.median_tokens), math.hypot(r.sigma, self.difficulty_sigma)
        try:
            check_tail(("median", "spread"), median, spread)
        except FieldError:
            raise FieldError(
                f"difficulty_sigma ({shown(self.difficulty_sigma)}): a length {TAIL_SIGMAS:g} sigmas of the "
                f"joint spread ({shown(spread)}) above the median overflows to infinity",
                "difficulty_sigma",
            ) from None

    @property
    def base_sigma(self) -> float | None:
        """Log-space spread of a response length times its group's difficulty, before the cap
        (None: the response model is not log-normal)."""
        if not isinstance(self.response, LogNormalLengths):
            return None
        return math.hypot(self.response.sigma, self.difficulty_sigma)

    @property
    def base_mean_tokens(self) -> float:
        """Mean response length before the cap and before any drift or trajectory."""
        return self.response.mean_tokens * _power(math.e, self.difficulty_sigma**2 / 2)

    @functools.cached_property
    def _resolved(self) -> tuple[tuple[int, float, float], ...]:
        assert self.trajectory is not None
        return self.trajectory.resolved(self.max_response_tokens, self.base_sigma)

    def length_warp(self, version: int) -> tuple[float, float]:
        """``(a, b)``: at ``version`` a sample drawn as ``x`` (response times difficulty, before the
        cap) is ``a * x ** b`` (:mod:`pipesim.compute.trajectory`); ``b`` is 1.0 exactly where
        only the scale moves (``drift_per_version``, or a point without p99 or clip share)."""
        if self.trajectory is None:
            return _power(1.0 + self.drift_per_version, version), 1.0
        mean, s = LengthTrajectory.at(self._resolved, version)
        s0 = self.base_sigma
        if s0 is None or math.isnan(s) or s == s0:
            return mean / self.base_mean_tokens, 1.0
        assert isinstance(self.response, LogNormalLengths)
        b = s / s0
        return mean * math.exp(-s * s / 2) / self.response.median_tokens**b, b

    def over_window(self, start: int, stop: int) -> TokenWorkload:
        """The stationary workload standing for steps ``start`` to ``stop - 1`` of this one's
        trajectory (:meth:`LengthTrajectory.window_point`); itself when nothing moves."""
        traj = self.trajectory
        if traj is None and self.drift_per_version:
            traj = LengthTrajectory.geometric(self.base_mean_tokens, self.drift_per_version, max(stop, 1))
        if traj is None:
            return self
        point = traj.window_point(start, stop, self.max_response_tokens, self.base_sigma)
        one = LengthTrajectory((dataclasses.replace(point, step=0),))
        return dataclasses.replace(self, trajectory=one, drift_per_version=0.0)

    @property
    def longest_prompt_tokens(self) -> int:
        """The largest prompt: the fixed one, or ``max_prompt_tokens`` for a drawn one."""
        return self.prompt if isinstance(self.prompt, int) else self.max_prompt_tokens

    @property
    def longest_response_tokens(self) -> int:
        """The longest response a sample can hold: ``max_response_tokens``, or for agent episodes
        every turn's response and the observations between them (what verl logs as one response)."""
        if self.agent is None:
            return self.max_response_tokens
        a = self.agent
        return a.turns * self.max_response_tokens + (a.turns - 1) * a.observation_tokens

    @property
    def max_sequence_tokens(self) -> int:
        """The longest sequence a sample can become (largest prompt + longest response)."""
        return self.longest_prompt_tokens + self.longest_response_tokens

    def check_context(self, context_tokens: int) -> None:
        """``ValueError`` when a sample can outgrow ``context_tokens``: naming the prompt's field
        (``prompt`` when it is a fixed count, else ``max_prompt_tokens``) when the largest prompt
        alone leaves no room for one response token, else ``max_response_tokens`` (and, for agent
        episodes, ``agent.turns`` and ``agent.observation_tokens``)."""
        prompt = self.longest_prompt_tokens
        if prompt >= context_tokens:  # every response holds at least one token
            name = "prompt" if isinstance(self.prompt, int) else "max_prompt_tokens"
            raise FieldError(
                f"{name} ({prompt}): the largest prompt leaves no room for a response token in the "
                f"model context ({context_tokens} tokens); lower {name} or raise max_model_len",
                name,
            )
        if self.max_sequence_tokens > context_tokens:
            fields = f"max_response_tokens ({self.max_response_tokens})"
            if self.agent is not None:
                a = self.agent
                fields += (
                    f" x agent.turns ({a.turns}) + agent.observation_tokens ({a.observation_tokens})"
                    f" x (agent.turns - 1)"
                )
            raise FieldError(
                f"{fields}: the longest sample "
                f"({self.max_sequence_tokens} tokens: prompt, responses and observations) exceeds the "
                f"model context ({context_tokens} tokens)",
                "max_response_tokens",
            )
