"""The whole probe: sample once with the engine, re-score many ways, and summarise as JSON-ready data.

Flow (all comparisons are over the same sampled tokens, so they are token-aligned):

1. The bf16 engine decodes every prompt in one left-padded batch of N and samples the tokens.
2. bf16 and fp32 trainers re-score them in batches of 1 and N: the chapter's five rows.
3. Probability bins and ratio ranges for the bf16 trainer (batch 1) against the engine.
4. Exercise 6: bf16 and fp32 engines re-decode the same tokens (forced) in batches of 1 and 10.
5. Knobs, each applied to both sides and re-scoring the same tokens: LM head + log-softmax in fp32
   (exercise 5), the other attention implementation, and (CUDA only) cuBLAS bf16 reduced-precision
   reductions off. Each knob row gives engine-vs-trainer and trainer batch-1-vs-N.

``run_probe`` returns a plain dict with a fixed schema (``SCHEMA``, checked by tests) so results
from a GPU machine can be rendered and compared later on a laptop. The model's label is in it.
Once steps 1-3 are done the dict exists, and later stages add their rows to it as they finish: a
run stopped part-way (``python -m mismatch`` on Ctrl-C or SIGTERM) saves it with an
``"incomplete"`` key naming the stage that was running.
"""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

from mismatch.checks import FieldError, refuse, shown
from mismatch.models import ATTN_IMPLEMENTATIONS, ModelSource
from mismatch.prompts import make_prompts
from mismatch.sampling import engine_sample, trainer_log_probs
from mismatch.stats import MismatchRow, mismatch_row, probability_bins, ratio_ranges

SCHEMA = "pipesim.mismatch/1"
TOP_LEVEL_KEYS = (
    "schema",
    "model",
    "config",
    "env",
    "comparisons",
    "bins",
    "ratios",
    "engine_batches",
    "knobs",
    "samples",
    "timings_s",
)
OPTIONAL_KEYS = ("incomplete",)
"""Only in a result saved part-way (an interrupt, or a later stage's error): ``{"stage": ...}``
names the stage that was running, whose rows (``engine_batches`` or ``knobs``) may be partly or
wholly missing; every other key is whole. A complete result never has it."""


