"""TinyAgent: a small decoder-only transformer, and checkpoints that fail loudly.

Design
------
Pre-LayerNorm blocks, learned absolute position embeddings plus an ALiBi distance penalty per
head, causal self-attention through ``scaled_dot_product_attention``, and an output head that
is untied from the input embedding by default (see ``ModelConfig.tie_embeddings``). The
defaults (3 layers, width 64, 4 heads, MLP 256) give about 162k parameters.

ALiBi is there for learning speed: with learned positions only, the two-hop circuit the gym
needs (a token notices its line's defect, the answer copies that line's number) did not form in
1,250 supervised steps; a steep head makes "look within my own line" available from
initialisation, and the circuit forms in about 300 steps.

Sequences are right-padded. Causal attention means a position never sees anything to its
right, so padding never changes the logits of real tokens and no padding mask is needed; the
sampler relies on this when it decodes a whole batch of different lengths in one forward.

Checkpoints are a dict with a format tag, the ``ModelConfig`` as a dict, the vocabulary, the
state dict and ``sha256``, a SHA-256 digest of the tensor data (every tensor's name, dtype,
shape and raw bytes, in sorted name order; see :func:`state_digest`). ``load_checkpoint``
checks each of these before touching torch's ``load_state_dict``, so a corrupt file, one from
another architecture, or one with a single flipped byte inside its tensor data (which torch's
zip reader accepts silently) raises ``CheckpointError`` with a readable message instead of a
shape mismatch from deep in torch or silently wrong weights. The error is a ``FieldError``: its
``file`` is the checkpoint and its ``field`` the part refused (``""`` for a file torch cannot
read, ``format``, ``config``, ``vocab``, ``state_dict``, ``state_dict.<name>``, ``sha256``).
Writes are atomic (temporary file + ``os.replace``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from offpolicy.checks import FieldError, check_int, check_real, refuse, shown

CHECKPOINT_FORMAT = "offpolicy.tinyagent.v2"  # v2: adds the sha256 of the tensor data


class CheckpointError(FieldError):
    """A checkpoint file is unreadable, corrupt, or belongs to another architecture/vocabulary:
    ``file`` the checkpoint, ``field`` the part of it refused (``""``: the whole file)."""


@dataclass(frozen=True)
class ModelConfig:
    """TinyAgent architecture.

    Attributes:
        vocab_size: number of token ids (from the tokenizer).
        max_len: longest sequence the position table covers.
        d_model: residual width.
        n_layers: transformer blocks.
        n_heads: attention heads per block (must divide d_model).
        d_ff: hidden width of each block's MLP.
        tie_embeddings: reuse the input embedding as the output head. Off by default: with a
            tied head the residual of the ``fix`` token scores ``fix`` itself highly, and RL's
            negative advantages on wrong line numbers pushed mass onto it, so runs drifted into
            invalid ``fix fix fix`` actions.
        alibi_slopes: per-head linear distance penalty added to attention scores (ALiBi); a
            steep head looks at its own line, a zero-slope head sees the whole context alike.
    """

    vocab_size: int
    max_len: int = 96
    d_model: int = 64
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 256
    tie_embeddings: bool = False
    alibi_slopes: tuple[float, ...] = (1.0, 0.5, 0.125, 0.0)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads", "d_ff"):
            check_int(name, getattr(self, name), 1)
        if not isinstance(self.tie_embeddings, bool):
            raise refuse("tie_embeddings", f"must be a bool, got {shown(self.tie_embeddings)}")
        for i, s in enumerate(self.alibi_slopes):
            check_real(f"alibi_slopes[{i}]", s, -math.inf)
        object.__setattr__(self, "alibi_slopes", tuple(float(s) for s in self.alibi_slopes))
        if self.d_model % self.n_heads != 0:
            raise FieldError(f"n_heads={self.n_heads} must divide d_model={self.d_model}", "n_heads")
        if len(self.alibi_slopes) != self.n_heads:
            raise refuse("alibi_slopes", f"needs one slope per head ({self.n_heads})")


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model)
        )

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x [B, T, D], bias [H, T, T] (causal ALiBi, -inf above the diagonal) -> [B, T, D]."""
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)  # 3 x [B, T, D]
        q, k, v = (
            t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v)
        )  # [B, H, T, Dh]
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # [B, H, T, Dh]
        x = x + self.proj(att.transpose(1, 2).reshape(B, T, D))  # [B, T, D]
        return x + self.mlp(self.ln2(x))


