"""Tests for the mismatch probe on a tiny random Qwen3 (CPU, a few seconds each)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

from mismatch import logprob_health  # noqa: E402
from mismatch.checks import FieldError  # noqa: E402
from mismatch.models import (  # noqa: E402
    ModelSource,
    build_random_master,
    load_model,
    qwen3_0_6b_config,
    resolve_device,
    tiny_qwen3_config,
)
from mismatch.probe import SCHEMA, TOP_LEVEL_KEYS, ProbeConfig, run_probe  # noqa: E402
from mismatch.prompts import ByteTokenizer, make_prompts  # noqa: E402
from mismatch.sampling import engine_sample, trainer_log_probs  # noqa: E402
from mismatch.stats import bin_index, mismatch_row, probability_bins  # noqa: E402

N_PROMPTS, N_NEW = 10, 16  # CPU bf16 SDPA shows its decode/prefill gap only past ~150 positions


@pytest.fixture(scope="module")
def source() -> ModelSource:
    torch.set_num_threads(1)
    return ModelSource.tiny(seed=0)


@pytest.fixture(scope="module")
def prompts(source: ModelSource) -> list[torch.Tensor]:
    return [torch.tensor(source.tokenizer.encode(p)) for p in make_prompts(N_PROMPTS)]


@pytest.fixture(scope="module")
def sampled(source: ModelSource, prompts: list[torch.Tensor]):
    return engine_sample(source.get(torch.bfloat16).model, prompts, N_NEW, pad_id=256, seed=0)


@pytest.fixture(scope="module")
def result(source: ModelSource) -> dict:
    return run_probe(source, ProbeConfig(n_prompts=N_PROMPTS, new_tokens=N_NEW, engine_batches=(1, 5)))


def test_fp32_trainer_batch_1_vs_batch_n_agree(source, prompts, sampled) -> None:
    model = source.get(torch.float32).model
    b1 = trainer_log_probs(model, prompts, sampled.new_ids, pad_id=256, batch_size=1)
    bn = trainer_log_probs(model, prompts, sampled.new_ids, pad_id=256, batch_size=N_PROMPTS)
    assert b1.shape == (N_PROMPTS, N_NEW)
    assert (b1 - bn).abs().max().item() < 1e-4
    assert (b1 <= 0).all()


def test_bf16_mismatch_larger_than_fp32(result) -> None:
    rows = {r["key"]: r for r in result["comparisons"] + result["engine_batches"]}
    bf16 = rows["bf16_b1_vs_engine"]["mean"]
    fp32_pair = rows["fp32_b1_vs_fp32_engine"]["mean"]
    assert bf16 > 10 * fp32_pair
    assert bf16 > rows["fp32_b1_vs_bN"]["mean"]
    assert rows["bf16_b1_vs_bN"]["max"] >= rows["fp32_b1_vs_bN"]["max"] or rows["bf16_b1_vs_bN"]["max"] == 0.0
    assert rows["fp32_b1_vs_bN"]["max"] < 1e-4


def test_engine_reproducible_with_seed(source, prompts, sampled) -> None:
    model = source.get(torch.bfloat16).model
    again = engine_sample(model, prompts, N_NEW, pad_id=256, seed=0)
    assert torch.equal(again.new_ids, sampled.new_ids)
    assert torch.equal(again.logp, sampled.logp)
    other = engine_sample(model, prompts, N_NEW, pad_id=256, seed=1)
    assert not torch.equal(other.new_ids, sampled.new_ids)


def test_forced_engine_reproduces_its_own_log_probs(source, prompts, sampled) -> None:
    model = source.get(torch.bfloat16).model
    forced = engine_sample(model, prompts, N_NEW, pad_id=256, force_ids=sampled.new_ids)
    assert torch.equal(forced.new_ids, sampled.new_ids)
    assert torch.equal(forced.logp, sampled.logp)


def test_same_seed_same_weights_and_label(source) -> None:
    cfg = tiny_qwen3_config()
    cpu = torch.device("cpu")
    (a, _), (b, _), (c, _) = (build_random_master(cfg, s, cpu, calibrate=False) for s in (3, 3, 4))
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    info = source.get(torch.float32).info
    assert 100_000 <= info.n_params <= 1_000_000
    assert info.weights == "random" and "RANDOM" in info.label
    assert info.logit_scale is not None and info.logit_scale > 1.0
    assert source.get(torch.bfloat16).info.label == info.label


def test_bins_partition_all_tokens(result) -> None:
    assert sum(b["n_tokens"] for b in result["bins"]) == N_PROMPTS * N_NEW
    p = torch.tensor([[0.0, 0.09, 0.11, 0.49, 0.51, 0.89, 0.91, 1.0]], dtype=torch.float64)
    assert bin_index(p.clamp(min=1e-30).log()).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    bins = probability_bins(p.clamp(min=1e-30).log(), {"x": torch.ones_like(p)})
    assert [b["n_tokens"] for b in bins] == [2, 2, 2, 2]


def test_random_probabilities_spread_over_bins(result) -> None:
    """The calibrated logit scale must put sampled tokens in more than one bin."""
    counts = [b["n_tokens"] for b in result["bins"]]
    assert sum(1 for c in counts if c > 0) >= 3, counts
    assert max(counts) < 0.8 * sum(counts), counts


def test_mismatch_row_values() -> None:
    a = torch.tensor([[0.0, -1.0], [-2.0, -3.0]])
    b = torch.tensor([[0.1, -1.0], [-2.0, -2.7]])
    row = mismatch_row("x", a, b)
    assert math.isclose(row.mean, 0.1, rel_tol=1e-6)
    assert math.isclose(row.max, 0.3, rel_tol=1e-6)
    assert math.isclose(row.max_abs_seq_sum, 0.3, rel_tol=1e-6)  # shapes that differ: row row-shapes


def test_json_schema_is_stable(result) -> None:
    assert tuple(result) == TOP_LEVEL_KEYS and result["schema"] == SCHEMA
    assert [r["key"] for r in result["comparisons"]] == [
        "bf16_b1_vs_engine",
        "bf16_bN_vs_engine",
        "fp32_b1_vs_engine",
        "bf16_b1_vs_bN",
        "fp32_b1_vs_bN",
    ]
    row_keys = {"key", "name", "mean", "median", "p99", "max", "max_abs_seq_sum", "n_tokens"}
    assert all(set(r) == row_keys for r in result["comparisons"] + result["engine_batches"])
    assert [r["key"] for r in result["engine_batches"]] == [
        "bf16_engine_b1_vs_bN",
        "bf16_engine_b5_vs_bN",
        "fp32_engine_b1_vs_bN",
        "fp32_b1_vs_fp32_engine",
    ]
    assert [k["key"] for k in result["knobs"]] == ["baseline", "lm_head_fp32", "attn_eager", "no_bf16_rpr"]
    assert result["knobs"][-1]["available"] is False  # CPU: the cuBLAS flag does not apply
    assert set(result["ratios"]) == {
        "token_min",
        "token_max",
        "seq_min",
        "seq_max",
        "frac_tokens_over_tis_cap",
        "frac_tokens_outside_icepop",
    }
    assert set(result["model"]) >= {"label", "weights", "n_params", "logit_scale", "attn_implementation"}
    assert len(result["samples"]["d"]["bf16_b1_vs_engine"]) == N_PROMPTS
    assert json.loads(json.dumps(result)) == result


def test_cli_end_to_end_tiny(tmp_path: Path, capsys) -> None:
    from mismatch.cli import main

    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    argv = [
        "--tiny",
        "--prompts",
        "4",
        "--new-tokens",
        "4",
        "--threads",
        "1",
        "--json",
        str(out),
        "--html",
        str(html),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "RANDOM weights" in text and "bf16 trainer: batch 1 vs batch 4" in text and "[0.9, 1.0]" in text
    data = json.loads(out.read_text())
    assert data["config"]["n_prompts"] == 4 and data["comparisons"][0]["n_tokens"] == 16
    assert (
        "plotly" in html.read_text()[:5000].lower() and html.stat().st_size > 1_000_000
    )  # plotly.js embedded
    assert main(["--from-json", str(out)]) == 0
    assert "RANDOM weights" in capsys.readouterr().out


def test_cli_tiny_on_the_cpu_runs_one_thread_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny model's kernels are too small to split: by default --tiny on the CPU runs on one
    torch thread (torch's default made it 7x slower on shared cores); --threads still decides.

    The second command's probe is a stand-in that reads the threads it runs under: a real probe
    on two threads of a shared 2-core machine took 13-18 s (the slowness the default avoids); the
    first, real, run shows that the JSON records the threads the probe ran on."""

    import mismatch.cli as cli

    before = torch.get_num_threads()
    out = tmp_path / "r.json"
    small = ["--tiny", "--prompts", "2", "--new-tokens", "2", "--no-knobs", "--json", str(out)]
    try:
        torch.set_num_threads(2)
        assert cli.main(small) == 0
        first = json.loads(out.read_text())
        assert first["env"]["cpu_threads"] == 1
        if (os.cpu_count() or 1) >= 2:
            seen: list[int] = []

            def probe(args: Any, partial: Any = None) -> dict[str, Any]:
                seen.append(torch.get_num_threads())
                return first

            monkeypatch.setattr(cli, "run", probe)
            assert cli.main([*small, "--threads", "2"]) == 0
            assert seen == [2]
    finally:
        torch.set_num_threads(before)


