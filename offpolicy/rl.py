"""On-policy RL for TinyAgent: config, advantages, the PPO update, ``train_rl`` and ``evaluate``.

Design
------
One step of :func:`train_rl` draws ``episodes_per_step / group_size`` training tasks, samples
``group_size`` episodes of each with the current weights (recording ``sample_logp``), computes
group-baseline advantages, and runs :func:`rl_update`: the trainer recomputes pi_old with one
no-grad forward, then takes one PPO-clipped gradient step per minibatch over a random
permutation of the episodes.

All randomness flows through one ``torch.Generator`` seeded from ``RLConfig.seed``, in a fixed
order per step (task draw, sampling, minibatch permutation). ``train_offpolicy`` consumes the
same stream in the same order, which is what makes the lag-0 identity test exact.

Monitoring the current policy: training reward is measured on episodes of the *behaviour*
policy, which off-policy is ``lag`` updates old, so it can look healthy while the current
weights have already collapsed. With ``eval_every=k`` (and ``eval_tasks``), every k-th step's
record also carries ``eval_pass_rate``, ``eval_invalid`` and ``eval_reads`` of the weights
right after that step's update, measured by :func:`evaluate` on ``eval_tasks`` with a
generator of its own (seeded ``eval_seed`` afresh at each evaluation, so every evaluation of a
run uses the same draws). It never touches the training generator, the optimizer or the
weights, so a run with evaluation is step for step the run without it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from offpolicy.checks import FieldError, check_int, check_lr, check_real, check_seed, refuse, shown
from offpolicy.functional import group_advantages, ppo_policy_loss, selected_log_probs
from offpolicy.gym import Task, Tokenizer, max_episode_len
from offpolicy.rollout import Diverged, Episode, behavior_stats, collate, pick_tasks, sample_episodes

#: The most episodes one step samples. A step holds all of them at once (one batched sampling, a
#: collated [B, T] batch, one no-grad forward for pi_old over the whole batch). Measured peak RSS
#: of one step of ``train_rl`` at the default ``max_turns``: 0.7 GB at 1,024 episodes, 1.4 GB at
#: 4,096, 3.5 GB at 16,384 and 6.0 GB at 32,768 (about 0.16 MB more per episode; one thread, about
#: 7 ms per episode), so 65,536 needs about 11 GB and 8 minutes a step on one core: a CPU run holds
#: it. 8e8 died in ``std::bad_alloc``, and 1e12 in torch's allocator.
MAX_EPISODES_PER_STEP = 2**16


@dataclass(frozen=True)
class RLConfig:
    """Hyper-parameters of RL on TinyAgent.

    Attributes:
        episodes_per_step: episodes sampled per training step (a multiple of group_size), at
            most ``MAX_EPISODES_PER_STEP`` (65,536: a step holds them all in memory).
        group_size: episodes per task in a step (>= 2); they share the group baseline, so a
            group of one would have no advantage to learn from.
        lr: Adam learning rate. 3e-4 since the issue gym's lr sweep (``docs/offpolicy.md``:
            on-policy held-out 0.94 at 3e-4 against 0.53 at the earlier default 1e-3, 10 seeds).
            At most ``checks.LR_MAX`` (1e6, below Adam's float32 overflow); an lr at which the
            numbers stop being finite raises :class:`~offpolicy.rollout.Diverged` in training.
        temperature: sampling temperature; the trainer divides logits by the same value.
        minibatches: gradient steps per training step (one epoch over the batch).
        clip_low: PPO clip, lower side: ratio >= 1 - clip_low.
        clip_high: PPO clip, upper side: ratio <= 1 + clip_high ("clip-higher").
        max_grad_norm: gradient-norm clip per minibatch step.
        max_turns: actions per episode before truncation. An episode of ``max_turns`` actions
            can reach ``gym.max_episode_len(max_turns)`` tokens, which must fit the model's
            ``max_len`` (96 for the RL bases: max_turns <= 3); the training loops and
            :func:`evaluate` check it against the model they are given (:func:`check_context`).
        normalize_std: divide advantages by the group's reward std (off by default).
        seed: seed of the generator that drives task draws, sampling and minibatch order.
    """

    episodes_per_step: int = 64
    group_size: int = 8
    lr: float = 3e-4
    temperature: float = 1.0
    minibatches: int = 4
    clip_low: float = 0.2
    clip_high: float = 0.28
    max_grad_norm: float = 1.0
    max_turns: int = 3
    normalize_std: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("episodes_per_step", self.episodes_per_step, 1, MAX_EPISODES_PER_STEP)
        for name in ("minibatches", "max_turns"):
            check_int(name, getattr(self, name), 1)
        # a group is its own baseline: one episode's advantage is 0 and trains nothing
        check_int("group_size", self.group_size, 2)
        check_seed("seed", self.seed)
        check_lr("lr", self.lr)
        check_real("temperature", self.temperature, 0, open_low=True)
        check_real("clip_low", self.clip_low, 0, 1)
        check_real("clip_high", self.clip_high, 0)
        check_real("max_grad_norm", self.max_grad_norm, 0, open_low=True)
        if not isinstance(self.normalize_std, bool):
            raise refuse("normalize_std", f"must be a bool, got {shown(self.normalize_std)}")
        if self.episodes_per_step % self.group_size != 0:
            raise FieldError(
                f"episodes_per_step={self.episodes_per_step} must be a positive multiple of "
                f"group_size={self.group_size}",
                "episodes_per_step",
            )
        if self.minibatches > self.episodes_per_step:
            raise refuse("minibatches", f"must be in [1, episodes_per_step], got {self.minibatches}")


def check_context(model: torch.nn.Module, cfg: RLConfig) -> None:
    """FieldError naming ``max_turns`` when an episode of ``cfg.max_turns`` actions can outgrow the
    model's context (``model.cfg.max_len``): sampling would fail part-way through training with
    "ids: length 108 exceeds max_len=96". A model without ``cfg.max_len`` is not checked."""
    max_len = getattr(getattr(model, "cfg", None), "max_len", None)
    need = max_episode_len(cfg.max_turns)
    if not isinstance(max_len, int) or need <= max_len:
        return
    lo, hi = 0, cfg.max_turns  # the most turns that fit: max_episode_len grows with the turns
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if max_episode_len(mid) <= max_len else (lo, mid)
    fix = f"use max_turns <= {lo}, or" if lo else "use"
    raise FieldError(
        f"max_turns={cfg.max_turns}: gym.max_episode_len({cfg.max_turns})={need} tokens exceeds the "
        f"model's max_len {max_len}; {fix} a model with max_len >= {need}",
        "max_turns",
    )


def compute_advantages(batch: dict[str, torch.Tensor], cfg: RLConfig) -> torch.Tensor:
    """Per-episode group-baseline advantages of a collated batch: -> [B]."""
    return group_advantages(batch["rewards"], cfg.group_size, cfg.normalize_std)


def policy_log_probs(model: torch.nn.Module, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """Trainer log-probs of each next token at ``temperature``: ids [B, T] -> [B, T-1]."""
    return selected_log_probs(model(ids)[:, :-1] / temperature, ids[:, 1:])


def minibatch_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    ids: torch.Tensor,
    old_logp: torch.Tensor,
    token_adv: torch.Tensor,
    mask: torch.Tensor,
    cfg: RLConfig,
) -> dict[str, float]:
    """One PPO gradient step on a minibatch: ids [b, T]; old_logp, token_adv, mask [b, T-1]."""
    logp = policy_log_probs(model, ids, cfg.temperature)  # [b, T-1]
    loss, stats = ppo_policy_loss(logp, old_logp, token_adv, mask, cfg.clip_low, cfg.clip_high)
    if not bool(torch.isfinite(loss)):  # its gradients would turn every weight into NaN
        raise Diverged("the policy loss is not finite: training diverged", "loss")
    optimizer.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    if not bool(torch.isfinite(grad_norm)):  # clipping would scale the gradients by NaN
        raise Diverged("the gradient norm is not finite: training diverged", "gradient")
    optimizer.step()
    return dict(stats, loss=loss.item(), grad_norm=float(grad_norm))


def mean_stats(logs: Sequence[dict[str, float]]) -> dict[str, float]:
    """Key-wise mean of a list of stat dicts."""
    return {k: sum(s[k] for s in logs) / len(logs) for k in logs[0]}


def rl_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    advantages: torch.Tensor,
    cfg: RLConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """On-policy PPO update: recompute pi_old, one epoch of clipped minibatch steps -> mean stats."""
    ids, mask = batch["ids"], batch["action_mask"]  # [B, T], [B, T-1]
    with torch.no_grad():
        old_logp = policy_log_probs(model, ids, cfg.temperature)  # [B, T-1]
    token_adv = advantages[:, None].expand_as(mask)  # [B, T-1]
    logs = [
        minibatch_step(model, optimizer, ids[rows], old_logp[rows], token_adv[rows], mask[rows], cfg)
        for rows in torch.randperm(len(ids), generator=generator).chunk(cfg.minibatches)
    ]
    return mean_stats(logs)


def sample_step(
    model: torch.nn.Module, tasks: Sequence[Task], tok: Tokenizer, cfg: RLConfig, generator: torch.Generator
) -> list[Episode]:
    """One step's episodes: draw tasks, then ``group_size`` episodes of each (grouped)."""
    chosen = pick_tasks(tasks, cfg.episodes_per_step // cfg.group_size, generator)
    return sample_episodes(model, chosen, tok, generator, cfg.group_size, cfg.temperature, cfg.max_turns)


@dataclass(frozen=True)
class EvalSpec:
    """What the training loops evaluate of the current policy, and how often.

    Attributes:
        tasks: the tasks to evaluate on (normally the held-out split).
        every: evaluate after every ``every``-th update (0: never).
        episodes_per_task: episodes sampled per task at each evaluation.
        seed: seed of the evaluation's own generator (fresh at each evaluation).
    """

    tasks: Sequence[Task]
    every: int = 5
    episodes_per_task: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        # each refusal names the dataclass field (``field``) and, in the message, what the
        # training scripts call it (``run_one(eval_every=...)``, ``--eval-every``)
        with _also_named("eval_every"):
            check_int("every", self.every, 0)
        if self.every and not self.tasks:
            raise FieldError("tasks (eval_tasks): need at least one task to evaluate on", "tasks")
        with _also_named("eval_episodes"):
            check_int("episodes_per_task", self.episodes_per_task, 1)
        with _also_named("eval_seed"):
            check_seed("seed", self.seed)


@contextmanager
def _also_named(alias: str) -> Iterator[None]:
    """A FieldError raised in the block keeps its ``field`` and says ``alias`` beside it in the
    message (``every (eval_every) must be an integer >= 0, got -1``)."""
    try:
        yield
    except FieldError as exc:
        head, _, rest = str(exc).partition(" ")
        raise FieldError(f"{head} ({alias}) {rest}", exc.field, exc.file) from None


def eval_record(
    model: torch.nn.Module, step: int, spec: EvalSpec | None, tok: Tokenizer, cfg: RLConfig
) -> dict[str, float]:
    """``eval_*`` stats of the current weights after update ``step`` (0-based), or {} when not due."""
    if spec is None or spec.every == 0 or (step + 1) % spec.every != 0:
        return {}
    held = evaluate(
        model, spec.tasks, tok, spec.episodes_per_task, torch.Generator().manual_seed(spec.seed), cfg
    )
    return {"eval_pass_rate": held["pass_rate"], "eval_invalid": held["invalid"], "eval_reads": held["reads"]}


def train_rl(
    model: torch.nn.Module,
    tasks: Sequence[Task],
    tok: Tokenizer,
    cfg: RLConfig,
    steps: int,
    eval_spec: EvalSpec | None = None,
) -> list[dict[str, Any]]:
    """On-policy RL for ``steps`` steps, updating ``model`` in place -> one stats dict per step.

    With ``eval_spec``, every ``eval_spec.every``-th record also has the current policy's
    ``eval_pass_rate`` / ``eval_invalid`` / ``eval_reads`` (see the module docstring).
    """
    check_int("steps", steps, 1)
    check_context(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    history: list[dict[str, Any]] = []
    for step in range(steps):
        with diverged_at(step, history):
            episodes = sample_step(model, tasks, tok, cfg, gen)
            batch = collate(episodes, tok.pad_id)
            record: dict[str, Any] = dict(step=step, **behavior_stats(episodes))
            record.update(rl_update(model, optimizer, batch, compute_advantages(batch, cfg), cfg, gen))
            record.update(eval_record(model, step, eval_spec, tok, cfg))
        history.append(record)
    return history


@contextmanager
def diverged_at(step: int, history: list[dict[str, Any]]) -> Iterator[None]:
    """A :class:`~offpolicy.rollout.Diverged` raised in the block leaves with ``step`` and the
    ``history`` of the steps before it, so the caller keeps what the run did."""
    try:
        yield
    except Diverged as exc:
        exc.step, exc.history = step, history
        raise


def evaluate(
    model: torch.nn.Module,
    tasks: Sequence[Task],
    tok: Tokenizer,
    episodes_per_task: int,
    generator: torch.Generator,
    cfg: RLConfig | None = None,
) -> dict[str, float]:
    """Sample ``episodes_per_task`` episodes per task -> pass rate, reads per episode, invalid share."""
    cfg = cfg or RLConfig()
    if not tasks:  # a pass rate of no episodes is not 0.0
        raise FieldError("tasks: need at least one task to evaluate on", "tasks")
    check_int("episodes_per_task", episodes_per_task, 1)
    check_context(model, cfg)
    eps = sample_episodes(model, tasks, tok, generator, episodes_per_task, cfg.temperature, cfg.max_turns)
    stats = behavior_stats(eps)
    return {"pass_rate": stats["reward"], "reads": stats["reads"], "invalid": stats["invalid"]}