class TinyAgent(nn.Module):
    """Decoder-only transformer policy: token ids [B, T] -> next-token logits [B, T, V]."""

    def __init__(self, cfg: ModelConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        pos = torch.arange(cfg.max_len)
        dist = (pos[:, None] - pos[None, :]).float()  # [T, T], i - j
        slopes = torch.tensor(cfg.alibi_slopes)[:, None, None]  # [H, 1, 1]
        alibi = torch.where(dist >= 0, -slopes * dist, torch.tensor(float("-inf")))  # [H, T, T]
        self.alibi: torch.Tensor
        self.register_buffer("alibi", alibi, persistent=False)
        self._init_weights(generator)

    def _init_weights(self, generator: torch.Generator | None) -> None:
        """Normal(0, 0.02) weights, zero biases, drawn from ``generator`` for reproducibility."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.ndim >= 2:
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
                elif name.endswith("bias"):
                    p.zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.hidden(ids)  # [B, T, D]
        return h @ self.tok_emb.weight.T if self.head is None else self.head(h)  # [B, T, V]

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The final normalised residual stream: ids [B, T] -> [B, T, D] (what the head reads)."""
        length = ids.shape[1]
        if length > self.cfg.max_len:
            raise FieldError(f"ids: length {length} exceeds max_len={self.cfg.max_len}", "ids")
        x = self.tok_emb(ids) + self.pos_emb.weight[:length]  # [B, T, D]
        bias = self.alibi[:, :length, :length]  # [H, T, T]
        for block in self.blocks:
            x = block(x, bias)
        return self.ln_f(x)  # [B, T, D]


def n_params(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 (hex) of a state dict's tensor data: name, dtype, shape and raw bytes of each
    tensor, in sorted name order. Any changed byte of any tensor changes the digest."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(
    model: TinyAgent, vocab: list[str], path: str | Path, meta: dict[str, Any] | None = None
) -> None:
    """Write model + config + vocabulary atomically: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": dataclasses.asdict(model.cfg),
        "vocab": list(vocab),
        "state_dict": model.state_dict(),
        "sha256": state_digest(model.state_dict()),
        "meta": dict(meta or {}),
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(
    path: str | Path, expected_cfg: ModelConfig | None = None, expected_vocab: list[str] | None = None
) -> tuple[TinyAgent, list[str], dict[str, Any]]:
    """Read a checkpoint -> (model, vocab, meta), raising ``CheckpointError`` on anything wrong.

    ``expected_cfg`` / ``expected_vocab``, when given, must match the file's exactly: a model
    from another architecture or tokenizer is refused before any weight is loaded.
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # pickle/zip errors: truncated or garbage file
        raise CheckpointError(
            f"checkpoint {path} is corrupt or unreadable: {type(err).__name__}: {err}", "", str(path)
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a {CHECKPOINT_FORMAT} file", "format", str(path))
    try:
        cfg = ModelConfig(**payload["config"])
    except (TypeError, ValueError, KeyError) as err:
        msg = f"checkpoint {path} has an invalid model config: {err}"
        inner = getattr(err, "field", "")
        raise CheckpointError(msg, f"config.{inner}" if inner else "config", str(path)) from None
    vocab = payload.get("vocab")
    if not isinstance(vocab, list) or len(vocab) != cfg.vocab_size:
        msg = f"checkpoint {path}: vocabulary missing or inconsistent with vocab_size"
        raise CheckpointError(msg, "vocab", str(path))
    if expected_cfg is not None and cfg != expected_cfg:
        msg = f"checkpoint {path} has architecture {cfg}, expected {expected_cfg}"
        raise CheckpointError(msg, "config", str(path))
    if expected_vocab is not None and vocab != list(expected_vocab):
        msg = f"checkpoint {path} was built with a different tokenizer vocabulary"
        raise CheckpointError(msg, "vocab", str(path))
    model = TinyAgent(cfg)
    state = payload.get("state_dict")
    own = model.state_dict()
    if not isinstance(state, dict) or set(state) != set(own):
        msg = f"checkpoint {path}: parameter names do not match the TinyAgent architecture"
        raise CheckpointError(msg, "state_dict", str(path))
    for name, tensor in own.items():
        value = state[name]
        if not isinstance(value, torch.Tensor) or value.shape != tensor.shape:
            shape = getattr(value, "shape", None)
            msg = f"checkpoint {path}: {name} has shape {shape}, expected {tuple(tensor.shape)}"
            raise CheckpointError(msg, f"state_dict.{name}", str(path))
    digest = payload.get("sha256")
    if not isinstance(digest, str) or digest != state_digest(state):
        msg = (
            f"checkpoint {path}: tensor data checksum mismatch (sha256 missing or wrong): the file is corrupt"
        )
        raise CheckpointError(msg, "sha256", str(path))
    for name in own:
        if not torch.isfinite(state[name]).all():
            msg = f"checkpoint {path}: {name} contains non-finite values"
            raise CheckpointError(msg, f"state_dict.{name}", str(path))
    model.load_state_dict(state)
    return model, vocab, dict(payload.get("meta", {}))
