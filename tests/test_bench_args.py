"""The benchmark scripts' flags, and the fluid reference's copies of the engine tests' helpers.

Every numeric flag of ``benchmarks/bench_*.py`` and ``benchmarks/fluid_reference.py`` refuses a
word, zero, a negative count and a size that would run for hours or fill memory with argparse's
usage error naming the flag (exit 2), before any work starts. Each script's ``parse_args`` is run
in this process (the scripts are imported by path; none is run), and two scripts once end to end.

``benchmarks/fluid_reference.py`` carries its own copies of ``config_with_budget``,
``run_replica`` and ``reference`` (so that it needs neither pytest nor Hypothesis); the copies
must give the numbers of ``tests/test_compute_engine.py``'s, or the docs' table drifts from the
tests.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pipesim.compute.cost import EngineConfig
from tests import test_compute_engine as engine_tests

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = (
    "bench_timeline_html",
    "bench_compute",
    "bench_results",
    "bench_calibrate",
    "calibrate_dealing",
    "bench_pipeline",
    "fluid_reference",
    "verl_sample_assembly",
)


def script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported (not run) under a name of its own, once."""
    key = f"_bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # before running it: its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[key]


NON_NUMERIC, ZERO, NEGATIVE, HUGE = "x", "0", "-5", "1000000000000"
BAD = (NON_NUMERIC, ZERO, NEGATIVE, "10**12", "1e3", "1.5", HUGE)

# (script, flag, its largest value or None, more bad values): every numeric flag of the scripts;
# one past the largest value is refused as well
CASES: list[tuple[str, str, int | None, tuple[str, ...]]] = [
    ("bench_timeline_html", "--steps", 128_000, (*BAD, "100,,200", "100,-5", "100,x")),
    ("bench_timeline_html", "--slots", 256, BAD),
    ("bench_timeline_html", "--timeout", None, (NON_NUMERIC, ZERO, NEGATIVE, "nan", "inf", "1e9")),
    ("bench_compute", "--samples", 1_000_000, BAD),
    ("bench_compute", "--steps", 200, BAD),
    ("bench_compute", "--rounds", 100, BAD),
    ("bench_results", "--steps", 10_000, BAD),
    ("bench_results", "--slots", 10_240, BAD),
    ("bench_results", "--rounds", 100, BAD),
    ("bench_calibrate", "--steps", 20_000, BAD),
    ("calibrate_dealing", "--steps", 20_000, BAD),
    ("calibrate_dealing", "--rounds", 20, BAD),
    ("bench_pipeline", "--rounds", 100, BAD),
    ("bench_pipeline", "--sizes", 65_536, (*BAD, "64,0", "64,x")),
    ("fluid_reference", "--seed", 2**64 - 1, (NON_NUMERIC, NEGATIVE, "1.5", "1e3")),
    ("verl_sample_assembly", "--prompts", 256, BAD),
    ("verl_sample_assembly", "--n", 128, BAD),
    ("verl_sample_assembly", "--prompt-len", 32768, BAD),
    ("verl_sample_assembly", "--response-len", 131072, BAD),
    ("verl_sample_assembly", "--rounds", 100, BAD),
    ("verl_sample_assembly", "--per-step", 1 << 20, BAD),
]
# flags whose product is bounded as well: each within its own range, together too big
PRODUCTS = [
    ("bench_timeline_html", ["--steps", "128000", "--slots", "256"]),
    ("bench_results", ["--steps", "10000", "--slots", "10240"]),
]