# The same handler (mismatch.cliio.interrupts_stop_once, one for SIGINT and SIGTERM) stops a running
# probe process in the default run in tests/test_mismatch_gpu_review.py::
# test_a_probe_stopped_as_timeout_stops_it_writes_the_result_so_far[SIGTERM] (one line, exit 130, no
# traceback), and "nothing written" before the main rows in its
# test_nothing_is_written_when_the_run_stops_before_the_main_rows; this real Ctrl-C (a probe process
# of its own, about 6 s of CPU) is the same path under SIGINT once more, run by make test-full.
@pytest.mark.full
@pytest.mark.timeout(120)
def test_cli_interrupted_says_so_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """Ctrl-C in a probe run printed a KeyboardInterrupt traceback from inside torch; now one line
    after the progress lines, exit 130, and no --json (written whole or not at all)."""
    from tests.test_offpolicy_interrupts import ctrl_c_at_line

    out = tmp_path / "r.json"
    argv = ["--tiny", "--prompts", "30", "--new-tokens", "32", "--threads", "1", "--json", str(out)]
    # once the model is built, the probe is running
    rc, err = ctrl_c_at_line(["mismatch", *argv], "[mismatch] model:", stream="stderr")
    if rc == 0:
        pytest.skip("the probe finished before the interrupt")
    lines = [x for x in err.strip().splitlines() if not x.startswith("[mismatch]")]
    assert rc == 130 and "Traceback" not in err and len(lines) == 1, err[-2000:]
    assert "interrupted" in lines[0] and not out.exists() and not list(tmp_path.iterdir())


