"""The two computation paths whose log-probs disagree: engine-style decoding and trainer-style scoring.

Engine (``engine_sample``): prompts left-padded into one batch (or chunks of ``batch_size``), a KV
cache, one decode step per new token, the LM head applied to the last position only (as inference
engines do), sampling at temperature 1, and the sampled token's log-prob read from that step's
logits with the log-softmax in fp32. With ``force_ids`` the engine decodes given tokens instead of
sampling: this is how the same tokens are re-scored by an engine with another batch size or knob,
so that every comparison is token-aligned. There is no early stop; every row gets ``n_new`` tokens.

Trainer (``trainer_log_probs``): prompt + sampled tokens right-padded, one full forward per chunk of
``batch_size`` sequences, the LM head over every position (as a trainer computes it), then the
fp32 log-softmax of the rows that predict the sampled tokens. The head's logits are made for as
many sequences at a time as fit in ``MAX_LOGITS_BYTES`` (all of a default run's), so memory does
not grow with ``batch_size`` past that.

``head_fp32=True`` is the chapter's exercise 5: the decoder runs in the model's dtype, and the LM
head matmul and log-softmax run in fp32 (the head weights are the model's, upcast).

Position ids are computed from the attention mask on both sides, so a left-padded prompt and a
right-padded sequence see the same positions. Both functions return CPU fp32 tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mismatch.checks import FieldError, refuse

MAX_LOGITS_BYTES = 8 * 2**30
"""The most bytes of LM-head logits the trainer holds at once (8 GiB). The probe's default, 30
sequences of ~214 positions at Qwen3's 151,936-token vocabulary, is 3.9 GB in fp32: one head GEMM
per batch, as before. Without a bound, ~600 prompts in one batch needed 78 GB for the logits
alone, after calibration and sampling had already run."""


@dataclass(frozen=True)
class EngineOutput:
    """Sampled (or forced) tokens and their engine log-probs, both [B, n_new] on the CPU."""

    new_ids: torch.Tensor  # [B, n_new] int64
    logp: torch.Tensor  # [B, n_new] float32, natural log


def _cache_kwarg(decoder: Any) -> str:
    """transformers renamed ``past_key_values`` to ``cache`` (5.2x); use whichever forward declares."""
    params = inspect.signature(decoder.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older signature without config
        return DynamicCache()


def _hidden(model: Any, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, cache: Any = None) -> Any:
    """Decoder (all layers + final norm) -> last hidden states [B, T, H]; fills ``cache`` if given."""
    decoder = model.get_decoder()
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": attn, "position_ids": pos}
    if cache is not None:
        kwargs[_cache_kwarg(decoder)] = cache
    return decoder(**kwargs, use_cache=cache is not None).last_hidden_state


def _head_logits(model: Any, hidden: torch.Tensor, head_fp32: bool) -> torch.Tensor:
    """LM head: in the model's dtype, or (exercise 5) in fp32 with upcast weights -> [..., V]."""
    head = model.get_output_embeddings()
    if head_fp32:
        return torch.nn.functional.linear(hidden.float(), head.weight.float())
    return head(hidden)


def _chunks(n: int, batch_size: int | None) -> list[range]:
    size = n if batch_size is None else batch_size
    if size < 1:
        raise refuse("batch_size", f"must be >= 1, got {batch_size}")
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def engine_sample(
    model: Any,
    prompt_ids: Sequence[torch.Tensor],
    n_new: int,
    *,
    pad_id: int,
    seed: int = 0,
    batch_size: int | None = None,
    force_ids: torch.Tensor | None = None,
    head_fp32: bool = False,
) -> EngineOutput:
    """Engine-style decoding of ``n_new`` tokens per prompt -> EngineOutput ([B, n_new] x 2).

    One ``torch.Generator`` seeded with ``seed`` drives all chunks in order, so the same seed, batch
    size and device give the same tokens and log-probs. ``force_ids`` [B, n_new] replaces sampling.
    """
    if n_new < 1:
        raise refuse("n_new", f"must be >= 1, got {n_new}")
    if force_ids is not None and tuple(force_ids.shape) != (len(prompt_ids), n_new):
        raise refuse("force_ids", f"must have shape {(len(prompt_ids), n_new)}, got {tuple(force_ids.shape)}")
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    all_ids, all_logp = [], []
    with torch.no_grad():
        for rows in _chunks(len(prompt_ids), batch_size):
            prompts = [prompt_ids[i] for i in rows]
            width = max(len(p) for p in prompts)
            ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)  # [b, L]
            attn = torch.zeros((len(prompts), width), dtype=torch.long)  # [b, L]
            for r, p in enumerate(prompts):
                ids[r, width - len(p) :] = p
                attn[r, width - len(p) :] = 1
            ids, attn = ids.to(device), attn.to(device)
            pos = (attn.cumsum(-1) - 1).clamp(min=0)  # [b, L] positions skip the left padding
            cache = _new_cache(model)
            step_ids, new_ids, new_logp = ids, [], []
            for t in range(n_new):
                hidden = _hidden(model, step_ids, attn, pos, cache)[:, -1]  # [b, H]
                logp = torch.log_softmax(_head_logits(model, hidden, head_fp32).float(), dim=-1)  # [b, V]
                if force_ids is None:
                    step_ids = torch.multinomial(logp.exp(), 1, generator=gen)  # [b, 1]
                else:
                    step_ids = force_ids[rows.start : rows.stop, t : t + 1].to(device)  # [b, 1]
                new_ids.append(step_ids)
                new_logp.append(logp.gather(-1, step_ids))
                attn = torch.cat([attn, torch.ones_like(step_ids)], dim=-1)  # [b, L + t + 1]
                pos = pos[:, -1:] + 1  # [b, 1]
            all_ids.append(torch.cat(new_ids, dim=-1).cpu())
            all_logp.append(torch.cat(new_logp, dim=-1).float().cpu())
    return EngineOutput(torch.cat(all_ids), torch.cat(all_logp))