def _check_count(name: str, value: object, low: int = 1, high: int | None = None, what: str = "") -> None:
    """FieldError naming ``name`` (its field: ``name`` less the flag in parentheses) unless ``value`` is
    an int (not a bool) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        why = " (batch 1 against batch N needs N >= 2)" if low == 2 and value == 1 else ""
        raise FieldError(f"{name} must be an integer >= {low}, got {shown(value)}{why}", name.split(" (")[0])
    if high is not None and value > high:
        raise FieldError(f"{name} must be at most {what or high} ({high}), got {value}", name.split(" (")[0])


MAX_PROMPTS = 4096
"""The most prompts one probe takes: the engine samples them as one batch (``--batch`` defaults to
all of them), so memory grows with the count; the chapter uses 30. Larger studies run several
probes with other ``--seed`` values."""


@dataclass(frozen=True)
class ProbeConfig:
    """What to measure. ``batch_n`` defaults to the number of prompts (the chapter's batch 30)."""

    n_prompts: int = 30
    new_tokens: int = 32
    seed: int = 0
    batch_n: int | None = None
    engine_batches: tuple[int, ...] = (1, 10)
    knobs: bool = True

    def __post_init__(self) -> None:
        # N >= 2: with one prompt (or --batch 1) every "batch 1 vs batch N" row compares a pass
        # with itself ("batch 1 vs batch 1", all zeros) and the engine batch rows have nothing to
        # compare, so the tables would say nothing while looking like a result.
        _check_count(
            "n_prompts (--prompts)", self.n_prompts, 2, MAX_PROMPTS, "MAX_PROMPTS, one probe's batch"
        )
        _check_count("new_tokens (--new-tokens)", self.new_tokens)
        _check_count("seed (--seed)", self.seed, 0, 2**64 - 1)  # torch's manual_seed range
        if self.batch_n is not None:
            # A batch above the prompts would label its rows "batch N" for a batch that never ran.
            _check_count("batch_n (--batch)", self.batch_n, 2, self.n_prompts, "the number of prompts")
        for b in self.engine_batches:
            _check_count("engine_batches", b)
        if not isinstance(self.knobs, bool):
            raise refuse("knobs", f"must be a bool, got {shown(self.knobs)}")

    @property
    def n(self) -> int:
        return self.batch_n if self.batch_n is not None else self.n_prompts


@contextlib.contextmanager
def attention(model: Any, impl: str) -> Iterator[None]:
    """Temporarily switch a model's attention implementation (eager <-> sdpa)."""
    before = model.config._attn_implementation
    model.set_attn_implementation(impl)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


@contextlib.contextmanager
def bf16_reduced_precision_reduction(allowed: bool) -> Iterator[None]:
    """Temporarily set torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction."""
    before = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = before


def _env(device: torch.device) -> dict[str, Any]:
    import transformers

    cuda = device.type == "cuda"
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "allow_bf16_reduced_precision_reduction": (
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cpu_threads": torch.get_num_threads(),
    }


def _rounded(t: torch.Tensor) -> list[list[float]]:
    return [[float(f"{x:.6g}") for x in row] for row in t.double().tolist()]


def run_probe(
    source: ModelSource,
    cfg: ProbeConfig,
    log: Callable[[str], None] = lambda s: None,
    partial: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every comparison on ``source`` -> dict with the keys in ``TOP_LEVEL_KEYS``.

    ``partial``, when given, is filled with the result so far as soon as the five main comparisons
    exist, and kept up to date as each later row is measured; until the run completes it also has
    the key ``"incomplete"`` (the stage that was running). A caller stopped by an interrupt (or a
    later stage's error, such as running out of GPU memory) can save it: the main comparisons, the
    samples and every finished row, instead of nothing. Before the main comparisons it stays empty.
    """
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    tok, n, T = source.tokenizer, cfg.n, cfg.new_tokens
    m16, m32 = source.get(torch.bfloat16), source.get(torch.float32)
    timings["load"] = time.perf_counter() - t_start
    log(f"model: {m16.info.label}")
    prompts = [torch.tensor(tok.encode(p), dtype=torch.long) for p in make_prompts(cfg.n_prompts)]
    top = max([int(p.max()) for p in prompts if p.numel()] + [tok.pad_id])
    if top >= m16.info.vocab_size:  # else torch.embedding's "index out of range in self" mid-run
        raise FieldError(
            f"tokenizer {tok.name!r} gives token id {top} but the model's vocab_size is "
            f"{m16.info.vocab_size} (ids 0 to {m16.info.vocab_size - 1}); is it the model's own tokenizer?",
            "vocab_size",
        )
    longest = max(len(p) for p in prompts)
    if longest + T > m16.info.context:
        raise FieldError(
            f"prompts too long for the model's context: the longest prompt has {longest} tokens and "
            f"--new-tokens {T} needs {longest + T} positions, but the context is {m16.info.context}",
            "new_tokens",  # the field; its flag is in the sentence, as ProbeConfig names it
        )
    pad = tok.pad_id

    def trainer(model: Any, ids: torch.Tensor, batch: int, head_fp32: bool = False) -> torch.Tensor:
        return trainer_log_probs(model, prompts, ids, pad_id=pad, batch_size=batch, head_fp32=head_fp32)

    t = time.perf_counter()
    engine = engine_sample(m16.model, prompts, T, pad_id=pad, seed=cfg.seed, batch_size=n)
    ids, mu = engine.new_ids, engine.logp  # [B, T] x 2
    scores = {
        (name, b): trainer(lm.model, ids, b) for name, lm in (("bf16", m16), ("fp32", m32)) for b in (1, n)
    }

    pairs: list[tuple[str, str, torch.Tensor, torch.Tensor]] = [
        ("bf16_b1_vs_engine", "bf16 trainer, batch 1 vs engine", scores["bf16", 1], mu),
        ("bf16_bN_vs_engine", f"bf16 trainer, batch {n} vs engine", scores["bf16", n], mu),
        ("fp32_b1_vs_engine", "fp32 trainer, batch 1 vs engine", scores["fp32", 1], mu),
        ("bf16_b1_vs_bN", f"bf16 trainer: batch 1 vs batch {n}", scores["bf16", 1], scores["bf16", n]),
        ("fp32_b1_vs_bN", f"fp32 trainer: batch 1 vs batch {n}", scores["fp32", 1], scores["fp32", n]),
    ]
    diffs = {k: a - b for k, _, a, b in pairs}
    eng_rows: list[dict[str, Any]] = []  # filled below; the same lists are in ``partial``
    knobs: list[dict[str, Any]] = []
    result: dict[str, Any] = partial if partial is not None else {}
    result.update(
        {
            "schema": SCHEMA,
            "model": {
                **m16.info.to_dict(),
                "attn_implementation": source.attn_implementation,
                "tokenizer": tok.name,
            },
            "config": {**asdict(cfg), "engine_batches": list(cfg.engine_batches), "batch_n": n},
            "env": _env(source.device),
            "comparisons": [{"key": k, **mismatch_row(name, a, b).to_dict()} for k, name, a, b in pairs],
            "bins": probability_bins(mu, diffs),
            "ratios": ratio_ranges(scores["bf16", 1], mu),
            "engine_batches": eng_rows,
            "knobs": knobs,
            "samples": {"engine_logp": _rounded(mu), "d": {k: _rounded(v) for k, v in diffs.items()}},
            "timings_s": {},
            "incomplete": {"stage": "engine_batches"},
        }
    )

    def timed(key: str, since: float) -> None:
        timings[key] = time.perf_counter() - since
        result["timings_s"] = {k: round(v, 3) for k, v in timings.items()}

    timed("main", t)
    log("sampled and re-scored")  # the result so far is in ``partial`` from here on
    t = time.perf_counter()

    def add(key: str, name: str, x: torch.Tensor, y: torch.Tensor) -> None:
        eng_rows.append({"key": key, **mismatch_row(name, x, y).to_dict()})

    e32 = engine_sample(m32.model, prompts, T, pad_id=pad, batch_size=n, force_ids=ids).logp
    for b in [b for b in cfg.engine_batches if b < n]:
        e16_b = engine_sample(m16.model, prompts, T, pad_id=pad, batch_size=b, force_ids=ids).logp
        add(f"bf16_engine_b{b}_vs_bN", f"bf16 engine: batch {b} vs batch {n}", e16_b, mu)
    e32_1 = engine_sample(m32.model, prompts, T, pad_id=pad, batch_size=1, force_ids=ids).logp
    add("fp32_engine_b1_vs_bN", f"fp32 engine: batch 1 vs batch {n}", e32_1, e32)
    add("fp32_b1_vs_fp32_engine", "fp32 trainer, batch 1 vs fp32 engine", scores["fp32", 1], e32)
    timed("engine_batches", t)

    t = time.perf_counter()
    result["incomplete"] = {"stage": "knobs"}
    if cfg.knobs:
        _knobs(source, cfg, prompts, ids, mu, scores, trainer, into=knobs)
    timed("knobs", t)
    timed("total", t_start)
    del result["incomplete"]
    return result


def _knob_entry(
    key: str, name: str, n: int, rows: tuple[MismatchRow, MismatchRow] | None, note: str = ""
) -> dict[str, Any]:
    return {
        "key": key,
        "name": name,
        "available": rows is not None,
        "note": note,
        "engine_vs_trainer_b1": rows[0].to_dict() if rows else None,
        "trainer_b1_vs_bN": rows[1].to_dict() if rows else None,
        "batch_n": n,
    }


def _knobs(
    source: ModelSource,
    cfg: ProbeConfig,
    prompts: list[torch.Tensor],
    ids: torch.Tensor,
    mu: torch.Tensor,
    scores: dict[tuple[str, int], torch.Tensor],
    trainer: Callable[..., torch.Tensor],
    into: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each knob on both sides, re-scoring the baseline's sampled tokens with the bf16 model; each
    entry is appended to ``into`` (returned; a new list by default) as soon as it is measured."""
    model, n, pad, T = source.get(torch.bfloat16).model, cfg.n, source.tokenizer.pad_id, cfg.new_tokens

    def measure(head_fp32: bool = False) -> tuple[MismatchRow, MismatchRow]:
        eng = engine_sample(
            model, prompts, T, pad_id=pad, batch_size=n, force_ids=ids, head_fp32=head_fp32
        ).logp
        b1, bn = trainer(model, ids, 1, head_fp32), trainer(model, ids, n, head_fp32)
        return mismatch_row("trainer b1 vs engine", b1, eng), mismatch_row("trainer b1 vs bN", b1, bn)

    base = source.attn_implementation
    other = next(a for a in ATTN_IMPLEMENTATIONS if a != base)
    rows = [] if into is None else into
    rows.append(
        _knob_entry(
            "baseline",
            f"baseline (bf16, {base})",
            n,
            (
                mismatch_row("trainer b1 vs engine", scores["bf16", 1], mu),
                mismatch_row("trainer b1 vs bN", scores["bf16", 1], scores["bf16", n]),
            ),
        )
    )
    rows.append(_knob_entry("lm_head_fp32", "LM head + log-softmax fp32 (ex. 5)", n, measure(head_fp32=True)))
    with attention(model, other):
        rows.append(_knob_entry(f"attn_{other}", f"attention {other} instead of {base}", n, measure()))
    name = "bf16 reduced-precision reduction off"
    if source.device.type == "cuda":
        with bf16_reduced_precision_reduction(False):
            rows.append(_knob_entry("no_bf16_rpr", name, n, measure()))
    else:
        rows.append(_knob_entry("no_bf16_rpr", name, n, None, "cuBLAS flag: only meaningful on a GPU"))
    return rows
