"""Models for the probe: real Qwen3 checkpoints, and labelled random stand-ins.

Three ways to get weights, all ending in a ``LabelledModel`` (the module plus a ``ModelInfo`` whose
``label`` travels into every table, JSON file and figure, so random weights are never mistaken for
the real model):

* ``load_model(path_or_id, ...)``: a local directory or an entry of the Hugging Face cache, loaded
  with ``local_files_only=True``. Nothing is downloaded: a hub id not in the cache raises
  ``FileNotFoundError``. A directory without a weights file, or with a damaged or truncated one
  (an interrupted download), raises ``FieldError`` (field ``model``, naming ``--model`` and the
  file), checked by :func:`check_weights` before the tokenizer or the model is loaded.
  Only Qwen3 checkpoints (config.json ``model_type`` ``qwen3``) are taken: the probe is about that
  architecture, and ``AutoModelForCausalLM`` would otherwise run any causal LM (or give a BERT a
  randomly initialised LM head) under a "REAL weights" label.
* ``tiny_qwen3(seed)``: a 3-layer Qwen3 with about 0.17M random parameters, for tests and ``--tiny``.
* ``qwen3_0_6b_random(seed)``: the real Qwen3-0.6B configuration (28 layers, hidden 1024, tied
  embeddings, vocab 151936) with random weights, for a GPU run when the checkpoint is missing.

Random weights are built once in fp32 on the CPU under a forked, seeded RNG, so one seed gives the
same weights on every device and in every dtype (a bf16 model is the rounding of the fp32 one).

Logit scale. With the default init (std 0.02) a random model's logits are nearly flat: over 151936
tokens every sampled token has probability near 1e-5, all tokens land in the chapter's lowest bin,
and the by-probability analysis says nothing. We multiply the final RMSNorm weight by a scalar
``alpha``, which scales every logit by ``alpha`` without touching the tied embeddings, and pick
``alpha`` by bisection (12 steps on log alpha) so that seeded fp32 decoding of 8 calibration prompts
samples tokens whose mean probability is 0.35, about the chapter's value for Qwen3-0.6B (37% / 32% /
19% / 12% of tokens in the four bins). The calibration is closed-loop because a random model's own
generations (repeats of the input token, attractor tokens) do not resemble its prompts. ``alpha`` is
rounded to three significant digits and printed in the label. Caveat: the resulting probabilities
are bimodal-ish (repeats are near-certain), so bins are populated, but not like a trained model's.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from mismatch.checkpoint import (
    check_architecture,
    check_vocab,
    config_vocab_size,
    load_tokenizer,
    read_config,
    resolve_local,
)
from mismatch.checks import FieldError, refuse
from mismatch.prompts import ByteTokenizer, Tokenizer, make_prompts
from mismatch.sampling import engine_sample
from mismatch.weightfiles import WEIGHTS_FILES as WEIGHTS_FILES  # importable from here too
from mismatch.weightfiles import check_weights, load_errors, model_error

TARGET_MEAN_PROB = 0.35  # mean probability of a sampled token, about the chapter's Qwen3-0.6B value
CALIBRATION_STEPS = 12  # bisection steps on log(alpha) in [log 0.5, log 200]
CALIBRATION_PROMPTS = 8  # prompts decoded per step, each cut to its last 64 bytes, 16 new tokens
CALIBRATION_PROMPT_BYTES = 64
ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
QWEN3_PAD_ID = 151643  # <|endoftext|> in the Qwen3 vocabulary


@dataclass(frozen=True)
class ModelInfo:
    """What every output says about the model. ``weights`` is ``"real"`` or ``"random"``."""

    label: str
    weights: str
    source: str
    n_params: int
    vocab_size: int
    context: int  # max_position_embeddings, in tokens
    logit_scale: float | None = None  # alpha for random weights, None for real ones

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class LabelledModel:
    """An eval-mode causal LM, its dtype/device/attention, and its ``ModelInfo``."""

    model: Any  # transformers PreTrainedModel (kept Any: transformers is imported lazily)
    info: ModelInfo
    dtype: torch.dtype
    device: torch.device
    attn_implementation: str


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"`` -> torch.device, with plain errors for the rest."""
    name = str(device)
    if not (name == "cpu" or name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit())):
        raise FieldError(f"unknown device {name!r}: use 'cpu', 'cuda' or 'cuda:N'", "device")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device {name!r} requested but no GPU is visible (torch.cuda.is_available() is False, "
                f"torch {torch.__version__}); run with --device cpu"
            )
        index = int(name[5:]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise RuntimeError(f"device {name!r} requested but only {torch.cuda.device_count()} GPU(s) exist")
    return torch.device(name)


def _check_attn(attn_implementation: str) -> None:
    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise refuse(
            "attn_implementation", f"must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}"
        )


def load_model(
    name_or_path: str,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device = "cpu",
    attn_implementation: str = "sdpa",
) -> LabelledModel:
    """Load a real Qwen3 checkpoint from a local directory or the HF cache (never the network);
    FieldError (field ``model``) for a config.json that is not valid JSON or not a Qwen3's, and
    for weights that are missing, damaged or cut short (:func:`check_weights`)."""
    _check_attn(attn_implementation)
    dev = resolve_device(device)
    path = resolve_local(name_or_path)
    cfg = read_config(name_or_path, path)
    check_architecture(name_or_path, cfg, os.path.join(path, "config.json"))
    weights = check_weights(name_or_path, path, cfg)
    from transformers import AutoModelForCausalLM

    try:
        model: Any = AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, attn_implementation=attn_implementation, local_files_only=True
        )
    except load_errors() as exc:  # damage past the header (or a legacy pickle's): named, exit 2
        raise model_error(
            name_or_path, f"cannot load the weights in {weights} ({type(exc).__name__}: {exc})", weights
        ) from exc
    model.to(dev)
    model.eval()
    cfg = model.config
    info = ModelInfo(
        label=f"{os.path.basename(os.path.normpath(name_or_path))} (REAL weights)",
        weights="real",
        source=name_or_path,
        n_params=sum(p.numel() for p in model.parameters()),
        vocab_size=int(cfg.vocab_size),
        context=int(cfg.max_position_embeddings),
    )
    return LabelledModel(model, info, dtype, dev, attn_implementation)


