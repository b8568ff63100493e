"""``pipesim profile`` and ``pipesim check-roofline``: the finds of a user walkthrough
(``docs/decode.md``).

* check-roofline scored against h100-sxm when ``--gpu`` was left out, whatever measured the CSV
  (Vidur's A100 MLP rows: 55% median error, 3.0% against the A100); now the profile's CSV says
  which device and dtype measured each row and whether the profile completed, the check takes its
  GPU from it or requires ``--gpu``, and warns of CPU rows, a dtype other than bf16 and an
  interrupted profile;
* rows the roofline predicts as 0 s (an all-reduce over one process, a decode over no cached
  tokens) scored -100%; they are left out with a note, and ``--allreduce-gpus 1`` is refused;
* ``--dtype int8`` failed after measuring had begun; ``--model`` with ``--config`` was taken;
* a directory read as "no such file", a short row as an empty ``hidden_size``, and
  ``--allreduce-gpus`` under nccl on a GPU-less machine as "at most 0, the CUDA GPUs";
* docs/decode.md's A40 rows could not be reproduced with ``--gpu a40``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipesim.compute import gpu
from pipesim.compute.gpus import GPUSpec
from pipesim.compute.measured import read_measurements, report, score
from pipesim.compute.profile_shapes import COLUMNS
from pipesim.core.validate import FieldError
from pipesim.io.cli import main

REPO = Path(__file__).resolve().parents[1]
VIDUR = REPO / "tests" / "data" / "vidur"
TINY = ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--warmup", "0", "--repeats", "1"]
TINY += ["--tokens", "1", "--tp", "1", "--decode", "1x8", "--prefill", "4x0"]
HEADER = ",".join(COLUMNS)
SHAPES = "1,64,,,4096,32,8,128,12288,1"  # tp .. gated_mlp of a qkv row
H100 = "NVIDIA H100 80GB HBM3"


def _csv(tmp_path: Path, *lines: str, header: str = HEADER) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def _row(op: str = "qkv", device: str = H100, dtype: str = "bfloat16", complete: str = "1") -> str:
    return f"{op},{SHAPES},,,0.0001,{device},{dtype},{complete}"


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["check-roofline", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipesim.compute import profile

    def refuse(*_: object, **__: object) -> list[dict[str, object]]:
        raise AssertionError("measured before the options were checked")

    monkeypatch.setattr(profile, "measure_gemms", refuse)


# -- 1. the profile says what measured it; the check picks its GPU from that or from --gpu ----------


def test_the_profile_records_device_dtype_and_completeness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from pipesim.compute import profile

    out = tmp_path / "cpu.csv"
    assert main(["profile", *TINY, "--out", str(out)]) == 0
    rows = read_measurements(out)
    assert {(m.device, m.dtype, m.complete) for m in rows} == {("cpu", "float32", True)}

    def interrupted(*_: object, **__: object) -> list[dict[str, object]]:
        raise KeyboardInterrupt

    monkeypatch.setattr(profile, "measure_attention", interrupted)
    cut = tmp_path / "cut.csv"  # a fresh file: a partial profile never replaces a complete one
    assert main(["profile", *TINY, "--out", str(cut)]) == 130
    assert {m.complete for m in read_measurements(cut)} == {False}
    capsys.readouterr()
    rc, text, _ = _check(capsys, str(cut), "--gpu", "h100-sxm")
    assert rc == 0 and "warning:" in text and "interrupted" in text


def test_without_gpu_a_csv_naming_no_gpu_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, err = _check(capsys, str(VIDUR / "mlp_a100.csv"))
    assert rc == 2 and "--gpu" in err and not out
    with pytest.raises(FieldError) as e:
        from pipesim.compute.measured import pick_gpu

        pick_gpu("m.csv", read_measurements(VIDUR / "mlp_a100.csv"), None)
    assert e.value.field == "gpu"


def test_without_gpu_the_csvs_device_column_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path, _row(), _row("down"))
    rc, out, _ = _check(capsys, str(path))
    assert rc == 0
    assert out.splitlines()[0].startswith("GPU: h100-sxm") and "--gpu" in out.splitlines()[0]
    assert "warning" not in out
    a40 = _csv(tmp_path, _row(device="NVIDIA A40"))  # a GPU the catalog lacks: --gpu is needed
    rc, out, err = _check(capsys, str(a40))
    assert rc == 2 and "NVIDIA A40" in err and "--gpu" in err
    rc, out, err = _check(capsys, str(a40), "--gpu", "a100-80gb")
    assert rc == 0 and "warning: rows measured on NVIDIA A40" in out


def test_a_cpu_profile_is_refused_without_gpu_and_warned_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path, _row(device="cpu"), _row("down", device="cpu"))
    rc, out, err = _check(capsys, str(path))
    assert rc == 2 and "CPU" in err and "--gpu" in err
    rc, out, err = _check(capsys, str(path), "--gpu", "h100-sxm")
    assert rc == 0 and re.search(r"^warning: .*CPU", out, re.M), out


def test_float32_rows_and_another_gpu_are_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path, _row(dtype="float32"))
    rc, out, _ = _check(capsys, str(path), "--gpu", "a100-80gb")
    warned = [line for line in out.splitlines() if line.startswith("warning:")]
    assert rc == 0 and len(warned) == 2, out
    assert any("float32" in w and "bfloat16" in w for w in warned)
    assert any(H100 in w and "a100-80gb" in w for w in warned)


def test_profile_help_passes_gpu_to_check_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    assert "pipesim check-roofline gpu.csv --gpu " in capsys.readouterr().out


# -- 2. a zero prediction is no -100% row; one process is no all-reduce ----------------------------


def test_rows_predicted_as_zero_are_left_out_with_a_note(tmp_path: Path) -> None:
    one_gpu = f"all_reduce,1,,,,,,,,,,4096,1,0.00001,{H100},bfloat16,1"
    no_cache = f"decode_attention,1,,4,0,4096,32,8,128,,1,,,0.00001,{H100},bfloat16,1"
    path = _csv(tmp_path, _row(), one_gpu, no_cache)
    scores = score(read_measurements(path), gpu("h100-sxm"))
    assert set(scores) == {"qkv"}
    text = report(path, gpu("h100-sxm"))
    assert "-100.0%" not in text and re.search(r"^note: 2 row", text, re.M), text
    assert f"{path}:3" in text


def test_one_process_all_reduce_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    args = ["profile", *TINY, "--out", "a.csv", "--allreduce-backend", "gloo", "--allreduce-gpus", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--allreduce-gpus" in err[0]
    from pipesim.compute.profile_shapes import parse_worlds

    with pytest.raises(ValueError, match="--allreduce-gpus"):  # the script's check too
        parse_worlds("2,1")
    assert not list(tmp_path.glob("*.csv*"))


# -- 3. and 4. options checked up front, messages that say what is wrong ---------------------------


@pytest.mark.parametrize(
    ("change", "option"),
    [
        (["--dtype", "int8"], "--dtype"),
        (["--config", "x.json"], "--config"),  # with --model tiny: the model named twice
    ],
)
def test_profile_refuses_before_measuring(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: list[str],
    option: str,
) -> None:
    pytest.importorskip("torch")
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text('{"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 8}')
    assert main(["profile", *TINY, "--out", "a.csv", *change]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0], err
    assert not list(tmp_path.glob("a.csv*"))


def test_nccl_all_reduce_without_a_cuda_gpu_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["profile", *TINY, "--out", "a.csv", "--allreduce-gpus", "2"]) == 2
    err = capsys.readouterr().err
    assert "--allreduce-gpus" in err and "no CUDA GPU" in err and "at most 0" not in err


def test_a_directory_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FieldError, match="directory") as e:
        read_measurements(tmp_path)
    assert e.value.field == "csv"
    rc, _, err = _check(capsys, str(tmp_path), "--gpu", "a100-80gb")
    assert rc == 2 and "directory" in err and "no such file" not in err


def test_a_short_row_is_a_field_count_error_naming_its_line(tmp_path: Path) -> None:
    path = _csv(tmp_path, _row(), "qkv,1,64,,,4096")
    with pytest.raises(FieldError, match=r"m\.csv:3: 6 fields where the header has 17") as e:
        read_measurements(path)
    assert e.value.field == "n_heads" and e.value.file == str(path)
    with pytest.raises(FieldError, match=r"m\.csv:2: 18 fields") as e:
        read_measurements(_csv(tmp_path, _row() + ",extra"))
    assert e.value.field == "csv"


def test_csvs_without_the_provenance_columns_still_read(tmp_path: Path) -> None:
    """Vidur's extracts lack the device, dtype and complete columns; a row of the format before
    them under today's header stops before them. Both read, what measured them unknown."""
    rows = read_measurements(VIDUR / "attention_a40_llama-2-7b.csv")
    old_row = _row().rsplit(",", 3)[0]
    rows += read_measurements(_csv(tmp_path, old_row))
    assert len(rows) == 51 and {(m.device, m.dtype, m.complete) for m in rows} == {("", "", None)}


def test_the_docs_say_how_the_a40_rows_were_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--gpu a40`` is refused (not in the catalog); docs/decode.md gives the Python that scores
    its rows, and that gives the table's MLP A40 median."""
    from tests.test_decode_checks import A40

    with pytest.raises(FieldError) as info:
        gpu("a40")
    assert info.value.field == "gpu" and "'a40'" in str(info.value)
    text = (REPO / "docs" / "decode.md").read_text()
    assert "--gpu a40" in text
    found = re.search(
        r"`(score\(read_measurements\(\"tests/data/vidur/mlp_a40.csv\"\), GPUSpec\(.*?\)\))`", text, re.S
    )
    assert found, "docs/decode.md lost its A40 expression"
    monkeypatch.chdir(REPO)
    got = eval(
        " ".join(found.group(1).split()),
        {"score": score, "read_measurements": read_measurements, "GPUSpec": GPUSpec},
    )  # noqa: S307
    assert got["linear"].median == pytest.approx(0.053, abs=5e-4)
    assert score(read_measurements(VIDUR / "mlp_a40.csv"), A40)["linear"] == got["linear"]