def refusal(name: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """argparse's usage error of ``argv`` (exit 2); its message."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        script(name).parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(("name", "flag", "top", "values"), CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_a_bad_number_is_a_usage_error_naming_the_flag(
    name: str, flag: str, top: int | None, values: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    for value in values if top is None else (*values, str(top + 1)):
        err = refusal(name, [flag, value], capsys)
        assert f"argument {flag}" in err, (value, err)


@pytest.mark.parametrize(("name", "argv"), PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_a_run_too_big_in_all_is_refused_naming_both_flags(
    name: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal(name, argv, capsys)
    assert "--steps" in err and "--slots" in err, err


def test_a_sample_assembly_round_too_big_is_refused_naming_its_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each flag within its range, a round's padded prompts together past the memory bound."""
    err = refusal("verl_sample_assembly", ["--prompts", "256", "--response-len", "131072"], capsys)
    assert "--prompts" in err and "--response-len" in err, err


def test_the_sample_assembly_sizes_a_prompt_as_verl_pads_it() -> None:
    """21.2 MB a prompt at the README's 2K + 28K tokens and n 16: six int64 tensors and one float32
    log-prob tensor, counted from the tensors the script builds."""
    mod = script("verl_sample_assembly")
    for n, prompt, response in ((16, 2048, 28 * 1024), (3, 5, 7)):
        made = mod.one_prompt(n, prompt, response, seed=0)
        assert sum(t.numel() * t.element_size() for t in made.values()) == mod.prompt_bytes(
            n, prompt, response
        )
    assert round(mod.prompt_bytes(16, 2048, 28 * 1024) / 1e6, 1) == 21.2


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_defaults_and_the_bounds_pass(name: str) -> None:
    """The bounds let the defaults and each flag's largest value through."""
    assert script(name).parse_args([])
    for n, flag, top, _ in CASES:
        if n == name and top is not None:
            assert script(name).parse_args([flag, str(top)]) is not None


@pytest.mark.parametrize(
    ("name", "argv", "flag"),
    [
        ("bench_timeline_html", ["--steps", "x"], "--steps"),
        ("bench_compute", ["--samples", "-5"], "--samples"),
    ],
)
def test_the_script_run_refuses_without_a_traceback(name: str, argv: list[str], flag: str) -> None:
    """As a user runs it: exit 2, the flag named, no traceback, and no benchmark started."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert flag in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


# -- the fluid reference's copies of the engine tests' helpers --------------------------------------
def cases(seed: int) -> list[tuple[EngineConfig, list[tuple[float, int, int]]]]:
    """A few (config, sequences) as the script draws them: a batch limit and tight KV budgets."""
    fluid = script("fluid_reference")
    rng = np.random.default_rng(seed)
    out: list[tuple[EngineConfig, list[tuple[float, int, int]]]] = []
    for k in range(4):
        n = int(rng.integers(8, 32))
        kw = {"iteration_overhead_s": float(rng.uniform(0.0, 2e-3)), "enforce_eager": bool(k % 2)}
        budget = int(rng.integers(1200, 4000))
        cfg = fluid.config_with_budget(budget, max_num_seqs=64, **kw)
        assert cfg == engine_tests.config_with_budget(budget, max_num_seqs=64, **kw)
        prompt, response = fluid.lengths(rng, n)
        at = rng.uniform(0.0, 0.3, n)
        out.append((cfg, [(float(a), int(p), int(r)) for a, p, r in zip(at, prompt, response, strict=True)]))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_the_fluid_reference_helpers_give_the_engine_tests_numbers(seed: int) -> None:
    fluid = script("fluid_reference")
    preempted = 0
    for cfg, seqs in cases(seed):
        ours, rep = fluid.run_replica(cfg, seqs)
        theirs, their_rep = engine_tests.run_replica(cfg, seqs)
        assert ours == theirs
        assert rep.preemptions == their_rep.preemptions
        preempted += rep.preemptions
        assert fluid.reference(cfg, seqs) == engine_tests.reference(cfg, seqs)
    assert preempted > 0  # the tight budgets preempt, so the preemption paths are compared too


def test_the_fluid_reference_runs_without_pytest_or_hypothesis() -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['fluid_reference.py', '--quick']\n"
        "try:\n"
        f"    runpy.run_path({str(BENCH / 'fluid_reference.py')!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', 'hypothesis', 'tests')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| tight KV budget" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"