def tiny_qwen3_config(attn_implementation: str = "sdpa") -> Any:
    """3 layers, hidden 64, 4 query / 2 kv heads, byte vocabulary: about 0.17M parameters."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=256,
        bos_token_id=257,
        eos_token_id=258,
        attn_implementation=attn_implementation,  # type: ignore[call-arg]  # accepted via **kwargs
    )


def qwen3_0_6b_config(attn_implementation: str = "sdpa") -> Any:
    """The published Qwen/Qwen3-0.6B config.json, field by field."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=40960,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True,
        attention_bias=False,
        use_sliding_window=False,
        max_window_layers=28,
        bos_token_id=QWEN3_PAD_ID,
        eos_token_id=151645,
        pad_token_id=QWEN3_PAD_ID,
        attn_implementation=attn_implementation,  # type: ignore[call-arg]  # accepted via **kwargs
    )


def calibrate_logit_scale(
    model: Any,
    prompt_ids: list[torch.Tensor],
    pad_id: int,
    target: float = TARGET_MEAN_PROB,
    n_new: int = 16,
    seed: int = 0,
) -> float:
    """Bisect alpha (final-norm scale) until seeded decoding samples tokens of mean probability ``target``.

    Closed loop on purpose: a random model's own generations (repeats, attractor tokens) look nothing
    like its prompts, so matching the statistic on prompt text does not transfer to sampled tokens.
    The weights are restored afterwards; the caller applies the returned alpha.
    """
    norm = model.get_decoder().norm.weight
    base = norm.detach().clone()
    lo, hi = math.log(0.5), math.log(200.0)
    try:
        for _ in range(CALIBRATION_STEPS):
            mid = (lo + hi) / 2
            with torch.no_grad():
                norm.copy_(base * math.exp(mid))
            out = engine_sample(model, prompt_ids, n_new, pad_id=pad_id, seed=seed)
            lo, hi = (mid, hi) if out.logp.exp().mean().item() < target else (lo, mid)
    finally:
        with torch.no_grad():
            norm.copy_(base)
    return float(f"{math.exp((lo + hi) / 2):.3g}")


