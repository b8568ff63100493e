"""slime's presets: :func:`slime` (``drain`` and ``fully_async``, from ``train_async.py``; ``sync``,
from ``train.py``) and APRIL.

:func:`slime` models slime's two asynchronous loops and its synchronous one; :func:`slime_drain`
and :func:`slime_fully_async` are the two asynchronous modes as zero-argument presets
(``systems:slime_drain``, ``systems:slime_fully_async``). Its docstring cites the code each mode
was read from. ``slime("sync")`` and :func:`april` take a ``filter_rate``: DAPO's dynamic-sampling
filter, run through slime's submit loop (:class:`~pipesim.policies.slime_submit.SlimeSubmit`).

:func:`april` (active partial rollouts, in slime) takes slime's command-line knobs under their own
names, so the file ``pipesim export systems:april`` writes reads as a slime launch script does:

==============================  ===========================================  =====================
knob                            slime                                        pipesim
==============================  ===========================================  =====================
``over_sampling_batch_size``    ``--over-sampling-batch-size`` (prompts)     ``OverSample`` factor
                                                                             = this x n / B
``partial_rollout``             ``--partial-rollout``                        ``AbortReprefill`` or
                                                                             ``AbortRestart``
``n_samples_per_prompt``        ``--n-samples-per-prompt``                   ``WholeGroups(n)``
``batch_size`` (samples)        ``--rollout-batch-size`` x n                 ``PipelineConfig``
==============================  ===========================================  =====================

The names this preset had before (``oversample_factor``, a factor of B; ``carry_over``;
``samples_per_prompt``) still work, with a :class:`DeprecationWarning`; giving one knob under both
names is refused, naming the new one (detected where the new name is off its default: a new name
passed at its default value cannot be told from one not passed, and the old name's value wins).
Old names are read from the keyword overrides, not the signature, so an exported file carries only
slime's names.

Every preset here is re-exported from :mod:`scenarios.systems` (``systems.slime``,
``systems.april``, the same objects), whose ``PRESETS`` registers them; the helpers they share
with the other presets (``_scenario``, ``CHAPTER``, ``_bool``) live there, imported when called
(that module imports this one).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from pipesim import Scenario
from pipesim.core.errors import check_int
from pipesim.core.validate import FieldError, check_number, refuse
from pipesim.policies.admission import BatchThrottle, OverSample
from pipesim.policies.base import CountThrottle, Drain, WeightUpdate
from pipesim.policies.groups import WholeGroups
from pipesim.policies.slime_submit import SlimeSubmit
from pipesim.policies.systems import SlimeAsyncWorker
from pipesim.policies.updates import AbortReprefill, AbortRestart, AfterNextBatch, BatchDrain


def slime(
    mode: str = "drain",
    max_concurrent: int | None = None,
    filter_rate: float = 0.0,
    n_samples_per_prompt: int = 1,
    over_sampling_batch_size: int | None = None,
    **pipeline: Any,
) -> Scenario:
    """slime: ``mode="drain"``, ``mode="fully_async"`` or ``mode="sync"``, from its code.

    ``sync`` -- THUDM/slime ``train.py``: generate a rollout, train on it, update the weights, with
    ``--colocate`` (colocated by default here: nothing is generated during training; eta 0). A
    rollout is ``generate_rollout_async`` (RLsys-Foundation/APRIL ``slime/rollout/sglang_example.py``
    at a72b585; THUDM/slime 624b824 the same), with ``filter_rate`` the share of prompt groups
    DAPO's dynamic-sampling filter (``--dynamic-sampling-filter-path ...check_reward_nonzero_std``)
    rejects. No source gives that rate; it is the user's (0 by default: no filter). With no filter
    and ``over_sampling_batch_size`` at the rollout batch (slime's default, None here;
    ``utils/arguments.py``:929-930) the round is one batch of groups, generated whole
    (:class:`~pipesim.policies.base.CountThrottle` at eta 0, :class:`~pipesim.policies.base.Drain`,
    the published APRIL row's baseline). Otherwise the round over-samples as slime does
    (:class:`~pipesim.policies.slime_submit.SlimeSubmit`): a chunk of ``over_sampling_batch_size``
    groups at once (:242-245), another whenever rejected groups (:260-262) leave fewer than the
    batch to come, and once ``batch_size / n_samples_per_prompt`` groups are accepted ``abort``
    (:277) drops every unfinished group, its finished samples included (:194-195;
    :class:`~pipesim.policies.updates.AbortRestart` with ``restart=False`` and
    :class:`~pipesim.policies.groups.WholeGroups` with ``drop_stale``): the round never waits for
    its tail. ``filter_rate``, ``n_samples_per_prompt`` and ``over_sampling_batch_size`` are
    refused in the other modes, naming the field (their batches are not groups here; a filter in
    ``train_async.py``'s loop would need its wait, "sync generate before update weights", to
    count accepted groups, which :class:`~pipesim.policies.updates.AfterNextBatch` does not).

    ``drain`` -- THUDM/slime ``train_async.py``, ``train``: the next rollout is generated while the
    current one trains (``rollout_manager.generate.remote(rollout_id + 1)``, launched once rollout
    ``rollout_id`` has returned) and is waited for before ``update_weights`` ("sync generate before
    update weights"): one whole rollout ahead, the whole rollout drained before each update
    (:class:`~pipesim.policies.admission.BatchThrottle` with eta = 1 and
    :class:`~pipesim.policies.updates.BatchDrain`).

    ``fully_async`` -- ``slime/rollout/fully_async_rollout.py``: ``AsyncRolloutWorker._loop`` keeps
    at most ``max_concurrent`` groups in flight and stops topping up while as many completed
    groups wait (:class:`~pipesim.policies.systems.SlimeAsyncWorker`; no version bound). A weight
    update pauses the engines and aborts every request in flight; ``_make_done_cb`` puts the
    aborted group back in the data buffer, and ``sglang_rollout.generate`` resends prompt plus
    partial response (``sample.tokens``) with the remaining token budget. So the trajectory
    continues under the new weights after re-prefilling its prefix: no work is lost, the prefix
    is recomputed (:class:`~pipesim.policies.updates.AbortReprefill`: on fixed-duration slots, which
    have no prompt lengths, the generated tokens only; the compute engine re-prefills prompt,
    observations and generated tokens). ``--partial-rollout`` only decides whether those
    earlier tokens are masked (``--mask-offpolicy-in-partial-rollout``). ``train_async.py`` drives
    both modes the same way: after training step i it waits for rollout i + 1 ("sync generate
    before update weights"; with ``--rollout-function-path
    fully_async_rollout.generate_rollout_fully_async`` that is the worker handing over the next
    batch's completed groups) and only then updates the weights, so batch i + 1 is collected
    under the old weights and trained after the update
    (:class:`~pipesim.policies.updates.AfterNextBatch` around ``AbortReprefill``).
    """
    from scenarios.systems import _scenario  # that module imports this one

    WholeGroups(1, filter_rate=filter_rate)  # refused naming filter_rate, in every mode
    check_int("n_samples_per_prompt", n_samples_per_prompt, 1)
    if over_sampling_batch_size is not None:
        check_int("over_sampling_batch_size", over_sampling_batch_size, 1)
    if mode == "sync":
        return _slime_sync(filter_rate, n_samples_per_prompt, over_sampling_batch_size, pipeline)
    for name, off in (
        ("filter_rate", filter_rate == 0.0),
        ("n_samples_per_prompt", n_samples_per_prompt == 1),
        ("over_sampling_batch_size", over_sampling_batch_size is None),
    ):
        if not off and mode in ("drain", "fully_async"):
            raise refuse(name, f"is modelled in slime's mode='sync' only (train.py's loop), not {mode!r}")
    if mode == "drain":
        knob = "fixed at 1 (one step ahead, drained)"
        return _scenario(
            "slime drain", pipeline, 1, knob, admission=BatchThrottle(), weight_update=BatchDrain()
        )
    if mode == "fully_async":
        worker = SlimeAsyncWorker(max_concurrent)  # no version bound: max_staleness is refused
        wu = AfterNextBatch(AbortReprefill())  # the update waits for the next batch, as train_async.py
        sc = _scenario("slime fully async", pipeline, 0, admission=worker, weight_update=wu)
        if why := worker.unformable(sc.pipeline.batch_size, sc.pipeline.n_slots):
            raise FieldError(
                f"slime fully async: {why}", "batch_size"
            )  # at construction, not a stall mid-run
        return sc
    raise refuse("mode", f"must be 'drain', 'fully_async' or 'sync', got {mode!r}")


def _slime_sync(filter_rate: float, n: int, over_sampling: int | None, pipeline: dict[str, Any]) -> Scenario:
    """``slime("sync")``: the published baseline's policies, or slime's submit loop (see ``slime``)."""
    from scenarios.systems import CHAPTER, _scenario  # that module imports this one

    pipeline.setdefault("colocated", True)
    knob = "fixed at 0 (train.py: generate, train, update)"
    prompts = max(1, pipeline.get("batch_size", CHAPTER.batch_size) // n)
    if filter_rate == 0.0 and over_sampling in (None, prompts):
        return _scenario(
            "slime sync",
            pipeline,
            0,
            knob,
            "n_samples_per_prompt",
            admission=CountThrottle(),
            weight_update=Drain(),
        )
    _colocated_for_the_abort(pipeline, "slime('sync') with a filter or over-sampling")
    return _scenario(
        "slime sync",
        pipeline,
        0,
        knob,
        "n_samples_per_prompt",
        admission=SlimeSubmit(over_sampling),
        weight_update=AbortRestart(restart=False),
        batching=WholeGroups(n, filter_rate=filter_rate, drop_stale=True),
    )


def _colocated_for_the_abort(pipeline: dict[str, Any], who: str) -> None:
    """slime's submit loop dropping the unfinished groups at each batch
    (``AbortRestart(restart=False)``) needs ``colocated``: split, the sync falls inside a round and
    drops the round's own groups unseen, and :class:`~pipesim.policies.slime_submit.SlimeSubmit`
    refuses it at the first start, naming ``weight_update``, which a preset's user never set. So
    the preset refuses it at once, naming ``colocated``."""
    if not pipeline.get("colocated", True):
        raise refuse(
            "colocated",
            f"must be True for {who}: its abort drops the unfinished groups at each batch, and with "
            "colocated=False the sync falls inside a round and drops the round's own groups, which "
            "slime's submit loop cannot see, so rounds run out of groups (slime's train.py generates "
            "nothing during training)",
        )


def slime_drain(**kw: Any) -> Scenario:
    """slime ``train_async.py``: one rollout ahead, drained before each weight update (``slime``)."""
    return slime("drain", **kw)


def slime_fully_async(**kw: Any) -> Scenario:
    """slime fully async: ``max_concurrent`` groups in flight, re-prefilled after each update."""
    return slime("fully_async", **kw)


#: APRIL's default over-sampling when ``over_sampling_batch_size`` is None: 1.5 x the rollout batch
#: (the preset's default since it was written; slime's own default, None, means no over-sampling:
#: pass the rollout batch's prompt count, ``batch_size // n_samples_per_prompt``, for that).
DEFAULT_OVERSAMPLE = 1.5

#: old keyword -> slime's name (still accepted, with a DeprecationWarning)
RENAMED = {
    "oversample_factor": "over_sampling_batch_size",
    "carry_over": "partial_rollout",
    "samples_per_prompt": "n_samples_per_prompt",
}


def _old_names(pipeline: dict[str, Any], given: dict[str, bool]) -> dict[str, Any]:
    """Pop the old keyword names out of ``pipeline``: {new name: value}, warning for each; an old
    name given alongside its new one (``given[new]``) is refused, naming the new field."""
    found: dict[str, Any] = {}
    for old, new in RENAMED.items():
        if old not in pipeline:
            continue
        value = pipeline.pop(old)
        if given[new]:
            raise refuse(new, f"given twice: as {new} and under its old name {old}; give {new} only")
        warnings.warn(
            f"april({old}=...) is deprecated: use {new} (slime's own knob name)",
            DeprecationWarning,
            stacklevel=3,
        )
        found[new] = value
    return found


def april(
    over_sampling_batch_size: int | None = None,
    partial_rollout: bool = True,
    n_samples_per_prompt: int = 1,
    filter_rate: float = 0.0,
    **pipeline: Any,
) -> Scenario:
    """APRIL (active partial rollouts, in slime): over-sample, train the first B/n groups to finish.

    Source: RLsys-Foundation/APRIL ``slime/rollout/sglang_example.py`` (and THUDM/slime
    ``slime/rollout/sglang_rollout.py``). ``generate_rollout_async`` submits
    ``--over-sampling-batch-size`` groups (``submit_generate_tasks``, one task per group,
    ``generate_and_rm_group``; ``over_sampling_batch_size`` here, in prompts, a factor of
    ``over_sampling_batch_size x n / B`` over the batch), appends finished *groups* to ``data``
    until ``--rollout-batch-size`` are done and calls ``abort``, which aborts every request still
    running. One episode is one sample; ``n_samples_per_prompt`` is ``--n-samples-per-prompt``
    and B (``batch_size``, samples) = ``--rollout-batch-size`` x n, so the trainer takes the first
    B / n groups to complete, whole (:class:`~pipesim.policies.groups.WholeGroups`, in completion
    order). ``over_sampling_batch_size`` must be at least B / n (slime samples at least a batch);
    None is 1.5 x B / n (:data:`DEFAULT_OVERSAMPLE`).

    With ``--partial-rollout`` (``partial_rollout=True``) ``abort`` puts each unfinished group back
    in the data buffer whole: its finished samples keep their responses (``generate_and_rm``
    returns a completed sample unchanged) and the next rollout fetches it first, where
    ``generate`` sends ``prompt + response`` as a new request with ``max_new_tokens`` reduced by
    what was generated. The carried prefix is prefilled again under the new weights
    (:class:`~pipesim.policies.updates.AbortReprefill` keeps the partial response and charges the
    re-prefill; ``PipelineView.abort_running`` would lose it, which APRIL does not). Without it
    ``abort`` collects nothing: unfinished groups are gone, finished samples included
    (:class:`~pipesim.policies.updates.AbortRestart` with ``restart=False``, and ``WholeGroups``
    with ``drop_stale`` at eta 0 drops the rest of each such group). Completed groups beyond B / n
    in the same instant are kept for the next step (slime drops them; it is rare).

    slime's loop (``train.py``: generate, train, update weights) generates nothing between one
    rollout's abort and the next rollout, so the preset is ``colocated`` by default: generation
    pauses while the trainer trains, from the instant the batch forms, which is when slime calls
    ``abort``. Pass ``colocated=False`` to let the carried-over requests run on during training.

    ``filter_rate``: the share of prompt groups DAPO's dynamic-sampling filter rejects
    (``--dynamic-sampling-filter-path``; ``generate_rollout_async`` at a72b585, :260-262: a
    rejected group lowers ``remaining_batch_size``, and while it is below ``--rollout-batch-size``
    another ``--over-sampling-batch-size`` groups are submitted, :242-245; ``abort`` at :277 runs
    unconditionally). No source gives the rate; 0 (the default) is no filter and the preset above,
    unchanged. With a filter the admission is slime's submit loop
    (:class:`~pipesim.policies.slime_submit.SlimeSubmit`: chunks of ``over_sampling_batch_size``
    groups, the default 1.5 x B / n rounded up, until B / n groups are accepted), and with
    ``partial_rollout`` the carried groups (``buffer.py``:166-176, fetched first at :20-24) count
    as submitted in the next round.
    """
    from scenarios.systems import CHAPTER, _bool, _scenario  # that module imports this one

    given = {
        "over_sampling_batch_size": over_sampling_batch_size is not None,
        "partial_rollout": partial_rollout is not True,
        "n_samples_per_prompt": n_samples_per_prompt != 1,
    }
    old = _old_names(pipeline, given)
    if "partial_rollout" in old:
        _bool("carry_over", old["partial_rollout"])  # checked under the name the caller used
        partial_rollout = old["partial_rollout"]
    if "n_samples_per_prompt" in old:
        check_int("samples_per_prompt", old["n_samples_per_prompt"], 1)
        n_samples_per_prompt = old["n_samples_per_prompt"]
    _bool("partial_rollout", partial_rollout)
    check_int("n_samples_per_prompt", n_samples_per_prompt, 1)
    batch = pipeline.get("batch_size", CHAPTER.batch_size)
    factor = old.get("over_sampling_batch_size")
    if factor is not None:
        check_number("oversample_factor", factor, 1.0)
    elif over_sampling_batch_size is None:
        factor = DEFAULT_OVERSAMPLE
    else:
        check_int("over_sampling_batch_size", over_sampling_batch_size, 1)
        check_int("batch_size", batch, 1)
        prompts = max(1, batch // n_samples_per_prompt)
        if over_sampling_batch_size < prompts:
            raise refuse(
                "over_sampling_batch_size",
                f"must be at least --rollout-batch-size = batch_size / n_samples_per_prompt = {prompts} "
                f"prompts (slime samples at least a batch), got {over_sampling_batch_size}",
            )
        factor = over_sampling_batch_size * n_samples_per_prompt / batch
    pipeline.setdefault("colocated", True)
    wu: WeightUpdate = AbortReprefill() if partial_rollout else AbortRestart(restart=False)
    groups = WholeGroups(n_samples_per_prompt, filter_rate=filter_rate, drop_stale=not partial_rollout)
    admission: OverSample | SlimeSubmit = OverSample(factor)
    if filter_rate > 0.0:
        chunk = over_sampling_batch_size
        if chunk is None:  # a factor of B (the default, or the old name): whole groups, rounded up
            chunk = math.ceil(factor * batch / n_samples_per_prompt - 1e-9)
        admission = SlimeSubmit(chunk, partial_rollout)
        if not partial_rollout:
            _colocated_for_the_abort(pipeline, "april(partial_rollout=False) with a filter")
    return _scenario(
        "APRIL",
        pipeline,
        0,
        "fixed at 0 (over-sampled, aborted at each batch)",
        "n_samples_per_prompt",
        admission=admission,
        weight_update=wu,
        batching=groups,
    )
