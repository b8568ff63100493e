"""Whether a plan spec's longest sample fits the engines' context, and what to change where it does
not: :func:`context_problem` (the sum that gives the longest sample, and the keys to lower) and
:func:`context_key` (the one key a refusal names). Split from :mod:`pipesim.plan.build`, which
checks every engine with it (``check_fits``)."""

from __future__ import annotations

from pipesim.plan.space import PlanSpec

__all__ = ["context_key", "context_problem"]


def context_problem(spec: PlanSpec, context_tokens: int) -> str | None:
    """Why the longest sample outgrows the engines' context, as the sum that gives it; None: it fits.

    The longest sample is the largest prompt plus ``turns`` responses of ``max_response_tokens``
    and ``turns - 1`` observations (one response without an agent), as
    :attr:`~pipesim.compute.TokenWorkload.max_sequence_tokens` counts it. A prompt that alone
    leaves no room for a response token is said as such, naming the prompt's key
    (:func:`context_key`): no response, turn or observation setting can make it fit."""
    w = spec.workload
    longest = w.max_sequence_tokens
    if longest <= context_tokens:
        return None
    prompt = w.longest_prompt_tokens
    source = "model.max_model_len" if spec.max_model_len is not None else f"{spec.model.name}'s context"
    context = f"the engines' context ({source} = {context_tokens:,} tokens)"
    key = context_key(spec, context_tokens)
    if key == _prompt_key(spec):
        return (
            f"workload: the prompt alone ({key} = {prompt:,} tokens) leaves no room for a response "
            f"token in {context}; raise model.max_model_len or lower {key}"
        )
    parts = [f"prompt {prompt:,}"]
    if w.agent is None:
        parts.append(f"max_response_tokens {w.max_response_tokens:,}")
        lower = "workload.max_response_tokens"
    else:
        a = w.agent
        turns = f"{a.turns} turn{'s' * (a.turns != 1)}"
        parts.append(f"{turns} x max_response_tokens {w.max_response_tokens:,}")
        lower = "workload.max_response_tokens"  # one turn: no observation, no fewer turns
        if a.turns > 1:
            obs = f"{a.turns - 1} observation{'s' * (a.turns != 2)}"
            parts.append(f"{obs} x {a.observation_tokens:,}")
            lower = "workload.max_response_tokens, agent.turns or agent.observation_tokens"
    return (
        f"workload: the longest sample ({' + '.join(parts)} = {longest:,} tokens) exceeds {context}; "
        f"raise model.max_model_len or lower {lower}"
    )


def context_key(spec: PlanSpec, context_tokens: int) -> str:
    """The workload key :func:`context_problem` asks to lower first: the prompt's
    (``workload.prompt_tokens``) where the largest prompt alone fills ``context_tokens``, else
    ``workload.max_response_tokens``."""
    if spec.workload.longest_prompt_tokens >= context_tokens:  # every response holds a token
        return _prompt_key(spec)
    return "workload.max_response_tokens"


def _prompt_key(spec: PlanSpec) -> str:
    fixed = isinstance(spec.workload.prompt, int)
    return "workload.prompt_tokens" if fixed else "workload.max_prompt_tokens"
