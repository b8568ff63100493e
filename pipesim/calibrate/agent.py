"""A multi-turn (agent) spec's response lengths, read from verl's episode-level column.

verl logs ``response_length/mean`` per sample, and a multi-turn sample is its whole episode:
``_compute_response_info`` (``verl/trainer/ppo/metric_utils.py``) sums the attention mask of the
response window, which holds every turn's response and the tool observations between them (the
loss masks the observations; the length counts them; forks that log the turns alone subtract an
``obs_length``). The spec's response model (``workload.response``, capped at
``workload.max_response_tokens``) is one turn's, and its turn model
(:class:`pipesim.compute.workload.AgentTurns`) builds an episode of ``turns`` responses, each
drawn from that model with the group's difficulty and capped, and ``turns - 1`` observations of
``observation_tokens``::

    episode = turns x turn + (turns - 1) x observation_tokens

so a step's mean turn is ``(episode mean - (turns - 1) x observation_tokens) / turns``
(:func:`turn_means`): the series the length fit (:func:`pipesim.calibrate.fit.fit_lengths`, at
the per-turn cap) and the length trajectory read. The simulated ``response_length/mean`` is the
episode in the same count (the trainer's tokens less the prompt:
:func:`pipesim.calibrate.simulated.simulate`), so the held-out check compares episodes with
episodes, and the trainer's tokens
(``batch x (prompt + response)``) hold the observations as the simulated trainer's do.

Not read for an agent spec: ``response_length/clip_ratio`` and ``response_length/max`` (verl's clip
ratio is the share of episodes that fill the response window, its ``max`` the longest episode:
neither is a turn's cap nor a turn's length), so the sigma is the spec's; a note says so.

Not fitted: the tool latency (``agent.tool_latency_s`` and its sigma; verl logs no tool call's
time). Generation waits on the tool calls, so the decode overhead fitted to ``gen`` afterwards
(:func:`pipesim.calibrate.simulated.fit_overhead`) takes up whatever the spec's latency gets wrong:
a log of 8 s tool calls calibrated against a spec of 4 s fitted 35.9 ms a decode iteration (the
engine's own: 1 ms) and held its logged design, but predicted 7,223 samples/h for another split
that ran 12,249. :func:`tool_note` says so in the notes, and
:func:`pipesim.calibrate.predict.conditional_on` under the prediction's ranges.

Refused (:func:`check_episodes`, from :func:`pipesim.calibrate.check_log`): a step whose episode
mean is below the shortest episode the spec allows, ``turns`` tokens and the ``turns - 1``
observations: a log of the turns' responses alone (a fork's ``response_length`` without the
observations), or of another turn model. Before, such a log was read as one turn's length: a
6-turn spec capped at 1,536 tokens a turn was fitted a median of 3,068 tokens a turn and missed
its held-out steps by 65% (step) and 259% (response length), without a word.
"""

from __future__ import annotations

import numpy as np

from pipesim.calibrate.cells import LogError
from pipesim.calibrate.log import TrainingLog
from pipesim.compute.workload import TokenWorkload
from pipesim.plan.runspec import RunSpec

__all__ = ["check_episodes", "length_notes", "shortest_episode", "tool_note", "turn_means"]


def shortest_episode(wl: TokenWorkload) -> int:
    """The fewest response tokens an episode of ``wl`` holds: a token a turn and the observations
    (one for a single-turn workload)."""
    a = wl.agent
    return 1 if a is None else a.turns + (a.turns - 1) * a.observation_tokens


def turn_means(episode: np.ndarray, wl: TokenWorkload) -> np.ndarray:
    """The mean turn's response tokens of each step whose episode mean is ``episode`` (module
    docstring); ``episode`` itself for a single-turn workload."""
    x = np.asarray(episode, dtype=float)
    a = wl.agent
    if a is None:
        return x
    return (x - (a.turns - 1) * a.observation_tokens) / a.turns


def check_episodes(log: TrainingLog, rs: RunSpec) -> None:
    """LogError naming ``response_length/mean`` at the first step whose mean is below the shortest
    episode of ``rs``'s agent workload (module docstring); nothing for a single-turn spec."""
    wl = rs.plan.workload
    a = wl.agent
    if a is None or not log.has("response_length/mean"):
        return
    least = shortest_episode(wl)
    mean = log.col("response_length/mean")
    under = np.flatnonzero(mean * (1 + 1e-6) < least)  # a CSV's rounding, not more
    if len(under):
        i = int(under[0])
        raise LogError(
            f"{log.path}: column 'response_length/mean', step {log.steps[i]:g}: {mean[i]:g} tokens is "
            f"below the shortest episode of this agent spec ({least:,}: agent.turns = {a.turns} turns of "
            f"at least 1 token and {a.turns - 1} observations of agent.observation_tokens = "
            f"{a.observation_tokens:,}). calibrate reads an agent spec's response_length/mean as verl "
            "logs it, the whole episode (every turn's response and the observations between them); a "
            "log of the turns' responses alone, or of one turn, is not that: add (turns - 1) x "
            "observation_tokens to it, or give the spec of the run that was logged",
            "response_length/mean",
        )


def length_notes(log: TrainingLog, rs: RunSpec) -> list[str]:
    """What an agent spec's length fit reads and leaves (module docstring); none for one turn."""
    a = rs.plan.workload.agent
    if a is None or not log.has("response_length/mean"):
        return []
    notes = [
        f"response_length/mean: read as verl logs an agent episode ({a.turns} turns' responses and "
        f"{a.turns - 1} observations of {a.observation_tokens:,} tokens); a turn's mean is "
        f"(mean - {(a.turns - 1) * a.observation_tokens:,}) / {a.turns}, fitted at the per-turn cap "
        "(workload.max_response_tokens)"
    ]
    unread = [c for c in ("response_length/clip_ratio", "response_length/max") if log.has(c)]
    if unread:
        notes.append(
            f"{' and '.join(unread)}: not read for an agent spec (verl's are the episode's, not a "
            "turn's: the share filling the response window, the longest episode)"
        )
    return notes


def tool_note(rs: RunSpec, overhead_fitted: bool) -> str | None:
    """What an agent spec's calibration assumes of its tool calls (module docstring), where the
    decode overhead was fitted (``overhead_fitted``) or not; None for one turn."""
    a = rs.plan.workload.agent
    if a is None:
        return None
    where = (
        "any error in it lands in iteration_overhead_s, the per-iteration decode overhead fitted to the "
        "logged time: the logged design is still reproduced, but a prediction for another design pays "
        "the latency's error per decode iteration rather than per tool call"
        if overhead_fitted
        else "any error in it shows in the held-out gen and step"
    )
    return (
        "agent.tool_latency_s: not fitted (verl logs no tool call's time): the spec's "
        f"{a.tool_latency_s:g} s median (tool_latency_sigma {a.tool_latency_sigma:g}) is taken as "
        f"the logged run's, and {where} "
        "(docs/calibrate.md)"
    )
