"""The RL base: a supervised warm start on demonstrations that reads but mostly answers wrong.

Design
------
Demonstrations are ``read`` then ``fix <n>`` on ``BaseConfig.n_demo_tasks`` extra tasks drawn
by ``make_demo_tasks`` (never a gym task, so the held-out split stays unseen). They come from a
sloppy annotator: the line-number target is the mixture ``p_correct * onehot(bug) +
(1 - p_correct) * onehot(line above the bug)`` (the line below when the bug is on line 1), an
off-by-one habit. Cross-entropy is taken on the agent's tokens only.

Why this and not a plain undertrained model: both targets depend on where the defect is, so the
network builds the full lookup (find the defect, copy its line number) within a few hundred
steps, and then answers "one line too high" most of the time. The base reads, its pass rate is
about ``p_correct`` (0.2 by default, a blind guess's rate), and RL has a clear, learnable way
up: move mass from the off-by-one answer to the right one. A flat "uniform over lines" target
was tried first: it erased most of the lookup and RL climbed slowly and unreliably.

For the ``issue`` gym (``BaseConfig(gym="issue")``, see :data:`ISSUE_BASE`) the lookup "issue
variable -> the line assigning it" did not form on 4,000 demonstrations: with correct targets
and the answer loss alone, accuracy stayed near the decoys' 0.25 for 2,000 steps while the
training loss fell (memorised demonstrations). Two changes made it form: 30,000 demonstrations
(the generator makes as many as asked; each is seen about 3 times) and an auxiliary loss during
the warm start only (``aux_weight``). A linear probe, not part of TinyAgent and dropped
afterwards, reads the final residual at every token of each line from its left-hand-side
variable on and is trained (binary cross-entropy) to say whether that line is the bug. That
teaches the per-line comparison with the issue; the answer head then copies the marked line's
number, the circuit the defect gym already formed. With 30,000 demonstrations and correct
targets the probe run reached 0.97 held-out accuracy by step 750 (30,000 demonstrations without
the probe were not tried). The probe sees only demonstration tasks (the gym's generator,
another seed, never a gym task).

The base is deterministic for a given ``BaseConfig`` and tokenizer on one machine (training
differs in the last bits between CPUs). ``make_rl_base`` caches it on disk (atomic write, keyed
by a hash of config and vocabulary) and rebuilds when the cached file is missing, corrupt, or
from another architecture. The default gym's base ships with the package (``offpolicy/bases``,
660 KB, with its SHA-256): training it takes minutes on two cores, and every co-simulation and
experiment starts from it. A shipped file is used only when its checksum and its checkpoint's
configuration and vocabulary match; otherwise the base is trained as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from offpolicy.checks import check_int, check_lr, check_real, check_seed, refuse, shown
from offpolicy.gym import (
    BUG_RHS,
    DEFAULT_GYM,
    N_LINES,
    Tokenizer,
    check_gym,
    make_demo_tasks,
    observation_ids,
    prompt_ids,
)
from offpolicy.model import CheckpointError, ModelConfig, TinyAgent, load_checkpoint, save_checkpoint

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "offpolicy"
SHIPPED_DIR = Path(__file__).resolve().parent / "bases"
"""Bases shipped with the package: ``rl_base_<key>.pt`` beside ``rl_base_<key>.pt.sha256``."""


@dataclass(frozen=True)
class BaseConfig:
    """Supervised warm start.

    Attributes:
        n_demo_tasks: demonstration tasks (extra tasks, disjoint from the gym).
        steps: optimizer steps.
        p_correct: weight of the correct line in the answer's target (the rest goes to the
            off-by-one line).
        batch_size: demonstrations per step.
        lr: AdamW learning rate.
        seed: seed for weight init and batch order.
        gym: which gym's generator draws the demonstrations (``'defect'`` or ``'issue'``).
        aux_weight: weight of the auxiliary "is this line the bug" probe loss at each line's
            left-hand-side variable (0: no probe, and the random stream is the original one).
        wrong: where the annotator's wrong mass goes: ``'off-by-one'`` (the line above the
            bug) or ``'decoy'`` (spread evenly over the other lines that show the defect, an
            annotator who fixes a visible defect without reading the issue).
    """

    def __post_init__(self) -> None:
        for name in ("n_demo_tasks", "steps", "batch_size"):
            check_int(name, getattr(self, name), 1)
        check_seed("seed", self.seed)
        check_real("p_correct", self.p_correct, 0, 1)
        check_lr("lr", self.lr)
        check_real("aux_weight", self.aux_weight, 0)
        check_gym(self.gym)
        if self.wrong not in ("off-by-one", "decoy"):
            raise refuse("wrong", f"must be 'off-by-one' or 'decoy', got {shown(self.wrong)}")

    n_demo_tasks: int = 2000
    steps: int = 400
    p_correct: float = 0.2
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    gym: str = "defect"
    aux_weight: float = 0.0
    wrong: str = "off-by-one"


ISSUE_BASE = BaseConfig(n_demo_tasks=30000, steps=1500, batch_size=64, gym="issue", aux_weight=1.0)


DEFECT_BASE = BaseConfig()  # the defect gym's off-by-one base (BaseConfig's field defaults)


def base_config(gym: str = DEFAULT_GYM) -> BaseConfig:
    """The RL base recipe of ``gym``: :data:`ISSUE_BASE` (the default gym) or :data:`DEFECT_BASE`."""
    check_gym(gym)
    return ISSUE_BASE if gym == "issue" else DEFECT_BASE


def demo_batch(
    tok: Tokenizer, cfg: BaseConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Demonstrations -> ids [N, T], action mask [N, T-1], answer position [N], off-by-one id [N].

    Every demonstration has the same length (prompt, ``read <eoa>``, observation,
    ``fix <n> <eoa>``), so no padding is needed.
    """
    rows, answer_pos, off_by_one = [], [], []
    for task in make_demo_tasks(cfg.n_demo_tasks, gym=cfg.gym):
        read = [tok.read_id, tok.eoa_id]
        fix = [tok.fix_id, tok.ids[str(task.bug_line)], tok.eoa_id]
        head = prompt_ids(task, tok) + read + observation_ids(task, tok)
        rows.append(head + fix)
        answer_pos.append(len(head) + 1)  # index of the line-number token (after 'fix')
        off_by_one.append(tok.ids[str(task.bug_line - 1 if task.bug_line > 1 else 2)])
    ids = torch.tensor(rows)  # [N, T]
    n_prompt = len(prompt_ids(make_demo_tasks(1, gym=cfg.gym)[0], tok))
    n_head = answer_pos[0] - 1
    mask = torch.zeros(ids.shape[0], ids.shape[1] - 1)  # [N, T-1]; index t predicts token t+1
    mask[:, n_prompt - 1 : n_prompt + 1] = 1.0  # read, <eoa>
    mask[:, n_head - 1 :] = 1.0  # fix, <n>, <eoa>
    return ids, mask, torch.tensor(answer_pos), torch.tensor(off_by_one)


