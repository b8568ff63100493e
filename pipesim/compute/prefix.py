"""A prompt group's shared prefix on one replica: the KV of a prompt counted once per group.

With :attr:`EngineConfig.share_group_prefix <pipesim.compute.cost.EngineConfig.share_group_prefix>`
the samples of one prompt group (GRPO's ``rollout.n``) that run on the same replica share the KV
cache of their common prompt, as an engine with prefix caching does: vLLM's automatic prefix
caching (on by default in vLLM V1: https://docs.vllm.ai/en/latest/design/prefix_caching/ -- KV
blocks are hashed by their tokens and their prefix, a new request reuses the cached blocks of its
prefix and computes only the rest; the RFC, https://github.com/vllm-project/vllm/issues/2614,
gives each block a reference count and evicts only blocks nobody references) and SGLang's
RadixAttention (the prompt's KV in a radix tree, shared by the requests that extend it).

The bookkeeping, per replica: ``holders[group]`` counts the group's members that hold its prompt's
KV -- resident sequences, and sequences in a tool call whose KV is kept (``tool_kv="keep"``), the
engine's own rules of residency. A sequence *acquires* a reference when it joins the GPU without
one: if another member already holds the prompt, its prefill skips the prompt (only its generated
and observation tokens are computed) and the prompt's KV is not counted again. It *releases* it
when it stops holding its KV: it finishes, is preempted, ends a turn with its KV dropped, or its
cached prefix is evicted. The last member to leave frees the prompt. Replicas never share.

Each sequence's own figures still include its prompt (its ``kv_off``, its cached prefix, its
reservation under ``kv_policy="reserve"``): decode attention reads the prompt for every sequence
(no cascade attention), and what a sequence frees when it leaves is its own context. The prompt KV
that sharing saves, ``sum over groups of (holders - 1) * prompt``, is subtracted from the batch's
``held_total`` (the KV outside ``kv_base + n * v``) -- and under ``"reserve"`` from ``reserved`` --
so every budget test (admission, preemption, the next full iteration, the peak, the series) sees
the KV the replica really holds, with no change to those tests.

Approximations: the whole prompt is shared (vLLM matches whole blocks and recomputes at least the
last prompt token of each request, a few tokens per sample); a prompt nobody holds is freed at once
(vLLM keeps unreferenced blocks cached until it needs the room, so a late member may still hit);
decode attention reads the prompt once per sequence (no cascade attention).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipesim.compute.batch import BatchState, Seq


def join(b: BatchState, seq: Seq, new: float) -> float:
    """``seq`` joins the GPU and would prefill ``new`` tokens: take its reference on the group's
    prompt; if another member holds it, the prompt is not prefilled nor counted again. Returns the
    tokens it prefills."""
    if seq.ref:  # back from a tool call with its cached prefix: it kept its reference
        return new
    seq.ref = True
    holders = b.prefix_holders
    g = seq.group
    r = holders.get(g, 0)
    holders[g] = r + 1
    if r:
        p = seq.prompt
        b.held_total -= p
        if not b._preempt:
            b.reserved -= p
        b.shared_prefix_tokens += p
        new -= p
        if seq.fresh > new:  # its fresh tokens are the tail of its context: none of the prompt
            seq.fresh = int(new)
    return new


def leave(b: BatchState, seq: Seq) -> None:
    """``seq`` no longer holds its KV: drop its reference (the last one frees the prompt)."""
    if not seq.ref:
        return
    seq.ref = False
    holders = b.prefix_holders
    g = seq.group
    r = holders[g] - 1
    if r:
        holders[g] = r
        p = seq.prompt
        b.held_total += p  # the others still hold the prompt: only its own tokens are freed
        if not b._preempt:
            b.reserved += p
    else:
        del holders[g]


def shared(b: BatchState, seq: Seq) -> float:
    """Prompt tokens ``seq`` would not add to the cache if it joined now."""
    return seq.prompt if not seq.ref and seq.group in b.prefix_holders else 0.0


def restretch(b: BatchState, resident: list[Seq], contexts: list[float]) -> tuple[float, float]:
    """Every resident context is recomputed (a re-prefill after a sync dropped the KV; the cached
    prefixes of tool calls are gone): each group's prompt once. Rebuilds the references from the
    residents and returns the (tokens, attention pairs) of the re-prefill."""
    holders: dict[int, int] = {}
    saved = 0.0
    tokens = pairs = 0.0
    for seq, ctx in zip(resident, contexts, strict=True):
        r = holders.get(seq.group, 0)
        holders[seq.group] = r + 1
        seq.ref = True
        prefix = 0.0
        if r:
            prefix = float(seq.prompt)
            saved += prefix
        new = ctx - prefix
        tokens += new
        pairs += new * (prefix + 0.5 * new)
    b.prefix_holders = holders
    b.held_total = -saved
    b.shared_prefix_tokens += saved
    if not b._preempt:
        b.reserved = sum(s.prompt + s.max_tokens for s in resident) - saved
    return tokens, pairs
