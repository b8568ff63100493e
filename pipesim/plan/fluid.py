"""A first cut before any simulation: a fluid ceiling on each design's throughput, and the designs
it rules out.

**The ceiling.** A step trains ``B`` samples of ``L`` tokens on average (the prompt, the mean
response of the length model cut at ``max_response_tokens``, per turn for an agent, and the
observations). In the fluid limit nothing waits for anything it does not have to:

* the engines decode ``n_replicas x tokens_per_s(b, b x K)`` tokens per second
  (:meth:`~pipesim.compute.cost.ReplicaCost.tokens_per_s`: ``b`` sequences, as many as
  ``max_num_seqs`` and the KV budget allow, each holding ``K`` = its prompt and half its other
  tokens; prefill free), so generating a step takes ``g = B x R / that``, with R the response and
  turn tokens of a sample;
* a synchronous design (eta 0, no over-sampling) waits each step for its longest sample: ``g`` is
  at least that sample's tokens (a low quantile of the longest of B draws, all turns) at
  one sequence's decode speed, plus an agent's median tool seconds;
* the trainer takes ``t = TrainerConfig.step_time_s(B x L)``;
* disaggregated and asynchronous, the two overlap: a step takes at least ``max(g, t)``;
  otherwise they alternate (colocated engines also pay the offload switch): ``g + t + switch``.

The ceiling is ``3600 x B / that`` samples per hour. It is a fluid estimate, not a proof (the
KV held is a mean, the longest sample a low quantile): weight syncs, tool calls, queueing, the
tail and KV pressure lower the real throughput, and a simulated throughput above the ceiling
counts as a disagreement below.

**The cut.** :func:`first_cut` screens the fastest designs whose constraints their own policies
prove (``staleness_bound`` within the limits, and nothing discarded), takes :data:`FLOOR_SHARE` of
the best throughput among them as a floor, and rules out every design whose ceiling is below the
floor: it cannot beat a design known to be feasible. (The floor is discounted because a short
screen runs faster than a full run: the first step waits on nothing.)

**Its error, measured.** :data:`AUDIT_SHARE` of the ruled-out designs (at least
:data:`AUDIT_MIN`, drawn with the plan's seeded generator) are screened anyway. An audited design
*disagrees* when its screened throughput reaches the floor (the cut was wrong to drop it) or
exceeds its ceiling (the ceiling was not one). The report shows the share that disagreed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipesim.plan.build import engine_config, trainer_config
from pipesim.plan.space import Design, PlanSpec

__all__ = ["AUDIT_MIN", "AUDIT_SHARE", "FLOOR_SHARE", "Cut", "ceiling", "proved"]

FLOOR_SHARE = 0.8
"""The floor: this share of the best screened throughput among the proved designs."""
AUDIT_SHARE = 0.1
AUDIT_MIN = 3


@dataclass
class Cut:
    """What the first cut did: the ceilings, the floor, the designs ruled out and the audit."""

    ceilings: dict[Design, float] = field(default_factory=dict)
    anchors: list[Design] = field(default_factory=list)
    """The proved designs screened first (the floor's source)."""
    floor: float = 0.0
    ruled_out: list[Design] = field(default_factory=list)
    audited: list[Design] = field(default_factory=list)
    disagreed: list[Design] = field(default_factory=list)

    @property
    def disagreement(self) -> float | None:
        """Share of the audited designs that disagreed (None: none audited)."""
        return len(self.disagreed) / len(self.audited) if self.audited else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "floor_per_hour": self.floor,
            "ruled_out": len(self.ruled_out),
            "audited": len(self.audited),
            "disagreed": len(self.disagreed),
            "disagreement": self.disagreement,
        }


def _sample_tokens(spec: PlanSpec) -> tuple[float, float]:
    """(generated, trained) tokens of a mean sample: responses (per turn) and all of it."""
    w = spec.workload
    resp = min(float(w.response.mean_tokens), float(w.max_response_tokens))
    prompt = float(w.prompt if isinstance(w.prompt, int) else w.max_prompt_tokens)
    if w.agent is None:
        return resp, prompt + resp
    a = w.agent
    gen = a.turns * resp
    return gen, prompt + gen + (a.turns - 1) * a.observation_tokens


