"""mismatch: how far apart are an inference engine's and a trainer's log-probs at the same weights?

Concepts (chapter 13, section 13.6 and "nondeterminism" in 13.7):

* **mu (engine)** - the behaviour policy as an inference engine computes it: left-padded batch,
  KV cache, one decode step per token, LM head on the last position, fp32 log-softmax of that
  step's logits, sampling at temperature 1 (``sampling.engine_sample``).
* **pi_old (trainer)** - the same weights re-scoring the same tokens the way a trainer does: one
  right-padded full forward per batch (``sampling.trainer_log_probs``).
* **d = log pi - log mu** per sampled token. A table row gives mean |d|, median, p99, max, and
  max |sum_t d| (the log of the worst sequence-level ratio). In bf16 the chapter found 3e-2 nats
  per token on Qwen3-0.6B; two bf16 trainer passes that differ only in batch composition differ as
  much; fp32 passes agree to ~1e-5. The cause is that bf16 kernels are not batch-invariant.
* **bins** - the mismatch split by the engine probability of the sampled token ([0, .1), [.1, .5),
  [.5, .9), [.9, 1]); it concentrates on low-probability tokens.
* **ratios** - pi/mu per token and per sequence: what TIS/MIS/IcePop corrections would see.
* **knobs** - LM head + log-softmax in fp32 (exercise 5), engine batch size 1/10/N (exercise 6),
  eager vs SDPA attention, cuBLAS bf16 reduced-precision reduction off (GPU only).
* **health** - ``logprob_health`` (mean, p99, max of |log pi_old - log mu| under a mask), for
  training code to log at step 0: a jump means a kernel/precision/version bug, not learning.

Models (``mismatch.models``): ``load_model`` (local dir or HF cache, never the network),
``tiny_qwen3`` (~0.17M random parameters) and ``qwen3_0_6b_random`` (real Qwen3-0.6B config, random
weights with a calibrated logit scale). Every result carries the model's label; random weights
are never presented as Qwen3. Run ``python -m mismatch --tiny`` for the tables; see docs/mismatch.md.

Importing this package is light: nothing is loaded until first attribute access (torch for
``logprob_health``, transformers for the rest), so ``python -m mismatch`` can say in one line that
Ctrl-C stopped it while torch was still importing.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "logprob_health": "mismatch.health",
    "load_model": "mismatch.models",
    "tiny_qwen3": "mismatch.models",
    "qwen3_0_6b_random": "mismatch.models",
    "ModelSource": "mismatch.models",
    "LabelledModel": "mismatch.models",
    "ModelInfo": "mismatch.models",
    "engine_sample": "mismatch.sampling",
    "trainer_log_probs": "mismatch.sampling",
    "mismatch_row": "mismatch.stats",
    "probability_bins": "mismatch.stats",
    "ratio_ranges": "mismatch.stats",
    "ProbeConfig": "mismatch.probe",
    "run_probe": "mismatch.probe",
    "format_report": "mismatch.report",
    "make_prompts": "mismatch.prompts",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mismatch' has no attribute {name!r}")
