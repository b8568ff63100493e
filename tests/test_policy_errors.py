"""A policy's own exception reaches the user as it was raised, and a stall is read from the run's
state, not from an error's wording (issue 39, item 2).

``Pipeline.run`` used to treat any ``RuntimeError`` mentioning "until" as SimPy's "no events left"
and replaced it with a stall ``PipelineError`` raised ``from None``: an admission rule that said
"cannot admit until the cache is warm" was reported as a stalled pipeline, its message lost.
"""

from __future__ import annotations

import sys

import pytest

import pipesim
from pipesim import CountThrottle, OldestFinishedFirst, PartialRollout, PipelineConfig, Scenario
from pipesim.core.errors import PipelineError


class _Oops(Exception):
    """An exception type of the user's own, with a cause of its own."""


class ColdAdmission(CountThrottle):
    def admits(self, p):  # type: ignore[no-untyped-def]
        raise RuntimeError("cannot admit until the cache is warm")


class FlakyBatch(OldestFinishedFirst):
    def select(self, buffer, p):  # type: ignore[no-untyped-def]
        try:
            {}["missing"]
        except KeyError as e:
            raise _Oops("no events left but 'until' event was not triggered") from e


class BrokenSync(PartialRollout):
    def sync(self, p):  # type: ignore[no-untyped-def]
        raise ValueError("until the weights are staged")


def _scenario(**policies: object) -> Scenario:
    config = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=2)
    return Scenario(pipeline=config, **policies)  # type: ignore[arg-type]


CASES = [
    ("admission", ColdAdmission(), RuntimeError, "cannot admit until the cache is warm", "admission"),
    ("batching", FlakyBatch(), _Oops, "no events left but 'until' event was not triggered", "batch"),
    ("weight_update", BrokenSync(), ValueError, "until the weights are staged", "weight update"),
]


@pytest.mark.parametrize(("field", "policy", "kind", "message", "role"), CASES, ids=[c[0] for c in CASES])
def test_a_policys_own_error_reaches_the_user_unchanged(
    field: str, policy: object, kind: type[Exception], message: str, role: str
) -> None:
    with pytest.raises(kind) as info:
        pipesim.run(_scenario(**{field: policy}))
    err = info.value
    assert type(err) is kind and str(err) == message  # the user's own exception, not SimPy's copy
    assert not isinstance(err, PipelineError)
    # its traceback ends in the policy's own code
    tb = err.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename == __file__
    if sys.version_info >= (3, 11):
        notes = getattr(err, "__notes__", [])
        assert any(role in n and type(policy).__name__ in n for n in notes), notes


def test_a_users_cause_is_kept() -> None:
    with pytest.raises(_Oops) as info:
        pipesim.run(_scenario(batching=FlakyBatch()))
    assert isinstance(info.value.__cause__, KeyError)


class NeverAdmits(CountThrottle):
    def admits(self, p):  # type: ignore[no-untyped-def]
        return p.started < 2  # two episodes, never a batch of four


def test_a_real_stall_is_still_a_stall() -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(_scenario(admission=NeverAdmits()))
    assert "stalled" in str(info.value) and "NeverAdmits" in str(info.value)
