"""The episode source of a token workload: the side table the compute engine reads.

The kernel's seam (:class:`pipesim.EpisodeSource`) asks for ``work_s(episode_id, task, version,
parent)`` in seconds; in tokens there is no such number before the engine runs.
:class:`TokenSource` keeps a **side table** by episode id (prompt tokens, response tokens,
``max_tokens``, truncated, and the tokens generated so far, filled in by the engine) and returns a
nominal ``0.0``; the compute engine reads the table, and writes each episode's real generation
seconds into its ``duration_s`` / ``work_s`` when it finishes (so the kernel's results stay in
seconds). :mod:`pipesim.compute.workload` describes the workload it draws from (groups,
difficulty, drift, truncation, agent turns).

Draws use the :class:`numpy.random.Generator` passed in, in blocks (one vectorised call per
:data:`BLOCK` draws), in launch order: the same seed and the same run give the same lengths.

This module is one of those the compiled build turns into C (``setup.py``, ``make fast``): it is
on the path of every sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
from mypy_extensions import mypyc_attr

from pipesim.compute.workload import AgentTurns, LengthModel, LogNormalLengths, TokenWorkload, _power
from pipesim.core.errors import PipelineError, check_int, shown
from pipesim.core.validate import FieldError

if TYPE_CHECKING:
    from pipesim.core.episode import Episode

BLOCK = 4096
"""Draws per vectorised call of a length model."""


class TokenTable(Protocol):
    """What a replica reads and writes of its source's side table (:class:`TokenSource` is one;
    a test's hand-made table is another). A protocol, not the class, so that the compiled build
    (``setup.py``) accepts any such table as pure Python does. A replica binds ``tokens_of`` and
    the containers once, when it is built: a table appends to them and writes their entries, but
    never replaces them. Starting an episode takes its turns out of ``turns``: they live with
    the sequence, not to the end of the run."""

    generated: list[float]
    truncated: list[bool]
    group: list[int]
    turns: dict[int, list[tuple[int, float, int]]]

    def tokens_of(self, episode_id: int) -> tuple[int, int, int]: ...


class _Blocks:
    """Draws of one length model, a block at a time."""

    def __init__(self, model: LengthModel, rng: np.random.Generator) -> None:
        self.model, self.rng = model, rng
        self.values: list[float] = []
        self.i = 0

    def refill(self) -> None:
        """The next block of draws, checked: a length model that draws NaN or infinity stops the run."""
        block = np.asarray(self.model.draw(self.rng, BLOCK), dtype=np.float64)
        if block.shape != (BLOCK,) or not np.isfinite(block).all():
            bad = block[~np.isfinite(block)][:1].tolist() if block.ndim == 1 else block.shape
            raise PipelineError(
                f"the length model {shown(self.model)} drew {bad} (need {BLOCK} finite token counts)"
            )
        self.values, self.i = block.tolist(), 0

    def next(self) -> float:
        if self.i >= len(self.values):
            self.refill()
        v = self.values[self.i]
        self.i += 1
        return v


@mypyc_attr(allow_interpreted_subclasses=True)
class TokenSource:
    """The :class:`pipesim.EpisodeSource` of a :class:`TokenWorkload`: the side table by episode id.

    ``prompt[i]``, ``response[i]`` (tokens to generate, after truncation), ``max_tokens[i]``,
    ``truncated[i]`` and ``generated[i]`` (tokens generated; the engine writes it when the episode
    finishes or is aborted, and for those in flight when asked) for episode id ``i``.
    """

    def __init__(
        self, workload: TokenWorkload, rng: np.random.Generator, context_tokens: object = None
    ) -> None:
        """``context_tokens``: the model's context (an int), which no sample may outgrow; None
        checks nothing. (Typed ``object`` so that the compiled build, which checks an argument's
        declared type on entry, lets a bad value reach the check that names it.)"""
        if not isinstance(workload, TokenWorkload):
            raise FieldError(f"workload must be a TokenWorkload, got {shown(workload)}", "workload")
        if not isinstance(rng, np.random.Generator):
            raise FieldError(f"rng must be a numpy.random.Generator, got {shown(rng)}", "rng")
        if context_tokens is not None:
            check_int("context_tokens", context_tokens, 1)
            assert isinstance(context_tokens, int)
            workload.check_context(context_tokens)
        self.workload = workload
        self.rng = rng
        self.prompt: list[int] = []
        self.response: list[int] = []
        self.max_tokens: list[int] = []
        self.truncated: list[bool] = []
        self.generated: list[float] = []
        self.group: list[int] = []
        self.observation: list[int] = []
        self.turns: dict[int, list[tuple[int, float, int]]] = {}
        """Multi-turn episodes: (response tokens, tool seconds, observation tokens) per turn."""
        self._groups: dict[int, tuple[int, float]] = {}  # group -> (prompt tokens, difficulty)
        # a fixed prompt and no difficulty spread: every group is the same, none is kept
        self._same_group: tuple[int, float] | None = (
            (int(workload.prompt), 1.0)  # type: ignore[arg-type]
            if isinstance(workload.prompt, int) and not workload.difficulty_sigma
            else None
        )
        self._response = _Blocks(workload.response, rng)
        self._prompt = None if isinstance(workload.prompt, int) else _Blocks(workload.prompt, rng)
        self._normal = _Blocks(LogNormalLengths(1.0, 1.0), rng)  # exp(z): difficulties
        self._cap = workload.max_response_tokens
        # the workload's fields every draw reads, as this object's own (a frozen dataclass's
        # attribute is a dictionary lookup; these are struct fields in the compiled build)
        self._per_prompt: int = workload.samples_per_prompt
        self._drift: float = float(workload.drift_per_version)
        # a length trajectory (or the drift): x -> a * x ** b at each version, cached by version
        self._moves: bool = bool(self._drift) or workload.trajectory is not None
        self._warps: dict[int, tuple[float, float]] = {}
        a = workload.agent
        self._agent = a
        self._tool = (
            None
            if a is None
            else _Blocks(LogNormalLengths(max(a.tool_latency_s, 1e-300), a.tool_latency_sigma), rng)
        )

    def _group(self, g: int) -> tuple[int, float]:
        w = self.workload
        if self._prompt is None:
            prompt = int(w.prompt)  # type: ignore[arg-type]
        else:
            prompt = min(max(int(round(self._prompt.next())), 1), w.max_prompt_tokens)
        difficulty = _power(self._normal.next(), w.difficulty_sigma) if w.difficulty_sigma else 1.0
        self._groups[g] = out = (prompt, difficulty)
        return out

    def work_s(self, episode_id: int, task: int, version: int, parent: int) -> float:
        """Draw episode ``episode_id``'s sample into the side table; return a nominal 0.0 seconds."""
        if episode_id != len(self.response):
            raise FieldError(
                f"episode ids must arrive in order: expected {len(self.response)}, got {episode_id}",
                "episode_id",
            )
        g = task // self._per_prompt
        grp = self._same_group or self._groups.get(g)
        prompt, difficulty = grp if grp is not None else self._group(g)
        a, b = 1.0, 1.0
        if self._moves:
            warp = self._warps.get(version)
            if warp is None:
                warp = self._warps[version] = self.workload.length_warp(version)
            a, b = warp
            if b == 1.0:
                difficulty *= a
        r = self._response
        if r.i >= len(r.values):
            r.refill()
        cap = self._cap
        x = r.values[r.i] * difficulty
        r.i += 1
        if b != 1.0:
            x = a * _power(x, b)
        n = int(x + 0.5) if x < cap + 0.5 else cap + 1  # past the cap (inf, NaN too): truncated
        if n < 1:
            n = 1
        self.prompt.append(prompt)
        self.generated.append(0.0)
        self.group.append(g)
        agent = self._agent
        if agent is None:
            self.response.append(n if n <= cap else cap)
            self.max_tokens.append(cap)
            self.truncated.append(n > cap)
            self.observation.append(0)
        else:
            self._agent_turns(episode_id, n, difficulty, agent, a, b)
        return 0.0

    def _agent_turns(
        self, episode_id: int, first: int, difficulty: float, a: AgentTurns, scale: float, power: float
    ) -> None:
        cap, tool = self._cap, self._tool
        assert tool is not None
        lengths = [first]
        for _ in range(a.turns - 1):
            x = self._response.next() * difficulty
            if power != 1.0:
                x = scale * _power(x, power)
            lengths.append(max(int(x + 0.5), 1) if x < cap + 0.5 else cap + 1)
        obs = a.observation_tokens
        turns = [(min(n, cap), tool.next() if a.tool_latency_s else 0.0, obs) for n in lengths]
        turns[-1] = (turns[-1][0], 0.0, 0)
        self.turns[episode_id] = turns
        self.response.append(sum(t[0] for t in turns))
        self.max_tokens.append(a.turns * cap)
        self.truncated.append(any(n > cap for n in lengths))
        self.observation.append(obs * (a.turns - 1))

    def publish(self, version: int, running: Sequence[tuple[Episode, float]]) -> dict[int, float]:
        """New weights change no sample's length in this model: nothing to re-cost."""
        return {}

    def fixed_work(self) -> bool:
        """The :class:`pipesim.core.port.FixedWork` promise: ``publish`` reads no episode in
        flight (the engine need not list them at each sync)."""
        return True

    def tokens_of(self, episode_id: int) -> tuple[int, int, int]:
        """(prompt, response, max_tokens) of episode ``episode_id``."""
        return self.prompt[episode_id], self.response[episode_id], self.max_tokens[episode_id]

    def sample_tokens(self, batch: list[Episode]) -> list[int]:
        """Prompt, response and observation tokens of each episode of ``batch``, in its order."""
        prompt, response, obs = self.prompt, self.response, self.observation
        return [prompt[ep.id] + response[ep.id] + obs[ep.id] for ep in batch]

    def batch_tokens(self, batch: list[Episode]) -> int:
        """Prompt, response and observation tokens of the episodes in ``batch`` (the trainer's)."""
        prompt, response, obs = self.prompt, self.response, self.observation
        total = 0
        for ep in batch:
            i = ep.id
            total += prompt[i] + response[i] + obs[i]
        return total
