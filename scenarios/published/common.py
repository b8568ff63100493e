"""What every published-claim scenario shares: the choices made once, and measuring a run.

Where a source leaves a value out it is chosen **once**, here (``UNSTATED``; which registry entry
of response lengths each model uses; the length band of a range), with the reason in a comment,
and the same choice is used for every claim. :func:`measure` runs a scenario on the compute-grounded engine
and keeps what the claims read (:class:`Measured`: steady step, training seconds, the headline
extrapolated over a published step count).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pipesim
from pipesim.compute import EngineConfig, TokenWorkload, TrainerConfig, length_spec
from scenarios.published.fit import TrainerFit, trainer_config, update_actor_s

# --------------------------------------------------------------------------------------------
# Choices made once, for every claim, where a source leaves a value out.
# --------------------------------------------------------------------------------------------

# Response lengths are inputs in absolute tokens, one registry entry per model and dataset kind
# (pipesim.compute.lengths, each entry with its source), never one per claim; the cap of each
# setup is its own stated value, and truncation follows from the two.
LENGTHS_7B_BASE = "math-reasoning-7b"
"""Qwen2.5-Math-7B base under DAPO (verl)."""
LENGTHS_DISTILL = "math-reasoning-1.5b"
"""R1-Distill-Qwen-1.5B on math (AReaL)."""
LENGTHS_QWEN3 = "math-reasoning-qwen3"
"""Qwen3 thinking models on math (APRIL's Qwen3-4B, ROLL's Qwen3-8B)."""

LENGTH_BAND = 1.3
"""The length band of every range: lengths from 1/1.3 to 1.3 times the entry's (a run whose
lengths drift 1.3x shows as an interval rather than as a miss). Chosen once;
no source gives the spread of a run's lengths around a registry entry."""


@dataclass(frozen=True)
class Variant:
    """One run of a range: the lengths scaled by ``scale`` (a band's end), the run's ``seed``, and
    the trainer constants (None: the stated global defaults; a :class:`TrainerFit`: transfer)."""

    scale: float = 1.0
    seed: int = 0
    fit: TrainerFit | None = None

    def band(self) -> tuple[Variant, Variant]:
        """The two ends of the range around this point: shorter lengths on seed 1, longer on 2."""
        return (
            dataclasses.replace(self, scale=self.scale / LENGTH_BAND, seed=1),
            dataclasses.replace(self, scale=self.scale * LENGTH_BAND, seed=2),
        )


POINT = Variant()

PROMPT_TOKENS = 256
"""Prompt length of a math problem with its chat template: none of the sources states the mean
(verl's ``max_prompt_length`` is 2,048, a cap); a competition math problem is a few hundred tokens.
The same choice as :data:`pipesim.compute.profiles.CALIBRATION_PROMPT_TOKENS` (the default
profile's calibration row is verl's; ``tests/test_published_walk_fixes.py`` ties the two)."""


@dataclass(frozen=True)
class Unstated:
    """Setup values a claim's sources do not give: the one default used for all of them.

    Earlier versions also chose ROLL's batch, group size, response cap and trainer share here;
    ROLL's own documentation gives them now (``scenarios.published.roll``)."""

    gpu: str = "h800"
    """ROLL Flash is from Alibaba, AReaL's results are on H800, ROLL's Qwen3-8B example names
    "8xH800": the H800 for an unstated GPU."""


UNSTATED = Unstated()


def math_workload(
    lengths: str, max_response_tokens: int, samples_per_prompt: int, v: Variant
) -> TokenWorkload:
    """A math-RL workload: the registry entry ``lengths`` (scaled by ``v.scale``) under the stated
    cap, prompts of :data:`PROMPT_TOKENS`."""
    return length_spec(lengths).workload(
        max_response_tokens, samples_per_prompt, PROMPT_TOKENS, scale=v.scale
    )