def _longest(spec: PlanSpec) -> float:
    """A low value for the longest response (all turns) of a step's B samples: the length the
    longest of B draws exceeds 95% of the time (the ``0.05 ** (1 / B)`` quantile of the length
    model, a log-normal's spread widened by the prompts' difficulty), cut at
    ``max_response_tokens``."""
    from statistics import NormalDist

    w = spec.workload
    q = 0.05 ** (1 / spec.batch_size)
    r: Any = w.response
    if hasattr(r, "median_tokens"):
        sigma = (float(r.sigma) ** 2 + float(w.difficulty_sigma) ** 2) ** 0.5
        one = float(r.median_tokens) * float(np.exp(sigma * NormalDist().inv_cdf(q)))
    else:
        one = float(np.quantile(np.asarray(r.tokens), q))
    one = min(one, float(w.max_response_tokens))
    return one * (w.agent.turns if w.agent is not None else 1)


def _tool_s(spec: PlanSpec) -> float:
    """Median tool seconds of one agent episode (none without an agent)."""
    a = spec.workload.agent
    return 0.0 if a is None else (a.turns - 1) * float(a.tool_latency_s)


def ceiling(spec: PlanSpec, d: Design, _memo: dict[Any, float] | None = None) -> float:
    """The fluid ceiling on ``d``'s trained samples per hour (module docstring)."""

    memo = {} if _memo is None else _memo
    # the ceiling reads only the tp, the trainer GPUs and whether the design is synchronous (the
    # rest of a design, its update, k and eta past 0, moves no term): one value per such key
    key = ("ceiling", d.tp, d.trainer_gpus, d.eta == 0 and d.oversample <= 1)
    if key in memo:
        return memo[key]
    memo[key] = _ceiling(spec, d, memo)
    return memo[key]


def _ceiling(spec: PlanSpec, d: Design, memo: dict[Any, float]) -> float:
    import pipesim.compute as pc

    gen, trained = _sample_tokens(spec)
    if ("tps", d.tp) not in memo:
        eng = engine_config(spec, d.tp)
        w = spec.workload
        prompt = float(w.prompt if isinstance(w.prompt, int) else w.max_prompt_tokens)
        held = prompt + (trained - prompt) / 2  # a running sequence's mean KV, halfway through
        b = max(1, min(eng.max_num_seqs, int(eng.kv_budget_tokens // max(held, 1.0))))
        memo[("tps", d.tp)] = pc.ReplicaCost(eng).tokens_per_s(b, b * held)
    cluster: Any = pc.Cluster
    c = cluster(engine=engine_config(spec, d.tp), n_gpus=spec.n_gpus, trainer_gpus=d.trainer_gpus)
    if ("one", d.tp) not in memo:
        memo[("one", d.tp)] = pc.ReplicaCost(engine_config(spec, d.tp)).iteration_s(1, 0.0)
    rate = c.n_replicas * memo[("tps", d.tp)]
    g = spec.batch_size * gen / rate
    t = trainer_config(spec, d).step_time_s(spec.batch_size * trained)
    if d.eta == 0 and d.oversample <= 1:  # synchronous: each step waits for its longest sample
        g = max(g, _longest(spec) * memo[("one", d.tp)] + _tool_s(spec))
        step = g + t + c.switch_time_s()
    else:
        step = g + t + c.switch_time_s() if d.colocated else max(g, t)
    return 3600.0 * spec.batch_size / step if step > 0 else float("inf")


def proved(spec: PlanSpec, d: Design) -> bool:
    """Whether ``d``'s own policies prove every constraint at any length: a declared staleness
    bound within the staleness limits, a design that discards nothing (no abort, no
    over-sampling) where a discard limit is set, and one that trains on-policy only (eta 0,
    draining, weights moved every step) where an off-policy token limit below 1 is set."""
    from pipesim.plan.judge import bound

    c = spec.constraints
    b = bound(spec, d)
    for lim in (c.mean_staleness, c.max_staleness):
        if lim is not None and (b is None or b > lim):
            return False
    on_policy = d.eta == 0 and d.update == "drain" and d.sync_every == 1
    if c.offpolicy_token_share is not None and c.offpolicy_token_share < 1 and not on_policy:
        return False
    return not (c.discarded_share is not None and (d.update == "abort" or d.oversample > 1))


def audit_sample(ruled_out: list[Design], rng: np.random.Generator) -> list[Design]:
    """The ruled-out designs screened anyway to measure the cut's error."""
    if not ruled_out:
        return []
    k = min(len(ruled_out), max(AUDIT_MIN, int(np.ceil(AUDIT_SHARE * len(ruled_out)))))
    idx = rng.choice(len(ruled_out), size=k, replace=False)
    return [ruled_out[i] for i in sorted(idx.tolist())]
