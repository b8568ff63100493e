"""What a real TinyAgent episode costs in simulated time, and how it is cut at a weight sync.

Duration model
--------------
TinyAgent's actions are two or three tokens (``read <eoa>``, ``fix <n> <eoa>``), far shorter than a
coding agent's turns, so each sampled token stands for ``tokens_scale`` decoded tokens of a real
agent. Per turn, the charge is the chapter's (:class:`pipesim.workload.durations.AgentDurations`): decode
seconds ``tokens * tokens_scale / decode_rate_tok_s``, then, if the action is a tool call
(``read`` returns the file, ``fix`` runs the tests; an invalid action is rejected at once and
costs no tool time), a log-normal tool latency ``tool_median_s * exp(tool_sigma * z)``.

The tool latencies are drawn when the episode is pre-sampled, one per turn index, from the run's
duration generator. They belong to the environment, not the policy: an episode continued under
newer weights keeps the latency of every turn index, so only what the agent *does* changes its
time. An agent that reads more takes longer, so the length bias of asynchronous designs acts on
real behaviour.

Timeline and cuts
-----------------
Tokens decode one after another, and each closed tool action is followed by its latency.
:func:`token_end_times` gives the generation second at which each sampled token is complete.
At a sync that interrupts an episode after ``g`` generated seconds, the tokens complete by ``g``
stay (version v); :func:`truncate` rebuilds the episode as it stood after them by replaying them
through the environment, and the pipeline continues every cut episode in one batched call under
the new weights. The next token's slot in the timeline is unchanged (the same prefix gives the
same start), so the continued episode's total duration is always more than ``g``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from offpolicy.functional import group_advantages
from offpolicy.gym import MAX_ACTION_TOKENS, Tokenizer, parse_action
from offpolicy.rollout import Episode, close_action, new_episode
from pipesim.core.errors import check_number
from pipesim.core.validate import refuse

TOOL_KINDS = ("read", "fix")


@dataclass(frozen=True)
class CosimDurations:
    """Seconds of a real episode: decode per token plus a log-normal tool latency per tool call.

    The defaults make a read-then-fix episode about 50 s of decode plus two tool calls of median
    4 s (the chapter's coding agent averages about 96 s over 8 turns; TinyAgent takes 2 or 3).
    """

    tokens_scale: float = 400.0
    """Decoded tokens of a real agent that one TinyAgent token stands for."""
    decode_rate_tok_s: float = 40.0
    """Per-sequence decode rate (the chapter's 40 tokens/s)."""
    tool_median_s: float = 4.0
    """Median tool latency per tool call."""
    tool_sigma: float = 1.0
    """Log-space spread of the tool latency (the chapter's 1.0)."""

    def __post_init__(self) -> None:
        for name in ("tokens_scale", "decode_rate_tok_s", "tool_median_s"):
            check_number(name, getattr(self, name), 0, strict=True)
        check_number("tool_sigma", self.tool_sigma, 0)

    @property
    def token_s(self) -> float:
        """Decode seconds of one TinyAgent token."""
        return self.tokens_scale / self.decode_rate_tok_s

    def tool_latencies(self, n: int, max_turns: int, generator: torch.Generator) -> torch.Tensor:
        """Tool seconds per turn index for ``n`` episodes -> [n, max_turns] (one randn draw)."""
        return self.tool_median_s * torch.exp(
            self.tool_sigma * torch.randn(n, max_turns, generator=generator)
        )


def sampled(ep: Episode) -> list[tuple[int, float, int]]:
    """The agent's tokens in order as (token, behaviour log-prob, version)."""
    return [
        (t, lp, v)
        for t, m, lp, v in zip(ep.tokens, ep.action_mask, ep.sample_logp, ep.versions, strict=True)
        if m
    ]


def actions(ep: Episode) -> list[list[int]]:
    """The closed actions' tokens, in order (the pending one excluded)."""
    toks = [t for t, _, _ in sampled(ep)]
    out, i = [], 0
    for n in ep.turn_tokens:
        out.append(toks[i : i + n])
        i += n
    return out


def token_end_times(
    ep: Episode, tools_s: Sequence[float], durations: CosimDurations, tok: Tokenizer
) -> list[float]:
    """Generation second at which each sampled token is complete (pending tokens included)."""
    out: list[float] = []
    t = 0.0
    for turn, action in enumerate(actions(ep)):
        for _ in action:
            t += durations.token_s
            out.append(t)
        if parse_action(action, tok)[0] in TOOL_KINDS:
            t += float(tools_s[turn])
    for _ in ep.pending:
        t += durations.token_s
        out.append(t)
    return out


def episode_seconds(
    ep: Episode, tools_s: Sequence[float], durations: CosimDurations, tok: Tokenizer
) -> float:
    """Total generation seconds of a finished episode: all its decode and tool time."""
    t = 0.0
    for turn, action in enumerate(actions(ep)):
        t += len(action) * durations.token_s
        if parse_action(action, tok)[0] in TOOL_KINDS:
            t += float(tools_s[turn])
    return t + len(ep.pending) * durations.token_s


def truncate(ep: Episode, n_tokens: int, tok: Tokenizer, max_turns: int) -> Episode:
    """A new episode holding only the first ``n_tokens`` sampled tokens of ``ep``, replayed.

    Replaying through :func:`offpolicy.rollout.close_action` with the sampler's closing rule (``<eoa>`` or
    ``MAX_ACTION_TOKENS``) rebuilds every field exactly as the sampler had it at that point, so
    ``truncate(ep, all)`` equals ``ep`` (a test checks this).
    """
    toks = sampled(ep)
    if not 0 <= n_tokens <= len(toks):
        raise refuse("n_tokens", f"must be in [0, {len(toks)}], got {n_tokens}")
    out = new_episode(ep.task, tok)
    for token, logp, version in toks[:n_tokens]:
        out.tokens.append(token)
        out.action_mask.append(1)
        out.sample_logp.append(logp)
        out.versions.append(version)
        out.pending.append(token)
        if token == tok.eoa_id or len(out.pending) >= MAX_ACTION_TOKENS:
            close_action(out, tok, max_turns)
    return out


def policy_versions(ep: Episode) -> set[int]:
    """The distinct weight versions that sampled the agent's tokens."""
    return {v for _, _, v in sampled(ep)}


def batch_advantages(
    rewards: torch.Tensor, groups: Sequence[tuple[int, int]], normalize_std: bool = False
) -> torch.Tensor:
    """Group-baseline advantages for a batch whose groups may be split across batches: [B] -> [B].

    ``groups[i]`` is episode i's group (pre-sample chunk, group index); a group is the
    ``group_size`` episodes of one task pre-sampled together. An asynchronous trainer takes
    episodes in finishing order, so a batch may hold only part of a group: the baseline is the
    mean reward of the members *in this batch* (the only causal choice: the others may not have
    finished). A lone member gets advantage 0. Episodes must be sorted by group; with whole groups
    this is exactly :func:`offpolicy.functional.group_advantages`.
    """
    if len(groups) != len(rewards):
        raise refuse("groups", f"must have one entry per reward, got {len(groups)} for {len(rewards)}")
    if list(groups) != sorted(groups):
        raise refuse("groups", "must be sorted (sort the batch by group first)")
    parts, start = [], 0
    for i in range(1, len(groups) + 1):
        if i == len(groups) or groups[i] != groups[start]:
            parts.append(group_advantages(rewards[start:i], i - start, normalize_std))
            start = i
    return torch.cat(parts) if parts else torch.zeros(0)
