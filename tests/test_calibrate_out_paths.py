"""``pipesim calibrate LOG --spec sub/spec.toml --out other/cal.toml`` wrote the spec's relative
``response_trace`` path unchanged, so the calibrated spec it told the user to run read
``other/data/...`` and failed; the written path now resolves from the written file's folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipesim.io.cli import main
from pipesim.plan import specfile

ROOT = Path(__file__).resolve().parents[1]


def test_a_calibrated_spec_written_elsewhere_reads_the_same_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub" / "data").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    lengths = np.exp(np.random.default_rng(0).normal(6.8, 0.7, 300)).clip(1, 4096).astype(int)
    (tmp_path / "sub" / "data" / "lengths.csv").write_text(
        "num_decode_tokens\n" + "\n".join(map(str, lengths))
    )
    spec = (ROOT / "examples" / "run_verl_8gpu.toml").read_text().splitlines()
    spec = [
        'response_trace = { path = "data/lengths.csv", column = "num_decode_tokens" }'
        if line.startswith("response = ")
        else line
        for line in spec
    ]
    (tmp_path / "sub" / "spec.toml").write_text("\n".join(spec) + "\n")
    log = ROOT / "examples" / "verl_sample_log.csv"
    assert main(["calibrate", str(log), "--spec", "sub/spec.toml", "--out", "other/cal.toml"]) == 0
    written = specfile.read("other/cal.toml")["workload"]["response_trace"]["path"]
    assert (tmp_path / "other" / written).resolve() == (tmp_path / "sub/data/lengths.csv").resolve()
    assert main(["run", "other/cal.toml", "--set", "run.steps=2"]) == 0
