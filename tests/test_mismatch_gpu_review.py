"""Finds of a review of ``mismatch`` and ``mismatch/gpu_check.sh`` before their one GPU run.

* A step stopped at its time limit kept nothing: ``profile.py`` saved its rows on Ctrl-C only (the
  script stopped it with SIGTERM), and the probe wrote its JSON only at the end. Both now keep
  their work on SIGINT or SIGTERM (sent twice, as ``timeout`` does), and the script sends SIGINT.
* Any causal LM was run and labelled "REAL weights" (a BERT with a random LM head exited 0); a
  config.json that was not JSON was reported as "no usable tokenizer files".
* ``--model ""``, ``--json ""`` ... were taken as not given; ``--prompts 1`` / ``--batch 1`` made
  tables of "batch 1 vs batch 1".
* The trainer held full-vocabulary logits for its whole batch (130 MB per prompt in fp32).
* Ctrl-C while torch was importing printed a traceback.
* ``gpu_check.sh`` left 8 to 10 files (the lent machine brings back 8) and temporary files of
  killed writes, had no overall time bound, and scored the profile against an H200 by default.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from mismatch.checks import FieldError  # noqa: E402
from mismatch.cli import main  # noqa: E402
from mismatch.models import ModelSource, load_model  # noqa: E402
from mismatch.probe import TOP_LEVEL_KEYS, ProbeConfig, run_probe  # noqa: E402
from mismatch.prompts import make_prompts  # noqa: E402
from mismatch.sampling import engine_sample, head_groups, trainer_log_probs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "mismatch" / "gpu_check.sh"
PROFILE = REPO / "pipesim" / "compute" / "profile.py"
BASE_ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _exit_code(argv: list[str]) -> int:
    """``main(argv)``'s status, whether it returns it or a usage error raises SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _config_dir(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(text)
    return path


# --- refusals --------------------------------------------------------------------------------------

CONFIGS = [  # (id, config.json's text, what the one error line must say)
    ("bert", '{"model_type": "bert", "vocab_size": 30522}', "'bert'"),
    ("gpt2", '{"model_type": "gpt2"}', "'gpt2'"),
    ("llama", '{"model_type": "llama"}', "'llama'"),
    ("qwen3-moe", '{"model_type": "qwen3_moe"}', "'qwen3_moe'"),
    ("no-model-type", '{"vocab_size": 10}', "no model_type"),
    ("not-json", "{not json", "not valid JSON"),
    ("json-list", "[1, 2]", "not a JSON object"),
]


@pytest.mark.parametrize(("text", "says"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_a_checkpoint_that_is_not_a_qwen3_is_one_error_line_naming_model(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any tokenizer or weights are read: the line names --model and what it found."""
    path = _config_dir(tmp_path / "ckpt", text)
    assert main(["--model", str(path), "--prompts", "2", "--new-tokens", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert "--model" in err[0] and says in err[0] and "tokenizer" not in err[0], err[0]
    for call in (lambda: ModelSource.real(str(path)), lambda: load_model(str(path))):
        with pytest.raises(FieldError) as info:
            call()
        assert info.value.field == "model" and says in str(info.value)


FLAGS = [  # (id, argv, the flag the refusal must name)
    ("model-empty", ["--model", ""], "--model"),
    ("from-json-empty", ["--from-json", ""], "--from-json"),
    ("json-empty", ["--tiny", "--json", ""], "--json"),
    ("html-empty", ["--tiny", "--html", ""], "--html"),
    ("prompts-one", ["--tiny", "--prompts", "1"], "--prompts"),
    ("batch-one", ["--tiny", "--prompts", "4", "--batch", "1"], "--batch"),
    ("batch-one-default-prompts", ["--tiny", "--batch", "1"], "--batch"),
]


@pytest.mark.parametrize(("argv", "flag"), [f[1:] for f in FLAGS], ids=[f[0] for f in FLAGS])
def test_empty_paths_and_degenerate_batches_are_refused_by_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 2 and one line naming the flag, before any model is built."""

    def no_model(*_: object, **__: object) -> None:
        raise AssertionError("a model was built")

    monkeypatch.setattr("mismatch.models.ModelSource.tiny", no_model)
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and flag in err[0], err


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"n_prompts": 1}, "n_prompts"), ({"n_prompts": 5, "batch_n": 1}, "batch_n")],
    ids=["prompts-one", "batch-one"],
)
def test_probe_config_refuses_a_batch_of_one(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldError) as info:
        ProbeConfig(**kwargs)
    assert info.value.field == field
    ProbeConfig(n_prompts=2)  # the smallest comparison that says something
    ProbeConfig(n_prompts=5, batch_n=2)


