"""Batched multi-turn sampling with recorded behaviour log-probs, and collation to a batch.

Design
------
Episodes are plain data (:class:`Episode`): token ids, a per-token action mask, the sampler's
log-probability of every sampled token (``sample_logp``, the behaviour policy mu), the weight
version that produced each token, and the bookkeeping a pipeline simulator needs (turns,
reads, tokens per turn, done/invalid). Nothing in an episode refers to a model, so episodes can
be created under one snapshot, paused, continued under a newer one and mixed into any batch.

:func:`continue_episodes` advances a list of unfinished episodes together. Each decode step is
**one forward over the whole batch**: the episodes' tokens are right-padded into a buffer
[B, T]; causal attention makes the logits at each row's last real position independent of
the padding, so one forward gives every active row its next-token distribution. Sampled tokens
are written in place; when a row closes an action the environment answers and its observation
is appended. Random draws come only from the ``generator`` passed in, in a fixed order (one
``multinomial`` per decode step over the active rows), so the same seed gives the same
episodes. There is no KV cache: TinyAgent's contexts are < 100 tokens, and recomputing keeps
the code obviously correct.

:func:`sample_episodes` starts fresh episodes (``group_size`` per task) and runs them to the
end; :func:`collate` turns any list of episodes into padded training tensors where index t of
``action_mask`` / ``sample_logp`` refers to the prediction of token t + 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from offpolicy.checks import FieldError, refuse
from offpolicy.gym import MAX_ACTION_TOKENS, Task, Tokenizer, env_step, prompt_ids


class Diverged(ArithmeticError):
    """Training produced numbers that are not finite (logits, a loss, a gradient norm): the weights
    no longer describe a policy, and sampling from them would fail inside torch. ``where`` says what
    was found; the training loops set ``step`` (the 0-based step it happened in) and ``history``
    (the records of the steps before it), so a caller can keep the run as a diverged one."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.step: int | None = None
        self.history: list[dict[str, Any]] = []


@dataclass
class Episode:
    """One (possibly unfinished) episode as plain data.

    Attributes:
        task: the task being solved.
        tokens: all token ids so far (prompt, actions, observations).
        action_mask: 1 for tokens the agent sampled, 0 for prompt/observation tokens; same length.
        sample_logp: behaviour log-prob of each sampled token (0.0 elsewhere); same length.
        versions: weight version that sampled each token (-1 for environment tokens).
        reward: final reward (0.0 until done).
        done: whether the episode has ended.
        invalid: whether it ended on an invalid action.
        n_turns: complete actions taken.
        n_reads: ``read`` actions taken.
        turn_tokens: number of sampled tokens of each complete action.
        pending: tokens of the action currently being generated (not yet closed).
    """

    task: Task
    tokens: list[int]
    action_mask: list[int]
    sample_logp: list[float]
    versions: list[int]
    reward: float = 0.0
    done: bool = False
    invalid: bool = False
    n_turns: int = 0
    n_reads: int = 0
    turn_tokens: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)


def new_episode(task: Task, tok: Tokenizer) -> Episode:
    """A fresh episode holding only the prompt."""
    ids = prompt_ids(task, tok)
    return Episode(task, list(ids), [0] * len(ids), [0.0] * len(ids), [-1] * len(ids))


def close_action(ep: Episode, tok: Tokenizer, max_turns: int) -> None:
    """Hand the pending action to the environment and update the episode.

    Public so that code which replays or cuts episodes (co-simulation) closes actions exactly as
    the sampler does.
    """
    result = env_step(ep.task, tok, ep.pending, ep.n_turns, max_turns)
    ep.turn_tokens.append(len(ep.pending))
    ep.pending = []
    ep.n_turns += 1
    ep.n_reads += result.kind == "read"
    ep.invalid = result.kind == "invalid"
    ep.done, ep.reward = result.done, result.reward
    n = len(result.observation)
    ep.tokens += result.observation
    ep.action_mask += [0] * n
    ep.sample_logp += [0.0] * n
    ep.versions += [-1] * n


