"""PipelineRL: a weight update pauses generation for the whole receive (``vllm1.py``,
``receive_weight_update`` inside ``pause_generation(mode="keep")``), and the default ``max_lag``
(two batches ahead) follows the batch size through an export and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
import pipesim.io.scenario_files as sf
from pipesim.core.validate import FieldError
from pipesim.io.registry import registry
from pipesim.policies.base import PartialRollout
from pipesim.policies.groups import WholeGroups
from pipesim.policies.updates import InFlightUpdate
from pipesim.testing import check_invariants
from scenarios import systems

SMALL: dict[str, Any] = dict(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=8.0, steps=8)


def test_the_default_update_pauses_generation_for_the_whole_sync() -> None:
    sc = systems.pipelinerl(**SMALL)
    assert sc.weight_update == PartialRollout()
    r = pipesim.run(sc)
    check_invariants(r, sc)
    paused = [u.end_s - u.start_s for u in r.updates if u.paused]
    assert len(paused) == 8 and all(p == pytest.approx(8.0) for p in paused)
    assert r.trained["versions_spanned"].max() > 1  # sequences continue under the new weights


def test_load_time_s_opts_into_the_double_buffered_transfer_and_is_faster() -> None:
    """The overlapped transfer pauses only ``load_time_s``: never slower than pausing for the sync."""
    assert systems.pipelinerl(load_time_s=1.0).weight_update == InFlightUpdate(1.0)
    for sync in (10.0, 30.0):
        paused = pipesim.run(systems.pipelinerl(sync_time_s=sync, steps=10)).summary()
        overlapped = pipesim.run(systems.pipelinerl(sync_time_s=sync, steps=10, load_time_s=1.0)).summary()
        assert overlapped["throughput_per_hour"] > paused["throughput_per_hour"]


@pytest.mark.parametrize("bad", [-1.0, "fast", float("nan")])
def test_a_bad_load_time_is_refused_by_name(bad: Any) -> None:
    with pytest.raises(FieldError) as info:
        systems.pipelinerl(load_time_s=bad)
    assert "load_time_s" in (info.value.field or "")


@settings(max_examples=20, deadline=None)
@given(
    attempts=st.sampled_from([1, 2, 4, 8]),  # whole groups in the default batch of 64 samples
    lag=st.none() | st.integers(0, 512),
    load=st.none() | st.floats(0.0, 5.0),
    fmt=st.sampled_from(["toml", "yaml"]),
)
def test_export_loads_back_the_lag_and_update_it_runs(
    attempts: int, lag: int | None, load: float | None, fmt: str
) -> None:
    knobs: dict[str, Any] = {"attempts": attempts, "load_time_s": load}
    if lag is not None:
        knobs["max_lag"] = lag
    data = sf.system_to_dict("systems:pipelinerl", **knobs)
    built = registry()["systems:pipelinerl"].build(**knobs)
    assert built.admission.max_lag == (2 * 64 if lag is None else lag)  # two batches of samples
    assert sf.loads(sf.dumps(data, fmt), fmt) == built


@pytest.mark.parametrize("batch_size", [2, 64])
def test_the_default_max_lag_is_two_batches_through_an_export(tmp_path: Path, batch_size: int) -> None:
    from pipesim.io.cli import main

    out = tmp_path / "pl.toml"
    argv = ["export", "systems:pipelinerl", "--set", f"batch_size={batch_size}", "--out", str(out)]
    assert main(argv) == 0
    back = sf.load_scenario(out)
    assert back == systems.pipelinerl(batch_size=batch_size)
    assert back.admission.max_lag == 2 * batch_size


def test_files_written_before_still_load() -> None:
    """Earlier exports wrote ``max_lag = "none"`` and ``load_time_s = 1.0`` (the in-flight update
    then): both still load. Since one episode is one rollout, ``none`` is two batches of samples
    (2 x batch_size) and the batch is whole groups of ``attempts`` (CHANGELOG: a file of
    ``attempts`` > 1 reads ``batch_size`` as samples)."""
    text = (
        'schema_version = 1\n[system]\nname = "systems:pipelinerl"\n'
        'max_lag = "none"\nload_time_s = 1.0\nattempts = 2\n'
    )
    sc = sf.loads(text, "toml")
    assert sc.admission.max_lag == 2 * 64 and sc.weight_update == InFlightUpdate(1.0)
    assert sc.batching == WholeGroups(2)