def _lhs_positions(tok: Tokenizer, cfg: BaseConfig) -> torch.Tensor:
    """Positions of each line's tokens from its left-hand-side variable to its end, in a
    demonstration: -> [N_LINES, words per line - 1]."""
    task = make_demo_tasks(1, gym=cfg.gym)[0]
    obs = len(prompt_ids(task, tok)) + 2  # after the prompt and 'read <eoa>'
    words_per_line = len(task.lines[0].split())
    first = torch.tensor([obs + 2 + words_per_line * k for k in range(N_LINES)])  # [N_LINES]
    return first[:, None] + torch.arange(words_per_line - 1)[None, :]  # [N_LINES, words - 1]


def _decoy_target(tok: Tokenizer, cfg: BaseConfig) -> torch.Tensor:
    """Each demonstration's decoy distribution over token ids (even over the other defect lines): [N, V]."""
    tasks = make_demo_tasks(cfg.n_demo_tasks, gym=cfg.gym)
    out = torch.zeros(len(tasks), len(tok))
    for i, task in enumerate(tasks):
        lines = [
            int(x.split()[0])
            for x in task.lines
            if x.endswith(BUG_RHS) and int(x.split()[0]) != task.bug_line
        ]
        lines = lines or [n for n in range(1, N_LINES + 1) if n != task.bug_line]
        for n in lines:
            out[i, tok.ids[str(n)]] = 1.0 / len(lines)
    return out


def _bug_onehot(tok: Tokenizer, cfg: BaseConfig, ids: torch.Tensor) -> torch.Tensor:
    """One-hot of each demonstration's bug line: -> [N, N_LINES]."""
    bugs = torch.tensor([t.bug_line - 1 for t in make_demo_tasks(cfg.n_demo_tasks, gym=cfg.gym)])
    assert len(bugs) == len(ids)
    return F.one_hot(bugs, N_LINES).float()