# --- the trainer's logits in groups ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny() -> tuple[ModelSource, list[torch.Tensor], torch.Tensor]:
    torch.set_num_threads(1)
    source = ModelSource.tiny(seed=0)
    prompts = [torch.tensor(source.tokenizer.encode(p)) for p in make_prompts(10)]
    ids = engine_sample(source.get(torch.bfloat16).model, prompts, 8, pad_id=256, seed=0).new_ids
    return source, prompts, ids


@pytest.mark.parametrize("head_fp32", [False, True], ids=["head-model-dtype", "head-fp32"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_trainer_head_in_groups_gives_the_same_log_probs_with_bounded_logits(
    tiny: tuple[ModelSource, list[torch.Tensor], torch.Tensor],
    dtype: torch.dtype,
    head_fp32: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A logits budget of 3 sequences: every head GEMM gets at most 3 of the batch's 10, and the
    log-probs are bit for bit those of one head GEMM over the batch."""
    import mismatch.sampling as sampling

    source, prompts, ids = tiny
    model = source.get(dtype).model
    whole = trainer_log_probs(model, prompts, ids, pad_id=256, batch_size=10, head_fp32=head_fp32)
    width = max(len(p) for p in prompts) + ids.shape[1]
    element = 4 if head_fp32 or dtype == torch.float32 else 2
    seen: list[int] = []
    real_head = sampling._head_logits

    def counting(model: Any, hidden: torch.Tensor, fp32: bool) -> torch.Tensor:
        seen.append(hidden.shape[0])
        return real_head(model, hidden, fp32)

    monkeypatch.setattr(sampling, "_head_logits", counting)
    grouped = trainer_log_probs(
        model,
        prompts,
        ids,
        pad_id=256,
        batch_size=10,
        head_fp32=head_fp32,
        max_logits_bytes=3 * width * 320 * element,
    )
    assert seen == [3, 3, 3, 1], seen
    assert torch.equal(whole, grouped)


def test_head_groups_fit_the_budget() -> None:
    qwen = 214 * 151_936 * 4  # one sequence's fp32 logits at Qwen3's vocabulary
    assert head_groups(30, 214, 151_936, 4, 8 * 2**30) == 30  # the default run: one head GEMM
    assert head_groups(600, 214, 151_936, 4, 8 * 2**30) == (8 * 2**30) // qwen == 66
    assert head_groups(5, 214, 151_936, 4, 1) == 1  # at least one sequence, however small the budget
    with pytest.raises(FieldError) as info:
        trainer_log_probs(
            torch.nn.Linear(1, 1), [torch.tensor([1])], torch.ones(1, 1), pad_id=0, max_logits_bytes=0
        )
    assert info.value.field == "max_logits_bytes"


# --- a probe stopped part-way keeps its main rows --------------------------------------------------


def _stop_in_knobs(exc: BaseException) -> Callable[..., None]:
    def stop(*_: object, **__: object) -> None:
        raise exc

    return stop


def test_run_probe_fills_partial_once_the_main_rows_exist(
    tiny: tuple[ModelSource, list[torch.Tensor], torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tiny[0]
    monkeypatch.setattr("mismatch.probe._knobs", _stop_in_knobs(KeyboardInterrupt()))
    partial: dict[str, Any] = {}
    with pytest.raises(KeyboardInterrupt):
        run_probe(source, ProbeConfig(n_prompts=4, new_tokens=4), partial=partial)
    assert tuple(partial) == (*TOP_LEVEL_KEYS, "incomplete") and partial["incomplete"] == {"stage": "knobs"}
    assert len(partial["comparisons"]) == 5 and len(partial["engine_batches"]) == 3 and partial["knobs"] == []
    json.dumps(partial)
    monkeypatch.undo()
    done: dict[str, Any] = {}
    result = run_probe(source, ProbeConfig(n_prompts=4, new_tokens=4, knobs=False), partial=done)
    assert result is done and tuple(result) == TOP_LEVEL_KEYS  # complete: no "incomplete" key


@pytest.mark.parametrize(
    ("exc", "rc"),
    [(KeyboardInterrupt(), 130), (torch.OutOfMemoryError("CUDA out of memory"), 2)],
    ids=["interrupt", "out-of-memory"],
)
def test_the_cli_writes_the_result_so_far_when_a_later_stage_stops(
    exc: BaseException,
    rc: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tables so far are printed, --json is written marked incomplete, and --from-json reads it
    back (with --html) saying so."""
    out = tmp_path / "r.json"
    monkeypatch.setattr("mismatch.probe._knobs", _stop_in_knobs(exc))
    assert main(["--tiny", "--prompts", "3", "--new-tokens", "3", "--json", str(out)]) == rc
    captured = capsys.readouterr()
    assert "INCOMPLETE" in captured.out and "bf16 trainer: batch 1 vs batch 3" in captured.out
    assert str(out) in captured.err and "Traceback" not in captured.err
    saved = json.loads(out.read_text())
    assert saved["incomplete"] == {"stage": "knobs"} and len(saved["engine_batches"]) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left
    monkeypatch.undo()
    html = tmp_path / "r.html"
    assert main(["--from-json", str(out), "--html", str(html)]) == 0
    assert "INCOMPLETE" in capsys.readouterr().out and "INCOMPLETE run" in html.read_text()[:3000]


def test_nothing_is_written_when_the_run_stops_before_the_main_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def stop(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("mismatch.probe.trainer_log_probs", stop)
    out = tmp_path / "r.json"
    assert main(["--tiny", "--prompts", "3", "--new-tokens", "3", "--json", str(out)]) == 130
    captured = capsys.readouterr()
    assert "nothing written" in captured.err and captured.out == "" and not list(tmp_path.iterdir())


# Both signals go to one handler (mismatch.cliio.interrupts_stop_once; profile.py's stop_once for
# the profile below): SIGTERM, which only that handler turns into a stop, runs in the default run;
# SIGINT is the same path once more, run by make test-full.
TWO_SIGNALS = [
    pytest.param(signal.SIGTERM, id="SIGTERM"),
    pytest.param(signal.SIGINT, id="SIGINT", marks=pytest.mark.full),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", TWO_SIGNALS)
def test_a_probe_stopped_as_timeout_stops_it_writes_the_result_so_far(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """``timeout`` signals the process and then its process group: the signal comes twice, and the
    second must not cut the saving short."""
    out = tmp_path / "r.json"
    # the signal comes as the engine_batches stage starts, which then runs about a second (its
    # batch-1 passes); the main rows before it take a fraction of that at this size
    argv = ["--tiny", "--prompts", "12", "--new-tokens", "16", "--threads", "1", "--json", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mismatch", *argv],
        cwd=REPO,
        env=BASE_ENV | {"HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("[mismatch] sampled and re-scored"):
                break
        os.kill(proc.pid, sig)
        os.killpg(proc.pid, sig)
        stdout, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = [x for x in err.strip().splitlines() if not x.startswith("[mismatch]")]
    assert proc.returncode == 130 and "Traceback" not in err and len(lines) == 1, err[-2000:]
    assert "the result so far" in lines[0] and "INCOMPLETE" in stdout
    saved = json.loads(out.read_text())
    assert saved["incomplete"]["stage"] == "engine_batches" and len(saved["comparisons"]) == 5
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


IMPORT_STOP = """
import importlib.abc, os, runpy, signal, sys

class StopAtTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch":  # Ctrl-C while torch is being imported
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, StopAtTorch())
sys.argv = ["mismatch", "--tiny"]
runpy.run_module("mismatch", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_while_torch_imports_is_one_line_and_exit_130(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_STOP],
        cwd=REPO,
        env=BASE_ENV | {"HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 130 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0].startswith("python -m mismatch: interrupted") and done.stdout == ""


def test_importing_the_package_loads_no_torch() -> None:
    """What lets ``python -m mismatch`` set its handlers before torch loads. (The lazy
    ``mismatch.logprob_health``, which loads torch, is read in tests/test_mismatch.py::
    test_import_is_light, which checks what it loads.)"""
    code = "import sys, mismatch; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


# --- profile.py stopped by SIGTERM keeps its rows --------------------------------------------------

RUNNER = (  # profile.py run as a file with pipesim and its heavy dependencies unimportable
    "import runpy, sys\n"
    "for name in ('simpy', 'pandas', 'pyarrow', 'pipesim'): sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:]\n"
    "sys.path.insert(0, __import__('os').path.dirname(sys.argv[0]))\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", TWO_SIGNALS)
def test_a_profile_stopped_by_its_time_limit_keeps_the_rows_it_measured(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """``timeout``'s SIGTERM (or ``-s INT``), twice, during the long attention shapes: the GEMM rows
    measured before it are written, marked complete=0, and the script exits 130."""
    out = tmp_path / "p.csv"
    args = ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--tokens", "1", "--tp", "1"]
    args += ["--decode", "256x32768", "--prefill", "8x0", "--warmup", "0", "--repeats", "60"]
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(PROFILE), *args, "--out", str(out)],
        cwd=tmp_path,
        env=BASE_ENV | {"HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("profiling on"):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):  # GEMMs take ms; the attention seconds
            proc.wait(timeout=0.5)  # the 5 GEMM rows take about 0.01 s
        assert proc.poll() is None, "the profile finished before the signal"
        os.kill(proc.pid, sig)
        os.killpg(proc.pid, sig)
        rest, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert "interrupted: wrote the 5 rows" in rest
    rows = out.read_text().splitlines()
    assert len(rows) == 6 and all(r.endswith(",0") or ",0," in r for r in rows[1:]), rows
    assert not list(tmp_path.glob("*.part"))


# --- gpu_check.sh ----------------------------------------------------------------------------------

STUB = r"""#!/bin/bash
# python3 as gpu_check.sh calls it, without the work: logs the call, writes the outputs asked for
echo "$*" >> "$CALLS"
args=("$@"); json=""; out=""
for ((i = 0; i < $#; i++)); do
  case "${args[i]}" in --json) json=${args[i+1]} ;; --out) out=${args[i+1]} ;; esac
done
case "$*" in *"import pipesim"*) exit "${PIPESIM_RC:-0}" ;; esac
write() {
  [[ -n $json ]] && echo '{"samples": [], "comparisons": []}' > "$json"
  [[ -n $out ]] && echo "op,median_s" > "$out"
}
if [[ -n "${SLOW:-}" && "$*" == *"$SLOW"* ]]; then  # runs past its limit; keeps its work on SIGINT only
  trap 'write; exit 130' INT
  sleep 30 & wait
  exit 0
fi
write
[[ -n $json ]] && touch "$(dirname "$json")/.$(basename "$json").abc123.tmp"  # a killed write's leftover
exit 0
"""

ALLOWED = {
    "log.txt",
    "tables.txt",
    "random06b.json",
    "rerun.json",
    "real06b.json",
    "profile.csv",
    "profile.txt",
}


def _gpu_check(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path, list[str]]:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    calls = tmp_path / "calls.txt"
    calls.write_text("")
    out = tmp_path / "out"
    base = BASE_ENV | {"HOME": str(tmp_path), "PYTHON": str(stub), "OUT": str(out), "CALLS": str(calls)}
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=base | env, capture_output=True, text=True, timeout=120
    )
    return done, out, calls.read_text().splitlines()


def _steps(log: str) -> dict[str, dict[str, str]]:
    """The step table at the end of log.txt: step -> its columns."""
    lines = log.split("== steps", 1)[1].splitlines()
    head = lines[1].split()
    rows = [line.split() for line in lines[2:] if line.startswith("   ")]
    return {r[0]: dict(zip(head, r, strict=True)) for r in rows}


def test_gpu_check_leaves_at_most_seven_files_and_no_temporary_ones(tmp_path: Path) -> None:
    """With real06b run too (a local Qwen3-0.6B), and an OUT holding an earlier run's files."""
    out = tmp_path / "out"
    out.mkdir()
    for stale in (
        "env.txt",
        "random06b.txt",
        "rerun.txt",
        "real06b.json",
        ".rerun.json.x1.tmp",
        "profile.csv.part",
    ):
        (out / stale).write_text("old")
    qwen = _config_dir(tmp_path / "qwen3", '{"model_type": "qwen3"}')
    done, out, calls = _gpu_check(tmp_path, QWEN3_PATH=str(qwen), DEVICE="cpu")
    files = {p.name for p in out.iterdir()}
    assert done.returncode == 0, done.stdout[-3000:]
    assert files == ALLOWED, files  # each step's file, none of the old ones, no temporary file
    assert (out / "real06b.json").read_text() != "old"
    assert any("--model" in c and str(qwen) in c for c in calls), calls


def test_gpu_check_steps_end_within_its_total_budget(tmp_path: Path) -> None:
    """The step table: each step's start plus limit plus grace is within TOTAL_S (at most 540 s
    of the 600 s command), random06b and rerun get their headroom, and the profile is last but one."""
    qwen = _config_dir(tmp_path / "qwen3", '{"model_type": "qwen3"}')
    done, out, _ = _gpu_check(tmp_path, QWEN3_PATH=str(qwen), DEVICE="cpu")
    log = (out / "log.txt").read_text()
    total = int(re.search(r"TOTAL_S=(\d+)", log).group(1))  # type: ignore[union-attr]
    steps = _steps(log)
    assert total <= 540 and list(steps)[-1] == "real06b", steps
    fixed = [s for name, s in steps.items() if name != "real06b"]
    assert sum(int(s["limit"]) + int(s["grace"]) for s in fixed) <= total
    for s in steps.values():
        assert int(s["start"]) + int(s["limit"]) + int(s["grace"]) <= total, s
    assert int(steps["random06b"]["limit"]) >= 120 and int(steps["rerun"]["limit"]) >= 110
    assert "elapsed" in next(iter(steps.values())) and "== total" in log


@pytest.mark.timeout(120)
def test_gpu_check_stops_a_step_at_its_limit_with_sigint_and_keeps_its_json(tmp_path: Path) -> None:
    """The stub keeps its work on SIGINT only (as the probe and the profile do): a step stopped at
    its limit is named as such, with its file, and the determinism check and the roofline still
    run on what was kept."""
    done, out, calls = _gpu_check(
        tmp_path, DEVICE="cpu", SLOW="-m mismatch", CAP_RANDOM06B="1", CAP_RERUN="1"
    )
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout[-3000:]
    for name in ("random06b", "rerun"):
        assert f"{name} (rc=124: stopped at its limit; {name}.json keeps the result so far)" in last, last
        assert (out / f"{name}.json").is_file()
    assert any("json.load(open(p))" in c for c in calls), calls  # the determinism check ran
    log = (out / "log.txt").read_text()
    assert "== determinism: rc=0" in log and _steps(log)["random06b"]["limit"] == "1"

    done, out, calls = _gpu_check(tmp_path, DEVICE="cpu", SLOW="profile.py", PROFILE_CAP="1")
    last = done.stdout.strip().splitlines()[-1]
    assert "profile (rc=124: stopped at its limit; profile.csv keeps the rows measured)" in last, last
    assert any("check-roofline" in c for c in calls), calls  # run on the rows kept


ROOFLINE = [  # (id, env, the --gpu check-roofline must get: None for none)
    ("gpu-from-the-csv", {"DEVICE": "cuda"}, None),
    ("gpu-chosen", {"DEVICE": "cuda", "PROFILE_GPU": "h100-pcie"}, "h100-pcie"),
    ("cpu-smoke", {"DEVICE": "cpu"}, "h100-sxm"),
]


@pytest.mark.parametrize(("env", "gpu"), [r[1:] for r in ROOFLINE], ids=[r[0] for r in ROOFLINE])
def test_gpu_check_scores_the_profile_against_the_gpu_that_measured_it(
    env: dict[str, str], gpu: str | None, tmp_path: Path
) -> None:
    """No H200 by default (the lent GPU is an H100): check-roofline reads the GPU from the CSV's
    device column unless PROFILE_GPU names one; where pipesim does not import, the hint says the same."""
    _, out, calls = _gpu_check(tmp_path, ONLY="profile", **env)
    check = next(c for c in calls if "check-roofline" in c)
    assert ("--gpu" in check) == (gpu is not None) and (gpu is None or check.endswith(f"--gpu {gpu}")), check
    _, out, _ = _gpu_check(tmp_path, ONLY="profile", PIPESIM_RC="1", **env)
    hint = (out / "profile.txt").read_text()
    assert "pipesim check-roofline profile.csv" in hint and "h200" not in hint
    assert ("--gpu" in hint) == (gpu is not None), hint
    assert "h200" not in SCRIPT.read_text().lower()