# --------------------------------------------------------------------------------------------
# Measuring a run: the steady step and the extrapolated headline
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What one simulated run gives: per kernel step, steady state after ``warmup`` steps."""

    steps: int
    warmup: int
    ends: tuple[float, ...]
    """Simulated time at the end of each training step."""
    train_s: tuple[float, ...]
    sync_s: float
    """Mean seconds of one weight sync."""
    syncs: int
    tokens_trained: float
    wall_s: float
    summary: dict[str, float] = field(repr=False, default_factory=dict)
    train_tokens: tuple[float, ...] = ()
    """Tokens trained in each step (the trainer's log)."""
    trainer: TrainerConfig | None = None
    train_update_s: tuple[float, ...] = ()
    """The trainer's ``update_actor`` seconds in each step (its phase log)."""

    def gen_s(self, k: int) -> float:
        """verl's ``gen`` of a published step of ``k`` trainer steps: the step less the trainer's
        span (the trainer waiting for samples, the weight sync included)."""
        return k * (self.steady_step_s - self.steady_train_s)

    def update_actor_s(self, k: int) -> float:
        """verl's ``update_actor`` of a published step of ``k`` trainer steps (NaN: no trainer)."""
        if self.trainer is None or not self.train_tokens:
            return float("nan")
        if not self.train_update_s:  # a run without a phase log: the one-MFU formula
            return k * update_actor_s(self.trainer, self.steady_tokens)
        u = self.train_update_s[self.warmup :]
        return k * sum(u) / len(u)

    @property
    def steady_tokens(self) -> float:
        t = self.train_tokens[self.warmup :]
        return sum(t) / len(t)

    @property
    def steady_step_s(self) -> float:
        e, w = self.ends, self.warmup
        return (e[-1] - e[w - 1]) / (len(e) - w) if w else e[-1] / len(e)

    @property
    def steady_train_s(self) -> float:
        t = self.train_s[self.warmup :]
        return sum(t) / len(t)

    def total_s(self, n_steps: int) -> float:
        """Seconds for ``n_steps`` kernel steps: the warm-up as simulated, then steady steps."""
        head = self.ends[self.warmup - 1] if self.warmup else 0.0
        return head + (n_steps - self.warmup) * self.steady_step_s


def _lazy(name: str) -> Any:
    """A name :mod:`pipesim.compute` exports lazily (its ``__getattr__``; typed ``object``)."""
    import pipesim.compute

    return getattr(pipesim.compute, name)


def measure(
    scenario: pipesim.Scenario,
    cluster: Any,
    workload: TokenWorkload,
    trainer: TrainerConfig | None,
    warmup: int,
    seed: int = 0,
    routing: Any = None,
) -> Measured:
    """One run of ``scenario`` on ``cluster``, its steady state measured after ``warmup`` steps;
    ``routing`` picks each admitted sample's replica (None: the engine's ``LeastLoaded``)."""
    run_compute: Any = _lazy("run_compute")
    t0 = time.perf_counter()
    run = run_compute(scenario, cluster, workload, seed=seed, trainer=trainer, routing=routing)
    wall = time.perf_counter() - t0
    log = run.result.train_log
    steps = len(log)
    if steps <= warmup:
        raise RuntimeError(f"{scenario.name}: {steps} steps trained, need more than warmup={warmup}")
    syncs = run.result.sync_log
    sync_s = sum(b - a for a, b, _ in syncs) / len(syncs) if syncs else 0.0
    s = run.summary()
    return Measured(
        steps=steps,
        warmup=warmup,
        ends=tuple(end for _, _, end, _ in log),
        train_s=tuple(end - start for _, start, end, _ in log),
        sync_s=sync_s,
        syncs=len(syncs),
        tokens_trained=float(s["tokens_trained"]),
        wall_s=wall,
        summary=s,
        train_tokens=tuple(tokens for _, tokens, _ in run.trainer_log),
        trainer=trainer,
        train_update_s=tuple(phases["update_actor"] for _, _, phases in run.phase_log),
    )


def _cluster(engine: EngineConfig, n_gpus: int, trainer_gpus: int) -> Any:
    cluster: Any = _lazy("Cluster")
    return cluster(engine=engine, n_gpus=n_gpus, trainer_gpus=trainer_gpus)


def _trainer(
    engine: EngineConfig,
    n_gpus: int,
    *,
    old_logp: bool,
    reference: bool = False,
    v: Variant = POINT,
    batch: Mapping[str, Any] | None = None,
) -> TrainerConfig:
    """The trainer of a run: :func:`scenarios.published.fit.trainer_config`, the one place its
    constants are chosen (the global defaults, or ``v.fit`` under the transfer protocol), with the
    run's stated batch knobs."""
    return trainer_config(engine, n_gpus, old_logp=old_logp, reference=reference, fit=v.fit, batch=batch)


# --------------------------------------------------------------------------------------------
# The runs the claims share: memoised, and dispatched to worker processes by the table
# --------------------------------------------------------------------------------------------

RunKey = tuple[str, str, tuple[Any, ...]]
"""(module, function, arguments) of one run."""
RUNNERS: dict[tuple[str, str], RunCache] = {}
_recording: list[RunKey] | None = None


class RunCache:
    """A run function, memoised by its arguments (``cache_clear`` to rerun). While
    :func:`recording` is on, a call not yet memoised records its key and returns a placeholder
    instead of running: the table learns which runs the claims need, runs them in worker
    processes, and :meth:`store` s the results before the claims read them."""

    def __init__(self, fn: Callable[..., Measured]) -> None:
        self.fn = fn
        self.signature = inspect.signature(fn)
        self.memo: dict[tuple[Any, ...], Measured] = {}
        functools.update_wrapper(self, fn)
        RUNNERS[(fn.__module__, fn.__name__)] = self

    def __call__(self, *args: Any, **kwargs: Any) -> Measured:
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        args = tuple(bound.arguments.values())  # one key whichever way the defaults were given
        m = self.memo.get(args)
        if m is not None:
            return m
        if _recording is not None:
            _recording.append((self.fn.__module__, self.fn.__name__, args))
            return PLACEHOLDER
        m = self.memo[args] = self.fn(*args)
        return m

    def store(self, args: tuple[Any, ...], m: Measured) -> None:
        self.memo[args] = m

    def cache_clear(self) -> None:
        self.memo.clear()


def recording(on: bool) -> list[RunKey]:
    """Start (``on``) or stop recording the runs asked for; returns the keys recorded so far."""
    global _recording
    keys = _recording or []
    _recording = [] if on else None
    return keys


def run_key(key: RunKey) -> tuple[RunKey, Measured]:
    """Run one recorded key (in a worker process, or here): the function undecorated."""
    module, name, args = key
    import importlib

    importlib.import_module(module)
    return key, RUNNERS[(module, name)].fn(*args)


PLACEHOLDER = Measured(
    steps=3, warmup=1, ends=(100.0, 200.0, 300.0), train_s=(40.0,) * 3, sync_s=1.0, syncs=3,
    tokens_trained=3e6, wall_s=0.0, train_tokens=(1e6,) * 3,
)  # fmt: skip
"""What a run returns while recording (its values are never shown)."""


def rises(values: list[float]) -> bool:
    """Each value above the one before it (one run per value, no noise allowed for). The trend row
    no longer uses it: one seed's ranking of eta 2 and 4 moves with the seed, so the row pairs
    several seeds instead (:func:`scenarios.published.areal.areal_trend`)."""
    return all(b > a for a, b in zip(values, values[1:], strict=False))


def rollout_throughput(m: Measured) -> float:
    """Samples delivered per second of rollout (the step minus training and the weight sync)."""
    gen = m.steady_step_s - m.steady_train_s - m.sync_s * m.syncs / m.steps
    return 1.0 / gen
