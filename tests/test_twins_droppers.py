"""Who dropped a run's episodes is worded once (:func:`pipesim.core.stall._droppers`) for every
message that names them: a stall, a pool exhausted, no batch formed. The errors' own copy named
pipesim's weight update beside the batch policy for discards it cannot make (pipesim's weight
updates never call ``p.drop``), and named a user's weight update without saying how it drops."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import PipelineError, Scenario
from pipesim.io.registry import get_scenario
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import CountThrottle, PartialRollout

BASE = get_scenario("async-eta2").with_(n_slots=8, batch_size=4, steps=2)
DISCARDS = re.compile(r"\(([\d,]+) discarded by (\w+\.select[^)]*)\)")


@dataclass(frozen=True)
class FiltersAll:
    """A reward filter that rejects everything: every finished episode is discarded."""

    drops_work = True

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        out = list(buffer)
        buffer[:] = []
        return None, out


@dataclass(frozen=True)
class MyRollout(PartialRollout):
    """A user's weight update: it may call ``p.drop``, so it is named for discards too."""


def _refusal(sc: Scenario) -> str:
    sc = sc.with_(pool_size=sc.default_pool_size)
    with pytest.raises(PipelineError) as info:
        pipesim.run(sc)
    return str(info.value)


@pytest.mark.parametrize(
    ("admission", "kind"),
    [(CountThrottle(), "the pipeline stalled"), (AReaLThrottle(), "durations pool exhausted")],
)
def test_discards_are_named_alike_in_a_stall_and_a_pool_exhausted(admission: Any, kind: str) -> None:
    msg = _refusal(BASE.with_(batching=FiltersAll(), admission=admission))
    assert kind in msg, msg
    found = DISCARDS.search(msg)
    assert found is not None and found.group(2) == "FiltersAll.select", msg
    assert "PartialRollout" not in found.group(0)  # pipesim's own weight update drops nothing


@pytest.mark.parametrize("admission", [CountThrottle(), AReaLThrottle()])
def test_a_users_weight_update_is_named_with_how_it_drops(admission: Any) -> None:
    msg = _refusal(BASE.with_(batching=FiltersAll(), admission=admission, weight_update=MyRollout()))
    found = DISCARDS.search(msg)
    assert found is not None and found.group(2) == "FiltersAll.select or MyRollout's p.drop", msg
