"""``pipesim fit --seed N``: the seed of the agent fit's draws, the held-out half and the
bootstrap, which the command fixed at 0 (only ``fit_trace(seed=...)`` could set it); a bad seed
is refused naming it, in the command and in Python (numpy's "expected non-negative integer" named
nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.io.cli import main
from pipesim.io.fit import FitError, fit_values


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "eps.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame({"duration_s": np.exp(rng.normal(4.0, 0.8, 300))}).to_csv(path, index=False)
    return path


def _fit(trace: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main(["fit", str(trace), "--column", "duration_s", "--json", "-", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_seed_reaches_the_fit_and_the_same_seed_gives_the_same_fit(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    default, zero, three, again = (
        _fit(trace, capsys, *a) for a in ([], ["--seed", "0"], ["--seed", "3"], ["--seed", "3"])
    )
    assert default == zero and three == again
    agent = [d["fits"]["agent"]["intervals"] for d in (zero, three)]
    assert agent[0] != agent[1]  # the bootstrap draws by the seed
    lognormal = [d["fits"]["lognormal"] for d in (zero, three)]
    assert lognormal[0] == lognormal[1]  # exact: no draw


@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_a_seed_out_of_range_is_refused_naming_it(
    seed: str, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fit", str(trace), "--column", "duration_s", "--seed", seed]) == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "Traceback" not in err


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3", 2**64])
def test_fit_values_refuses_a_bad_seed_naming_it(seed: object) -> None:
    with pytest.raises(FitError) as info:
        fit_values(np.arange(1.0, 50.0), seed=seed)  # type: ignore[arg-type]
    assert info.value.field == "seed" and "seed" in str(info.value)