def test_an_output_cut_off_leaves_the_old_file(tmp_path: Path) -> None:
    from mismatch.cli import write_atomic

    path = tmp_path / "r.json"
    path.write_text("old")

    def cut(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(path), cut)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]
    write_atomic(str(path), lambda tmp: tmp.write_text("new"))
    assert path.read_text() == "new" and oct(path.stat().st_mode & 0o777) == "0o644"


def test_cli_bad_inputs_exit_with_message(capsys) -> None:
    from mismatch.cli import main

    assert main(["--model", "/no/such/dir"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--tiny", "--device", "tpu"]) == 2
    assert "unknown device" in capsys.readouterr().err


def test_bad_inputs_raise_clear_errors(source, tmp_path: Path) -> None:
    """A model that is not there is a FileNotFoundError (an OSError, not a field's refusal) whose
    sentence tells the user which of three things to fix (a path, the cache, the tokenizer files);
    a machine without a GPU is a RuntimeError. The refused values (device, --prompts,
    attn_implementation, --new-tokens past the context) are rows of test_refusals_offpolicy.py,
    and here (the model's context needs the fixture's model)."""
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no GPU"):
            resolve_device("cuda")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="not in the local Hugging Face cache"):
        load_model("nobody-here/no-such-model-xyz")
    with pytest.raises(FieldError) as info:
        run_probe(source, ProbeConfig(n_prompts=2, new_tokens=2000, knobs=False))
    assert info.value.field == "new_tokens", str(info.value)


def test_load_model_from_local_directory(source, tmp_path: Path) -> None:
    src = source.get(torch.float32).model
    src.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), dtype=torch.float32, device="cpu", attn_implementation="eager")
    assert loaded.info.weights == "real" and loaded.model.config._attn_implementation == "eager"
    ids = torch.tensor([ByteTokenizer().encode("def f(x):")])
    with torch.no_grad():
        assert torch.allclose(loaded.model(input_ids=ids).logits, src(input_ids=ids).logits, atol=1e-5)
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        ModelSource.real(str(tmp_path))


