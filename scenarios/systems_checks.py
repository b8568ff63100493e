"""Build-time checks of the system presets' knobs, naming each knob as the preset takes it.

A preset maps its system's knobs onto pipesim's policies, whose own checks name their own fields
(``AReaLThrottle``'s ``max_concurrent`` for AReaL's ``max_concurrent_rollouts``), and some of
whose checks ran only mid-run: ``systems:areal --set samples_per_prompt=3`` was refused by the
batch policy during the run ("batch_size (64 samples) must be a multiple of samples_per_group
(3)"), naming neither the knob nor the file, and so were verl's ``max_queue_size`` below the batch
and every preset's groups that do not divide the batch. :func:`renamed` re-raises a policy's
refusal under the preset's knob; :func:`check_batch` refuses, when the preset is built, a batch
that is not whole groups and a queue that cannot hold a batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pipesim.core.validate import FieldError
from pipesim.policies.verl import VerlMessageQueue


@contextmanager
def renamed(knobs: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a :class:`FieldError` on a policy field in ``knobs`` (policy field -> the preset's
    knob) as one on the knob, its message naming the knob and the policy field it sets."""
    try:
        yield
    except FieldError as exc:
        knob = knobs.get(exc.field)
        if knob is None:
            raise
        err = type(exc)(f"{knob}: {exc}", knob, exc.file)
        raise err from None


def check_batch(batch_size: int, policies: Mapping[str, Any], group_knob: str) -> None:
    """Refuse what the preset's policies refused only mid-run: a batch (``batch_size`` samples)
    that is not a whole number of a prompt's ``group_knob`` samples, and a verl message queue
    smaller than a batch. The field named is the knob, the message names the batch too (either
    may be the one to change)."""
    for policy in policies.values():
        n = getattr(policy, "samples_per_group", None) or getattr(policy, "samples_per_prompt", None)
        if isinstance(n, int) and n > 1 and batch_size % n:
            raise FieldError(
                f"{group_knob} ({n}): batch_size ({batch_size:,} samples) must be a whole number of "
                f"groups of {n} (the trainer takes whole groups): give a {group_knob} that divides "
                f"batch_size, or a batch_size that is a multiple of {n}",
                group_knob,
            )
    queue = policies.get("batching")
    if isinstance(queue, VerlMessageQueue) and queue.capacity(batch_size) < batch_size:
        raise FieldError(
            f"max_queue_size ({queue.capacity(batch_size):,}) is below batch_size ({batch_size:,}): "
            "the queue can never hold a batch, so no step could train",
            "max_queue_size",
        )