def head_groups(n_seqs: int, width: int, vocab: int, element_size: int, max_logits_bytes: int) -> int:
    """How many sequences of ``width`` positions one LM-head GEMM takes so that its logits
    (``[group, width, vocab]`` of ``element_size`` bytes) stay within ``max_logits_bytes``: all
    ``n_seqs`` when they fit (the head as one GEMM, as before), else fewer (at least one)."""
    per_seq = max(1, width * vocab * element_size)
    return max(1, min(n_seqs, max_logits_bytes // per_seq))


def trainer_log_probs(
    model: Any,
    prompt_ids: Sequence[torch.Tensor],
    new_ids: torch.Tensor,
    *,
    pad_id: int,
    batch_size: int = 1,
    head_fp32: bool = False,
    max_logits_bytes: int = MAX_LOGITS_BYTES,
) -> torch.Tensor:
    """Trainer-style recomputation of the new tokens' log-probs -> [B, n_new] fp32 on the CPU.

    The decoder runs over each batch of ``batch_size`` sequences in one forward. The LM head's
    full-vocabulary logits (``batch x width x vocab``: 130 MB per sequence of 214 positions at
    Qwen3's 151,936 tokens in fp32) are made for as many of the batch's sequences at a time as fit
    in ``max_logits_bytes`` (:func:`head_groups`): all of them, as one GEMM, up to that size, so
    the numbers are those of one head GEMM over the batch; past it the memory stays bounded
    instead of growing with the batch."""
    if len(prompt_ids) != new_ids.shape[0]:
        raise FieldError(f"{len(prompt_ids)} prompts but new_ids has {new_ids.shape[0]} rows", "new_ids")
    if isinstance(max_logits_bytes, bool) or not isinstance(max_logits_bytes, int) or max_logits_bytes < 1:
        raise refuse("max_logits_bytes", f"must be an integer >= 1, got {max_logits_bytes!r}")
    device = next(model.parameters()).device
    n_new = new_ids.shape[1]
    head = model.get_output_embeddings().weight
    vocab, element_size = int(head.shape[0]), 4 if head_fp32 else head.element_size()
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for rows in _chunks(len(prompt_ids), batch_size):
            seqs = [torch.cat([prompt_ids[i], new_ids[i].cpu()]) for i in rows]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # [b, T]
            attn = torch.zeros((len(seqs), width), dtype=torch.long)  # [b, T]
            for r, s in enumerate(seqs):
                ids[r, : len(s)] = s
                attn[r, : len(s)] = 1
            ids, attn = ids.to(device), attn.to(device)
            pos = (attn.cumsum(-1) - 1).clamp(min=0)  # [b, T]
            hidden = _hidden(model, ids, attn, pos)  # [b, T, H]
            group = head_groups(len(seqs), width, vocab, element_size, max_logits_bytes)
            for g in range(0, len(seqs), group):
                logits = _head_logits(model, hidden[g : g + group], head_fp32)  # [g, T, V]
                for r in range(g, min(g + group, len(seqs))):
                    start = len(seqs[r]) - n_new - 1  # the row predicting the first new token
                    rows_t = logits[r - g, start : start + n_new]  # [n_new, V]
                    logp = torch.log_softmax(rows_t.float(), dim=-1)
                    out.append(logp.gather(-1, ids[r, start + 1 : start + 1 + n_new, None])[:, 0].cpu())
                del logits  # before the next group's: at most one group's logits at a time
    return torch.stack(out)  # [B, n_new]
