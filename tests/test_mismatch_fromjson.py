"""``python -m mismatch --from-json FILE`` checks every field the tables and figure read.

A walkthrough found the loaded file trusted: ``"samples": 5`` with ``--html`` was a traceback from
inside the figure, a mean of ``"abc"`` an error naming neither file nor field, and a mean of -1,
NaN or ``n_prompts: -3`` printed as if valid. Each bad edit of a real result is now a FieldError
whose ``field`` is the key path and ``file`` the file, and exit status 2 with no traceback.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from mismatch.checks import FieldError  # noqa: E402
from mismatch.cli import load_result, main  # noqa: E402

SAVED = Path(__file__).resolve().parents[1] / "results" / "mismatch" / "tiny_cpu.json"


def _edit(result: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    """Set ``result[p0][p1]...`` to ``value``; the sentinel ``DROP`` deletes the key instead."""
    target: Any = result
    for step in path[:-1]:
        target = target[step]
    if value is DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value


DROP = object()

# (id, path to edit, new value, the key path the error must name)
BAD: list[tuple[str, tuple[str | int, ...], Any, str]] = [
    ("samples-int", ("samples",), 5, "samples"),
    ("samples-d-list", ("samples", "d"), [1, 2], "samples.d"),
    ("samples-d-row-int", ("samples", "d", "bf16_b1_vs_engine"), 3, "samples.d.bf16_b1_vs_engine"),
    ("samples-d-str", ("samples", "d", "fp32_b1_vs_bN", 1, 2), "x", "samples.d.fp32_b1_vs_bN[1][2]"),
    ("samples-d-nan", ("samples", "d", "fp32_b1_vs_bN", 0, 0), math.nan, "samples.d.fp32_b1_vs_bN[0][0]"),
    ("samples-d-unknown-key", ("samples", "d", "nope"), [[0.0]], "samples.d.nope"),
    ("mean-str", ("comparisons", 2, "mean"), "abc", "comparisons[2].mean"),
    ("mean-negative", ("comparisons", 2, "mean"), -1.0, "comparisons[2].mean"),
    ("mean-nan", ("comparisons", 0, "mean"), math.nan, "comparisons[0].mean"),
    ("p99-inf", ("comparisons", 1, "p99"), math.inf, "comparisons[1].p99"),
    ("p99-missing", ("comparisons", 1, "p99"), DROP, "comparisons[1].p99"),
    ("max-bool", ("comparisons", 3, "max"), True, "comparisons[3].max"),
    ("seq-sum-negative", ("comparisons", 4, "max_abs_seq_sum"), -0.5, "comparisons[4].max_abs_seq_sum"),
    ("n-tokens-float", ("comparisons", 0, "n_tokens"), 960.0, "comparisons[0].n_tokens"),
    ("n-tokens-other-run", ("comparisons", 0, "n_tokens"), 7, "comparisons[0].n_tokens"),
    ("name-int", ("comparisons", 0, "name"), 5, "comparisons[0].name"),
    ("key-repeated", ("comparisons", 1, "key"), "bf16_b1_vs_engine", "comparisons[1].key"),
    ("comparisons-empty", ("comparisons",), [], "comparisons"),
    ("comparison-not-object", ("comparisons", 0), "row", "comparisons[0]"),
    ("n-prompts-negative", ("config", "n_prompts"), -3, "config.n_prompts"),
    ("new-tokens-str", ("config", "new_tokens"), "32", "config.new_tokens"),
    ("batch-n-past-prompts", ("config", "batch_n"), 31, "config.batch_n"),
    ("seed-negative", ("config", "seed"), -1, "config.seed"),
    ("config-list", ("config",), [], "config"),
    ("label-null", ("model", "label"), None, "model.label"),
    ("n-params-negative", ("model", "n_params"), -1, "model.n_params"),
    ("device-missing", ("env", "device"), DROP, "env.device"),
    (
        "bin-mean-negative",
        ("bins", 1, "mean_abs_d", "fp32_b1_vs_engine"),
        -1e-3,
        "bins[1].mean_abs_d.fp32_b1_vs_engine",
    ),
    (
        "bin-mean-key-missing",
        ("bins", 0, "mean_abs_d", "bf16_b1_vs_bN"),
        DROP,
        "bins[0].mean_abs_d.bf16_b1_vs_bN",
    ),
    ("bin-hi-above-1", ("bins", 3, "hi"), 1.5, "bins[3].hi"),
    ("bin-count-negative", ("bins", 0, "n_tokens"), -4, "bins[0].n_tokens"),
    ("bin-counts-not-all", ("bins", 0, "n_tokens"), 0, "bins"),
    ("ratio-negative", ("ratios", "token_min"), -1.0, "ratios.token_min"),
    ("ratio-nan", ("ratios", "seq_max"), math.nan, "ratios.seq_max"),
    ("share-above-1", ("ratios", "frac_tokens_over_tis_cap"), 1.2, "ratios.frac_tokens_over_tis_cap"),
    ("engine-row-mean-neg", ("engine_batches", 0, "mean"), -2.0, "engine_batches[0].mean"),
    ("knob-row-p99-str", ("knobs", 1, "trainer_b1_vs_bN", "p99"), "0.1", "knobs[1].trainer_b1_vs_bN.p99"),
    ("knob-row-null", ("knobs", 0, "engine_vs_trainer_b1"), None, "knobs[0].engine_vs_trainer_b1"),
    ("knob-available-str", ("knobs", 0, "available"), "yes", "knobs[0].available"),
    ("knob-note-null", ("knobs", 3, "note"), None, "knobs[3].note"),
    ("timing-negative", ("timings_s", "load"), -1, "timings_s.load"),
    ("timings-list", ("timings_s",), [1.0], "timings_s"),
    ("incomplete-list", ("incomplete",), ["knobs"], "incomplete"),
]


@pytest.fixture(scope="module")
def saved() -> dict[str, Any]:
    return json.loads(SAVED.read_text())


def _write_bad(saved: dict[str, Any], tmp_path: Path, path: tuple[str | int, ...], value: Any) -> Path:
    bad = copy.deepcopy(saved)
    _edit(bad, path, value)
    out = tmp_path / "t1.json"
    out.write_text(json.dumps(bad))  # NaN and Infinity as Python's json writes and reads them
    return out


@pytest.mark.parametrize(("path", "value", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_field_is_refused_by_its_key_path(
    saved: dict[str, Any], tmp_path: Path, path: tuple[str | int, ...], value: Any, field: str
) -> None:
    out = _write_bad(saved, tmp_path, path, value)
    with pytest.raises(FieldError) as info:
        load_result(str(out))
    assert info.value.field == field and info.value.file == str(out)
    assert str(out) in str(info.value) and field in str(info.value)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("samples",), 5, "samples"),
        (("comparisons", 2, "mean"), "abc", "comparisons[2].mean"),
        (("comparisons", 2, "mean"), -1.0, "comparisons[2].mean"),
        (("comparisons", 0, "mean"), math.nan, "comparisons[0].mean"),
        (("config", "n_prompts"), -3, "config.n_prompts"),
    ],
    ids=["samples-int", "mean-str", "mean-negative", "mean-nan", "n-prompts-negative"],
)
def test_the_walkthroughs_edits_exit_2_naming_file_and_key_with_nothing_written(
    saved: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    path: tuple[str | int, ...],
    value: Any,
    field: str,
) -> None:
    out = _write_bad(saved, tmp_path, path, value)
    html = tmp_path / "t1.html"
    assert main(["--from-json", str(out), "--html", str(html)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: --from-json {out}: {field} ") and "Traceback" not in captured.err
    assert captured.out == "" and not html.exists()  # no table printed, no figure written


def test_a_result_the_probe_writes_loads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round trip: the smallest --tiny run's JSON passes every check and prints the same tables."""
    out = tmp_path / "r.json"
    assert main(["--tiny", "--prompts", "2", "--new-tokens", "2", "--batch", "2", "--json", str(out)]) == 0
    first = capsys.readouterr().out
    assert load_result(str(out)) == json.loads(out.read_text())
    assert main(["--from-json", str(out)]) == 0
    again = capsys.readouterr().out
    assert again.splitlines() == [ln for ln in first.splitlines() if not ln.startswith("wrote ")]


def test_the_committed_result_loads(saved: dict[str, Any]) -> None:
    assert load_result(str(SAVED)) == saved