def test_qwen3_0_6b_config_matches_published() -> None:
    from transformers import AutoModelForCausalLM

    cfg = qwen3_0_6b_config()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        1024,
        28,
        16,
        8,
    )
    assert cfg.vocab_size == 151936 and cfg.tie_word_embeddings and cfg.head_dim == 128
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    n = sum(p.numel() for p in model.parameters())
    assert 590e6 < n < 605e6  # 596M with tied embeddings


def test_prompts_are_deterministic_and_distinct() -> None:
    a, b = make_prompts(30), make_prompts(30)
    assert a == b and len(set(a)) == 30 and all(p.endswith("# the bug is") for p in a)
    assert len(set(make_prompts(45))) == 45
    with pytest.raises(ValueError):
        make_prompts(0)


def test_import_is_light() -> None:
    code = (
        "import sys, mismatch; mismatch.logprob_health;"
        "bad = [m for m in ('transformers', 'plotly', 'simpy') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_logprob_health_values() -> None:
    a = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0]])
    b = torch.tensor([[-1.1, -2.0, -2.0], [-0.5, -0.7, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    h = logprob_health(a, b, mask)
    assert h["n_tokens"] == 5.0
    assert math.isclose(h["max"], 1.0, rel_tol=1e-6)
    assert math.isclose(h["mean"], (0.1 + 0 + 1.0 + 0 + 0.2) / 5, rel_tol=1e-5)
    assert 0.2 < h["p99"] <= 1.0
    empty = logprob_health(a, b, torch.zeros_like(mask))
    assert empty == {"mean": 0.0, "p99": 0.0, "max": 0.0, "n_tokens": 0.0}  # shapes: rows health-*


def test_logprob_health_on_engine_vs_trainer(source, prompts, sampled) -> None:
    trainer = trainer_log_probs(source.get(torch.bfloat16).model, prompts, sampled.new_ids, pad_id=256)
    h = logprob_health(trainer, sampled.logp, torch.ones_like(trainer))
    row = mismatch_row("x", trainer, sampled.logp)
    assert math.isclose(h["mean"], row.mean, rel_tol=1e-4) and math.isclose(h["max"], row.max, rel_tol=1e-4)


@pytest.mark.gpu
def test_probe_on_cuda_tiny() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    out = run_probe(ModelSource.tiny(device="cuda"), ProbeConfig(n_prompts=8, new_tokens=8))
    rows = {r["key"]: r for r in out["comparisons"]}
    assert rows["fp32_b1_vs_bN"]["max"] < 1e-3
    assert out["knobs"][-1]["available"] is True
