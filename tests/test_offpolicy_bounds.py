"""Bounds of ``RLConfig`` and ``CosimConfig`` that a user walkthrough found missing, and the
behaviour policy's warm-up that ``docs/offpolicy.md`` now states.

* ``RLConfig(max_turns=5)`` was taken, and training failed mid-run inside the model with
  ``FieldError ids: length 108 exceeds max_len=96``. Now the training loops, ``evaluate`` and the
  co-simulation refuse it before any sampling, naming ``max_turns`` (``rl.check_context``).
* ``RLConfig(episodes_per_step=8e8)`` died in ``std::bad_alloc`` and ``1e12`` in torch's
  allocator: now at most ``MAX_EPISODES_PER_STEP`` (65,536), refused at construction.
* ``CosimConfig(eval_every_steps=0)`` gave NaN pass rates without a word: 0 is documented as "no
  evaluation" (the timing runs of ``scenarios.cosim_perf`` use it), so it stays; what it gives is
  now documented and checked here, and every value below 0 is refused naming the field.
* With lag k, step s samples with version max(0, s - k): steps 0 to k sample the starting weights.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable

import pytest
import torch

from offpolicy.checks import FieldError
from offpolicy.gym import build_tokenizer, make_tasks, max_episode_len
from offpolicy.model import ModelConfig, TinyAgent
from offpolicy.rl import MAX_EPISODES_PER_STEP, RLConfig, check_context, evaluate, train_rl
from offpolicy.update import train_offpolicy
from scenarios.cosim import CosimConfig, run_cosim

TOK = build_tokenizer()
TASKS = make_tasks("train", "defect")
SMALL = RLConfig(episodes_per_step=8, group_size=4, minibatches=1)
torch.set_num_threads(1)


def _agent(max_len: int = 96, seed: int = 0) -> TinyAgent:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyAgent(ModelConfig(vocab_size=len(TOK), max_len=max_len))


# -- episodes_per_step ------------------------------------------------------------------------------
CONFIGS: list[tuple[str, Callable[[], object], str]] = [  # (id, construction, field named)
    ("episodes-1e12", lambda: RLConfig(episodes_per_step=10**12), "episodes_per_step"),
    ("episodes-8e8", lambda: RLConfig(episodes_per_step=8 * 10**8), "episodes_per_step"),
    ("episodes-past-max", lambda: RLConfig(episodes_per_step=MAX_EPISODES_PER_STEP + 8), "episodes_per_step"),
    ("episodes-float", lambda: RLConfig(episodes_per_step=6.4e1), "episodes_per_step"),  # type: ignore[arg-type]
    ("max-turns-0", lambda: RLConfig(max_turns=0), "max_turns"),
    ("eval-every-negative", lambda: CosimConfig(eval_every_steps=-1), "eval_every_steps"),
    ("eval-every-bool", lambda: CosimConfig(eval_every_steps=True), "eval_every_steps"),
    ("eval-every-float", lambda: CosimConfig(eval_every_steps=1.0), "eval_every_steps"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("make", "field"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_out_of_range_configs_are_refused_naming_the_field(make: Callable[[], object], field: str) -> None:
    with pytest.raises(FieldError) as info:
        make()
    assert info.value.field == field, str(info.value)


def test_the_largest_episodes_per_step_is_taken() -> None:
    assert RLConfig(episodes_per_step=MAX_EPISODES_PER_STEP).episodes_per_step == 2**16
    assert MAX_EPISODES_PER_STEP % RLConfig().group_size == 0  # the default groups can reach it


# -- max_turns against the model's context ----------------------------------------------------------
def _entry_points(cfg: RLConfig) -> list[tuple[str, Callable[[TinyAgent], object]]]:
    held = make_tasks("heldout", "defect")
    # without evaluation, so that the co-simulation's own check is the one that refuses
    cosim = CosimConfig(gym="defect", steps=1, n_slots=8, batch_size=8, eval_every_steps=0, rl=cfg)
    return [
        ("train_rl", lambda m: train_rl(m, TASKS, TOK, cfg, steps=2)),
        ("train_offpolicy", lambda m: train_offpolicy(m, TASKS, TOK, cfg, steps=2, lag=1)),
        ("evaluate", lambda m: evaluate(m, held, TOK, 1, torch.Generator().manual_seed(0), cfg)),
        ("cosim", lambda m: run_cosim(cosim, m)),
    ]


@pytest.mark.parametrize("which", ["train_rl", "train_offpolicy", "evaluate", "cosim"])
def test_max_turns_past_the_model_context_is_refused_before_any_sampling(which: str) -> None:
    """max_turns 4 can reach 114 tokens, past the RL base's max_len 96: refused naming max_turns,
    with the model's weights untouched (before, max_turns 5 failed mid-run inside the model)."""
    cfg = dataclasses.replace(SMALL, max_turns=4)
    assert max_episode_len(4) > 96 >= max_episode_len(3)
    model = _agent()
    before = copy.deepcopy(model.state_dict())
    call = dict(_entry_points(cfg))[which]
    with pytest.raises(FieldError) as info:
        call(model)
    assert info.value.field == "max_turns", str(info.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_context_that_holds_the_longest_episode_trains() -> None:
    """The bound is exact: a model whose max_len is max_episode_len(4) trains at max_turns 4."""
    cfg = dataclasses.replace(SMALL, max_turns=4)
    assert len(train_rl(_agent(max_len=max_episode_len(4)), TASKS, TOK, cfg, steps=1)) == 1


@pytest.mark.parametrize("max_len", [8, 9, 43, 44, 96, 150, 1_000])
def test_check_context_refuses_exactly_the_turns_that_do_not_fit(max_len: int) -> None:
    model = _agent(max_len=max_len)
    for turns in range(1, 12):
        fits = max_episode_len(turns) <= max_len
        if fits:
            check_context(model, RLConfig(max_turns=turns))
        else:
            with pytest.raises(FieldError) as info:
                check_context(model, RLConfig(max_turns=turns))
            assert info.value.field == "max_turns"


def test_a_model_without_a_declared_context_is_not_checked() -> None:
    """A user's own module (no ``cfg.max_len``) is left to its own checks."""

    class Plain(torch.nn.Module):
        pass

    check_context(Plain(), RLConfig(max_turns=10**6))


# -- eval_every_steps=0: no evaluation, as documented ------------------------------------------------
def test_cosim_without_evaluation_has_no_pass_rate() -> None:
    """0 disables evaluation (the timing runs use it): no evals, so the pass rate and the time to
    target are NaN, not a number that was never measured."""
    cfg = CosimConfig(gym="defect", steps=1, n_slots=8, batch_size=8, eval_every_steps=0, rl=SMALL)
    result = run_cosim(cfg, _agent())
    summary = result.summary()
    assert result.evals == [] and len(result.steps) == 1
    assert math.isnan(summary["final_pass_rate"]) and math.isnan(summary["time_to_target_h"])
    assert not math.isnan(summary["train_reward"])


# -- the behaviour policy's warm-up (docs/offpolicy.md, "How stale the behaviour policy is") --------
def _digest(state: dict[str, torch.Tensor]) -> str:
    return hashlib.sha1(b"".join(v.numpy().tobytes() for v in state.values())).hexdigest()


@pytest.mark.parametrize("lag", [0, 1, 3])
def test_step_s_samples_version_max_0_s_minus_lag(lag: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler at step s holds the weights after max(0, s - lag) updates, and the recorded
    staleness is min(s, lag): steps 0 to lag sample the starting weights. (The update is replaced
    by one that always moves the weights: a real one may leave them as they were, when every
    advantage of a step is 0, and two versions would look alike.)"""
    import offpolicy.update as update

    versions: dict[str, int] = {}
    take = update.take_snapshot

    def recording(model: torch.nn.Module, version: int) -> update.Snapshot:
        snap = take(model, version)
        versions.setdefault(_digest(snap.state), version)
        return snap

    def one_update(model: torch.nn.Module, *_: object, **__: object) -> dict[str, float]:
        with torch.no_grad():  # every update changes the weights, so every version is told apart
            next(model.parameters()).add_(1.0)
        return {}

    monkeypatch.setattr(update, "take_snapshot", recording)
    monkeypatch.setattr(update, "offpolicy_update", one_update)
    sampled: list[str] = []

    def sampler(behaviour: torch.nn.Module) -> torch.nn.Module:
        sampled.append(_digest(behaviour.state_dict()))
        return behaviour

    steps = 5
    history = train_offpolicy(_agent(), TASKS, TOK, SMALL, steps=steps, lag=lag, sampler=sampler)
    assert [versions[d] for d in sampled] == [max(0, s - lag) for s in range(steps)]
    assert [h["staleness"] for h in history] == [min(s, lag) for s in range(steps)]
