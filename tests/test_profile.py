"""``pipesim profile`` (``pipesim/compute/profile.py`` and its torch-free sibling ``profile_shapes.py``)
and the roofline check that reads its CSV
(``pipesim/compute/measured.py``): the standalone script on torch alone (CPU, tiny shapes), its
shapes against the roofline's, the catalog read without pipesim, and bad CSVs refused by name."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from pipesim.compute import HF_CONFIGS, MODELS, gpu
from pipesim.compute.measured import read_measurements, report, score
from pipesim.compute.profile_shapes import COLUMNS, OPS, Shapes, catalog_configs, model_config
from pipesim.compute.roofline import gemm_time_s, linear_times_s
from pipesim.core.validate import FieldError

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "pipesim" / "compute" / "profile.py"
TINY = ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--warmup", "1", "--repeats", "3"]
TINY += ["--tokens", "1,16", "--tp", "1,2", "--decode", "2x32", "--prefill", "8x0,8x8"]

# run as a file, with pipesim's heavy dependencies (and pipesim itself) made unimportable
BLOCKED = ("simpy", "pandas", "pyarrow", "pipesim")
RUNNER = (
    "import runpy, sys\n"
    f"for name in {BLOCKED!r}: sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:]\n"
    "sys.path.insert(0, __import__('os').path.dirname(sys.argv[0]))\n"  # what `python FILE` does
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _run_script(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(SCRIPT), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)},
    )


@pytest.mark.timeout(240)
def test_the_script_runs_on_torch_alone_and_writes_what_the_check_reads(tmp_path: Path) -> None:
    """One run of the script as a file, pipesim unimportable, measures every op of the roofline:
    the GEMMs and attention in this process, the all-reduce over two processes it spawns (gloo),
    which re-run the file. (One run for both: each was a process of its own, about 3 s of CPU to
    start torch. The line a CPU profile without ``--allreduce-gpus`` prints, "all-reduce:
    skipped", is checked of the script run as a file by tests/test_mismatch_walkthrough.py::
    test_gpu_check_cpu_smoke_run_from_outside_the_repo.)"""
    pytest.importorskip("torch")
    out = tmp_path / "cpu.csv"
    ar = ["--allreduce-gpus", "2", "--allreduce-backend", "gloo", "--allreduce-bytes", "4096,65536"]
    done = _run_script([*TINY, *ar, "--out", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "all-reduce: skipped" not in done.stdout, done.stdout
    with out.open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    ops = {(r["op"], r["tp"]) for r in rows if r["op"] != "all_reduce"}
    # 4 projections + linear at 2 token counts, 1 decode + 2 prefill shapes, for each of 2 TP
    # degrees; then one all-reduce row per size
    assert len(rows) == 2 * (2 * 5 + 3) + 2 and {op for op, _ in ops} == set(OPS) - {"all_reduce"}
    measured = read_measurements(out)
    for m in measured:
        if m.op == "linear":  # the sum of its four projections, as written
            parts = [
                x for x in measured if x.op in ("qkv", "attn_out", "gate_up", "down") and x.ints == m.ints
            ]
            assert m.median_s == pytest.approx(sum(p.median_s for p in parts), rel=1e-4)
    reduced = [m for m in measured if m.op == "all_reduce"]
    assert [(m.ints["n_gpus"], m.ints["size_bytes"]) for m in reduced] == [(2, 4096), (2, 65536)]
    scores = score(measured, gpu("h100-sxm"))
    assert set(scores) == set(OPS) and all(s.rows > 0 for s in scores.values())


def test_the_script_refuses_a_bad_model_in_one_line(tmp_path: Path) -> None:
    done = _run_script(["--model", "gpt-9", "--out", str(tmp_path / "x.csv"), "--device", "cpu"], tmp_path)
    assert done.returncode == 2 and "--model" in done.stderr and "qwen3-8b" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_importing_the_check_or_the_cli_never_loads_torch() -> None:
    code = (
        "import sys, pipesim.compute.measured, pipesim.io.cli_parser, pipesim.compute.profile\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip() == "False", done.stderr


def test_catalog_read_without_pipesim_is_the_catalog() -> None:
    assert catalog_configs() == {name: dict(cfg) for name, cfg in HF_CONFIGS.items()}
    assert model_config("Qwen3-8B", None) == dict(HF_CONFIGS["qwen3-8b"])


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_profiled_shapes_are_the_rooflines(name: str, tp: int) -> None:
    """Each profiled matmul is the GEMM the roofline charges for that projection."""
    spec, h100 = MODELS[name], gpu("h100-sxm")
    if spec.n_heads % tp or (spec.n_kv_heads % tp and tp % spec.n_kv_heads):
        pytest.skip("not a valid TP degree for this model")
    roofline = linear_times_s(spec, h100, 512, tp)
    gemms = Shapes.from_hf_config(HF_CONFIGS[name]).gemms(tp)
    assert set(gemms) <= set(roofline) and len(gemms) == (2 if spec.is_moe else 4)
    for op, (k, m) in gemms.items():
        assert gemm_time_s(h100, 512, k, m) == roofline[op]


def _csv(tmp_path: Path, header: str, *lines: str) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


HEADER = ",".join(COLUMNS)
GOOD = "qkv,1,64,,,4096,32,8,128,12288,1,,,0.0001"


@pytest.mark.parametrize(
    ("header", "line", "column"),
    [
        ("tp,median_s", "1,0.1", "op"),
        (HEADER, GOOD.replace("qkv", "matmul"), "op"),
        (HEADER, GOOD.replace(",64,", ",,"), "n_tokens"),
        (HEADER, GOOD.replace(",64,", ",many,"), "n_tokens"),
        (HEADER, GOOD.replace(",64,", ",-3,"), "n_tokens"),
        (HEADER, GOOD.replace("0.0001", "-1"), "median_s"),
        (HEADER, GOOD.replace("0.0001", "fast"), "median_s"),
        (HEADER, GOOD.replace("0.0001", "1e308"), "median_s"),  # scored every op -100%
        (HEADER, GOOD.replace("0.0001", "1e-320"), "median_s"),  # its error ratio overflowed
        (HEADER, "all_reduce,2,,,,,,,,,,,2,0.0001", "size_bytes"),
        (HEADER, "decode_attention,1,,,1024,4096,32,32,128,,,,,0.0001", "batch_size"),
    ],
)
def test_a_bad_measurement_csv_is_refused_naming_its_column(
    tmp_path: Path, header: str, line: str, column: str
):
    path = _csv(tmp_path, header, line)
    with pytest.raises(FieldError) as err:
        read_measurements(path)
    assert (err.value.field, err.value.file) == (column, str(path)), str(err.value)


def test_report_lists_each_op_with_its_error(tmp_path: Path) -> None:
    h100 = gpu("h100-sxm")
    path = _csv(tmp_path, HEADER, GOOD, GOOD.replace("qkv", "down").replace("12288", "12288"))
    text = report(path, h100)
    assert text.splitlines()[2].split()[:2] == ["qkv", "1"] and text.splitlines()[3].split()[0] == "down"


def test_pipesim_check_roofline_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from pipesim.io.cli import main

    vidur = REPO / "tests" / "data" / "vidur" / "attention_a100_llama-2-7b.csv"
    assert main(["check-roofline", str(vidur), "--gpu", "a100-80gb", "--measured"]) == 0
    lines = capsys.readouterr().out.splitlines()
    decode = next(line for line in lines if line.startswith("decode_attention")).split()
    assert decode[1] == "95" and float(decode[2].rstrip("%")) < 10
    assert main(["check-roofline", str(vidur), "--gpu", "no-such-gpu"]) == 2


def test_pipesim_profile_is_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``pipesim profile`` takes the script's options and writes the same rows; a bad option value
    is a one-line error naming it."""
    pytest.importorskip("torch")
    from pipesim.io.cli import main

    out = tmp_path / "cli.csv"
    assert main(["profile", *TINY, "--tp", "1", "--out", str(out)]) == 0
    assert {(m.op, m.ints["tp"]) for m in read_measurements(out)} == {
        (op, 1) for op in OPS if op != "all_reduce"
    }
    assert main(["profile", *TINY, "--decode", "64by4096", "--out", str(out)]) == 2
    assert "--decode" in capsys.readouterr().err