@torch.no_grad()
def continue_episodes(
    model: torch.nn.Module,
    episodes: Sequence[Episode],
    tok: Tokenizer,
    generator: torch.Generator,
    temperature: float = 1.0,
    max_turns: int = 3,
    version: int = 0,
    max_new_actions: int | None = None,
    bucket: bool = False,
) -> list[Episode]:
    """Advance unfinished ``episodes`` in place with ``model``; returns the same list.

    Each row stops when its episode ends or, if ``max_new_actions`` is set, after that many
    newly closed actions (a pipeline can then pause it and continue under newer weights).
    Tokens sampled here are tagged with ``version``.

    ``bucket=True`` runs each decode step's forward per group of similar lengths (see
    :func:`length_buckets`) instead of padding every row to the longest: the same logits up to
    floating-point rounding (causal attention never sees the padding), the same single
    ``multinomial`` over all active rows in the same order, and far less padding when the rows'
    lengths differ a lot (episodes cut mid-way by a weight sync).
    """
    if temperature <= 0:
        raise refuse("temperature", f"must be > 0, got {temperature}")
    eps = list(episodes)
    active = [i for i, ep in enumerate(eps) if not ep.done]
    closed = dict.fromkeys(active, 0)
    if not active:
        return eps
    was_training = model.training
    model.eval()
    try:
        while active:
            lens = torch.tensor([len(eps[i].tokens) for i in active])  # [A]
            groups = length_buckets(lens.tolist()) if bucket else [list(range(len(active)))]
            logits = torch.empty(0)
            for rows in groups:
                sub = lens[rows]  # [a]
                buf = torch.full((len(rows), int(sub.max())), tok.pad_id, dtype=torch.long)  # [a, T]
                for r, row in enumerate(rows):
                    buf[r, : sub[r]] = torch.tensor(eps[active[row]].tokens)
                part = model(buf)[torch.arange(len(rows)), sub - 1].float()  # [a, V]
                if not bucket:  # one group, rows in order: exactly the unbucketed computation
                    logits = part
                else:
                    if logits.numel() == 0:
                        logits = torch.empty(len(active), part.shape[1])
                    logits[rows] = part  # back to the active rows' order
            logits = logits / temperature  # [A, V]
            if not bool(torch.isfinite(logits).all()):  # multinomial would fail on NaN or inf
                raise Diverged("the policy's logits are not finite: training diverged", "logits")
            logp = torch.log_softmax(logits, dim=-1)  # [A, V]
            picked = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # [A]
            picked_logp = logp.gather(1, picked[:, None]).squeeze(1)  # [A]
            still: list[int] = []
            for row, i in enumerate(active):
                ep, token = eps[i], int(picked[row])
                ep.tokens.append(token)
                ep.action_mask.append(1)
                ep.sample_logp.append(float(picked_logp[row]))
                ep.versions.append(version)
                ep.pending.append(token)
                if token == tok.eoa_id or len(ep.pending) >= MAX_ACTION_TOKENS:
                    close_action(ep, tok, max_turns)
                    closed[i] += 1
                if not ep.done and (max_new_actions is None or closed[i] < max_new_actions):
                    still.append(i)
            active = still
    finally:
        model.train(was_training)
    return eps


def length_buckets(lens: Sequence[int], ratio: float = 1.5) -> list[list[int]]:
    """Row indices grouped by length: sorted by length, a new group starts where a row is more
    than ``ratio`` times the group's shortest (so padding inside a group stays below that)."""
    order = sorted(range(len(lens)), key=lambda i: lens[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and lens[i] <= ratio * lens[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def sample_episodes(
    model: torch.nn.Module,
    tasks: Sequence[Task],
    tok: Tokenizer,
    generator: torch.Generator,
    group_size: int = 1,
    temperature: float = 1.0,
    max_turns: int = 3,
    version: int = 0,
) -> list[Episode]:
    """Run ``group_size`` complete episodes per task (grouped consecutively) with ``model``."""
    eps = [new_episode(task, tok) for task in tasks for _ in range(group_size)]
    return continue_episodes(model, eps, tok, generator, temperature, max_turns, version)


def pick_tasks(tasks: Sequence[Task], n: int, generator: torch.Generator) -> list[Task]:
    """``n`` tasks drawn without replacement (with replacement if n > len(tasks)) from ``generator``."""
    if not tasks:
        raise FieldError("tasks: need at least one task to draw from", "tasks")
    if n <= len(tasks):
        idx = torch.randperm(len(tasks), generator=generator)[:n]
    else:
        idx = torch.randint(len(tasks), (n,), generator=generator)
    return [tasks[int(i)] for i in idx]


def collate(episodes: Sequence[Episode], pad_id: int) -> dict[str, torch.Tensor]:
    """Episodes -> padded batch: ``ids`` [B, T]; shifted ``action_mask``, ``sample_logp``,
    ``versions`` [B, T-1] (index t = prediction of token t+1); ``rewards``, ``reads``,
    ``invalid`` [B]."""
    if not episodes:
        raise FieldError("episodes: cannot collate an empty list", "episodes")
    B, T = len(episodes), max(len(ep.tokens) for ep in episodes)
    ids = torch.full((B, T), pad_id, dtype=torch.long)  # [B, T]
    mask = torch.zeros(B, T)  # [B, T]
    logp = torch.zeros(B, T)  # [B, T]
    versions = torch.full((B, T), -1, dtype=torch.long)  # [B, T]
    for b, ep in enumerate(episodes):
        n = len(ep.tokens)
        ids[b, :n] = torch.tensor(ep.tokens)
        mask[b, :n] = torch.tensor(ep.action_mask, dtype=torch.float32)
        logp[b, :n] = torch.tensor(ep.sample_logp, dtype=torch.float32)
        versions[b, :n] = torch.tensor(ep.versions)
    return {
        "ids": ids,
        "action_mask": mask[:, 1:],  # [B, T-1]
        "sample_logp": logp[:, 1:],  # [B, T-1]
        "versions": versions[:, 1:],  # [B, T-1]
        "rewards": torch.tensor([ep.reward for ep in episodes]),  # [B]
        "reads": torch.tensor([float(ep.n_reads) for ep in episodes]),  # [B]
        "invalid": torch.tensor([float(ep.invalid) for ep in episodes]),  # [B]
    }


def behavior_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """Reward, reads, invalid share and mean length of a list of finished episodes."""
    n = max(len(episodes), 1)
    return {
        "reward": sum(ep.reward for ep in episodes) / n,
        "reads": sum(ep.n_reads for ep in episodes) / n,
        "invalid": sum(ep.invalid for ep in episodes) / n,
        "length": sum(len(ep.tokens) for ep in episodes) / n,
    }