def build_random_master(
    config: Any, seed: int, device: torch.device, calibrate: bool = True
) -> tuple[Any, float | None]:
    """fp32 model with seeded random weights (built on the CPU) and a calibrated scale -> (model, alpha)."""
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.float32, attn_implementation=config._attn_implementation
        )
    model = model.to(device).eval()
    if not calibrate:
        return model, None
    tok = ByteTokenizer(pad_id=int(config.pad_token_id))
    calib = [
        torch.tensor(tok.encode(p)[-CALIBRATION_PROMPT_BYTES:]) for p in make_prompts(CALIBRATION_PROMPTS)
    ]
    alpha = calibrate_logit_scale(model, calib, tok.pad_id, seed=seed)
    with torch.no_grad():
        model.get_decoder().norm.weight.mul_(alpha)
    return model, alpha


def _count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


@dataclass
class ModelSource:
    """One set of weights handed out at several dtypes (cached), with its tokenizer and label.

    Random weights: an fp32 CPU master, copied and cast per dtype. Real weights: one
    ``from_pretrained`` per dtype. ``get(dtype)`` returns the same object on repeated calls.
    """

    kind: str  # "tiny" | "random-0.6b" | "real"
    device: torch.device
    attn_implementation: str
    tokenizer: Tokenizer
    seed: int = 0
    path: str | None = None
    _master: Any = None
    _alpha: float | None = None
    _cache: dict[torch.dtype, LabelledModel] = field(default_factory=dict)

    @classmethod
    def tiny(cls, seed: int = 0, device: str = "cpu", attn_implementation: str = "sdpa") -> ModelSource:
        _check_attn(attn_implementation)
        return cls("tiny", resolve_device(device), attn_implementation, ByteTokenizer(256), seed)

    @classmethod
    def random_0_6b(
        cls, seed: int = 0, device: str = "cpu", attn_implementation: str = "sdpa"
    ) -> ModelSource:
        _check_attn(attn_implementation)
        dev = resolve_device(device)
        return cls("random-0.6b", dev, attn_implementation, ByteTokenizer(QWEN3_PAD_ID), seed)

    @classmethod
    def real(cls, name_or_path: str, device: str = "cpu", attn_implementation: str = "sdpa") -> ModelSource:
        _check_attn(attn_implementation)
        dev = resolve_device(device)
        path = resolve_local(name_or_path)  # fail before anything heavy happens
        cfg = read_config(name_or_path, path)
        check_architecture(name_or_path, cfg, os.path.join(path, "config.json"))
        check_weights(name_or_path, path, cfg)  # before the tokenizer: a missing file fails at once
        tokenizer = load_tokenizer(name_or_path)
        check_vocab(
            name_or_path, config_vocab_size(cfg), getattr(tokenizer, "n_tokens", None), tokenizer.pad_id
        )
        return cls("real", dev, attn_implementation, tokenizer, path=name_or_path)

    def get(self, dtype: torch.dtype) -> LabelledModel:
        if dtype not in self._cache:
            self._cache[dtype] = self._make(dtype)
        return self._cache[dtype]

    def _make(self, dtype: torch.dtype) -> LabelledModel:
        if self.kind == "real":
            assert self.path is not None
            return load_model(self.path, dtype, self.device, self.attn_implementation)
        if self._master is None:
            cfg = (tiny_qwen3_config if self.kind == "tiny" else qwen3_0_6b_config)(self.attn_implementation)
            self._master, self._alpha = build_random_master(cfg, self.seed, self.device)
        model = copy.deepcopy(self._master).to(device=self.device, dtype=dtype).eval()
        name = "tiny-qwen3" if self.kind == "tiny" else "Qwen3-0.6B architecture"
        info = ModelInfo(
            label=f"{name}, RANDOM weights (seed {self.seed}, logit scale {self._alpha})",
            weights="random",
            source=f"{self.kind}(seed={self.seed})",
            n_params=_count(model),
            vocab_size=int(model.config.vocab_size),
            context=int(model.config.max_position_embeddings),
            logit_scale=self._alpha,
        )
        return LabelledModel(model, info, dtype, self.device, self.attn_implementation)


def tiny_qwen3(
    seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu", attn_implementation: str = "sdpa"
) -> LabelledModel:
    """A ~0.17M-parameter Qwen3 with seeded random weights (see module doc for the logit scale)."""
    return ModelSource.tiny(seed, device, attn_implementation).get(dtype)


def qwen3_0_6b_random(
    seed: int = 0, dtype: torch.dtype = torch.bfloat16, device: str = "cpu", attn_implementation: str = "sdpa"
) -> LabelledModel:
    """The Qwen3-0.6B architecture with seeded random weights, labelled as such."""
    return ModelSource.random_0_6b(seed, device, attn_implementation).get(dtype)