def train_base(tok: Tokenizer, cfg: BaseConfig, model_cfg: ModelConfig | None = None) -> TinyAgent:
    """Build the RL base from scratch (deterministic for fixed cfg and tokenizer)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    model = TinyAgent(model_cfg or ModelConfig(vocab_size=len(tok)), generator=gen)
    ids, mask, answer_pos, off_by_one = demo_batch(tok, cfg)
    decoys = _decoy_target(tok, cfg) if cfg.wrong == "decoy" else None  # [N, V] or None
    params = list(model.parameters())
    probe = None
    if cfg.aux_weight > 0:
        probe = torch.nn.Linear(model.cfg.d_model, 1)  # dropped after the warm start
        with torch.no_grad():
            probe.weight.copy_(torch.randn(probe.weight.shape, generator=gen) * 0.02)
            probe.bias.zero_()
        params += list(probe.parameters())
        var_pos, bug_onehot = _lhs_positions(tok, cfg), _bug_onehot(tok, cfg, ids)
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    for _ in range(cfg.steps):
        rows = torch.randint(len(ids), (cfg.batch_size,), generator=gen)  # [b]
        x, m = ids[rows], mask[rows]  # [b, T], [b, T-1]
        h = model.hidden(x)  # [b, T, D]
        logits = (h @ model.tok_emb.weight.T if model.head is None else model.head(h))[:, :-1]  # [b, T-1, V]
        target = F.one_hot(x[:, 1:], len(tok)).float()  # [b, T-1, V]
        b_idx, at = torch.arange(len(rows)), answer_pos[rows] - 1  # [b]; index predicting the line
        target[b_idx, at] *= cfg.p_correct
        if decoys is None:
            target[b_idx, at, off_by_one[rows]] += 1.0 - cfg.p_correct
        else:
            target[b_idx, at] += (1.0 - cfg.p_correct) * decoys[rows]
        nll = -(target * torch.log_softmax(logits, -1)).sum(-1)  # [b, T-1]
        loss = (nll * m).sum() / m.sum()
        if probe is not None:
            marks = probe(h[:, var_pos]).squeeze(-1)  # [b, N_LINES, K]: every token from the variable on
            target_marks = bug_onehot[rows][:, :, None].expand_as(marks)
            loss = loss + cfg.aux_weight * F.binary_cross_entropy_with_logits(marks, target_marks)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
    return model


def _cache_key(tok: Tokenizer, cfg: BaseConfig, model_cfg: ModelConfig) -> str:
    blob = json.dumps([dataclasses.asdict(cfg), dataclasses.asdict(model_cfg), tok.vocab], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_rl_base(
    tok: Tokenizer,
    cfg: BaseConfig | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    model_cfg: ModelConfig | None = None,
) -> TinyAgent:
    """The RL base model, from the disk cache when a valid one exists, else trained and cached.

    ``cfg`` defaults to the default gym's recipe (:func:`base_config`). ``cache_dir=None``
    disables caching. A corrupt or mismatched cache file is rebuilt and overwritten atomically.
    """
    cfg = cfg or base_config()
    model_cfg = model_cfg or ModelConfig(vocab_size=len(tok))
    if cache_dir is None:
        return train_base(tok, cfg, model_cfg)
    name = f"rl_base_{_cache_key(tok, cfg, model_cfg)}.pt"
    path = Path(cache_dir) / name
    for candidate in (path, shipped_base(name)):
        if candidate is not None and candidate.exists():
            try:
                model, _, _ = load_checkpoint(candidate, expected_cfg=model_cfg, expected_vocab=tok.vocab)
                return model
            except CheckpointError:
                pass  # fall through: the shipped base, else rebuild and overwrite the cache
    model = train_base(tok, cfg, model_cfg)
    save_checkpoint(model, tok.vocab, path, meta={"base_config": dataclasses.asdict(cfg)})
    return model


def shipped_base(name: str) -> Path | None:
    """The shipped base file ``name`` if it is there and matches its recorded SHA-256, else None
    (a mismatch warns: the base is then trained, as without a shipped file)."""
    path, digest = SHIPPED_DIR / name, SHIPPED_DIR / f"{name}.sha256"
    if not path.is_file() or not digest.is_file():
        return None
    recorded = digest.read_text().split()[:1]
    if recorded != [hashlib.sha256(path.read_bytes()).hexdigest()]:
        warnings.warn(f"{path} does not match its checksum {digest.name}: training the base", stacklevel=3)
        return None
    return path