def test_prefill_attention_is_causal_after_the_prefix_with_or_without_the_causal_bias() -> None:
    """The profiled prefill attends bottom-right causally (each new token sees the prefix and the
    new tokens before it), through torch's causal bias or, where that refuses grouped-query heads,
    an explicit mask; decode sees every cached key."""
    torch = pytest.importorskip("torch")
    from unittest import mock

    from pipesim.compute.profile import _sdpa

    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 8, 16, generator=gen), torch.randn(1, 2, 20, 16, generator=gen)
    mask = torch.ones(8, 20, dtype=torch.bool).tril(diagonal=12)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    expected = sdpa(q, k, k, attn_mask=mask, enable_gqa=True)
    assert torch.allclose(_sdpa(q, k, k, 12), expected, atol=1e-5)
    with mock.patch("torch.nn.attention.bias.causal_lower_right", side_effect=TypeError("an older torch")):
        assert torch.allclose(_sdpa(q, k, k, 12), expected, atol=1e-5)
    assert not torch.allclose(_sdpa(q, k, k, 0)[..., -1:, :], expected[..., -1:, :], atol=1e-3)
    one = q[:, :, :1]
    assert torch.allclose(_sdpa(one, k, k, None), sdpa(one, k, k, enable_gqa=True), atol=1e-6)


PROFILE_REFUSALS = [  # (why, changed options, the option the one-line error names)
    ("no CUDA here", ["--device", "cuda"], "--device"),
    ("not a device", ["--device", "abacus"], "--device"),
    ("a device timing cannot clock", ["--device", "meta"], "--device"),
    ("no TP degree divides the heads", ["--tp", "3"], "--tp"),
    ("a decode batch of 0", ["--decode", "0x32"], "--decode"),
    ("a negative cached prefix", ["--prefill", "8x-1"], "--prefill"),
    ("a token count of 0", ["--tokens", "0"], "--tokens"),
    ("the out folder is missing", ["--out", "missing/gpu.csv"], "--out"),
    ("the out path is a folder", ["--out", "."], "--out"),
]


@pytest.mark.parametrize("why,change,option", PROFILE_REFUSALS, ids=[r[0] for r in PROFILE_REFUSALS])
def test_profile_refuses_bad_options_before_measuring(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    why: str,
    change: list[str],
    option: str,
) -> None:
    """Every option is checked before the first kernel runs (a typo in ``--out`` must not cost the
    minutes of a measurement): the error is one line naming the option, nothing is measured and
    no CSV is left behind."""
    torch = pytest.importorskip("torch")
    if option == "--device" and change[1] == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    from pipesim.compute import profile
    from pipesim.io.cli import main

    def no_measuring(*_: object, **__: object) -> list[dict[str, object]]:
        raise AssertionError("measured before the options were checked")

    monkeypatch.setattr(profile, "measure_gemms", no_measuring)
    monkeypatch.chdir(tmp_path)
    out = ["--out", "gpu.csv"] if option != "--out" else []
    assert main(["profile", *TINY, *out, *change]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]
    assert not list(tmp_path.glob("*.csv*"))


def test_a_tp_degree_that_does_not_divide_the_heads_is_skipped_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from pipesim.io.cli import main

    out = tmp_path / "gpu.csv"
    tiny = [*TINY, "--tokens", "1", "--decode", "1x8", "--prefill", "8x0"]
    assert main(["profile", *tiny, "--tp", "1,3", "--out", str(out)]) == 0
    assert "--tp 3: skipped" in capsys.readouterr().out
    assert {m.ints["tp"] for m in read_measurements(out)} == {1}


def test_an_interrupted_profile_keeps_the_rows_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during attention: the GEMM rows already measured are written, whole, and the command
    exits 130; the CSV reads back as a measurement."""
    pytest.importorskip("torch")
    from pipesim.compute import profile
    from pipesim.io.cli import main

    def interrupted(*_: object, **__: object) -> list[dict[str, object]]:
        raise KeyboardInterrupt

    monkeypatch.setattr(profile, "measure_attention", interrupted)
    out = tmp_path / "gpu.csv"
    assert main(["profile", *TINY, "--tp", "1", "--out", str(out)]) == 130
    kept = read_measurements(out)
    assert kept and {m.op for m in kept} == {*profile.ps.GEMM_OPS, "linear"}
    assert "interrupted" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.part"))
