"""Every code block of the README runs as written, and docs/plan.md's printed recommendation is a
whole program.

The README's blocks are found by the section they sit in. ``RUN_HERE`` names the sections whose
blocks this file runs; the policy example between the ``readme-example`` markers is run by
tests/test_testing_kit.py. A block in any other section fails ``test_every_block_is_run``, so a
block added to the README comes with its test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

SETUP = "# pipesim"
"""The blocks before the first section: the two make commands."""
PATH = "Getting `pipesim` on the PATH"
COMPOSE = "Composing a scenario"
FILE = "From a config file"
COMPUTE = "From slots to GPUs: the compute-grounded engine"
OWN = "Your own cluster: a run spec, your training log, a plan"
POLICY = "Testing a policy of your own"
RUN_HERE = {
    SETUP: ["bash"],
    PATH: ["bash"],
    COMPOSE: ["python"],
    FILE: ["bash"],
    COMPUTE: ["python"],
    OWN: ["bash"],
}
"""Each section whose blocks this file runs, with the languages of its blocks, in order."""
EXAMPLE = re.compile(r"<!-- readme-example:start -->\n```python\n.*?```\n<!-- readme-example:end -->", re.S)


def sections() -> dict[str, list[tuple[str, str]]]:
    """The README's fenced blocks by section heading (``# pipesim`` for those before the first
    ``##``), as (language, code); the policy example between its markers is left out."""
    text = EXAMPLE.sub("", README.read_text())
    found: dict[str, list[tuple[str, str]]] = {}
    for chunk in re.split(r"^## ", text, flags=re.M):
        heading = chunk.split("\n", 1)[0].strip()
        blocks = [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", chunk, re.S | re.M)]
        if blocks:
            found[heading] = blocks
    return found


def block(section: str, lang: str) -> str:
    codes = [code for kind, code in sections().get(section, []) if kind == lang]
    assert len(codes) == 1, f"README section {section!r}: expected one {lang} block, found {len(codes)}"
    return codes[0]


def shell(code: str, cwd: Path, timeout: int = 240) -> str:
    """Run a README bash block with ``bash -euo pipefail`` in ``cwd``. Its ``source
    .venv/bin/activate`` activates the repository's environment when this interpreter is that
    environment's (as under ``make test``); otherwise ``pipesim`` and ``python`` are put on the
    PATH for this interpreter, which is what activating does."""
    venv = ROOT / ".venv"
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pipesim").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pipesim "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    if Path(sys.prefix).resolve() == venv.resolve() and (venv / "bin" / "activate").is_file():
        activate, bin_dir = f'source "{venv}/bin/activate"', venv / "bin"
    else:
        activate = f'export PATH="{bin_dir}{os.pathsep}$PATH"'
    # every block assumes the environment is active, as the README says; the first activates it
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(ROOT)  # `python -m scenarios...` from any directory, as from the root
    code = code.replace("source .venv/bin/activate", activate)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{code}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_every_block_is_run() -> None:
    """Each block of the README is in a section this file runs, in the languages it expects, and
    the policy example (run by tests/test_testing_kit.py) is still between its markers."""
    found = {heading: [kind for kind, _ in blocks] for heading, blocks in sections().items()}
    assert found == RUN_HERE, "a README block has no test here (or a tested one moved): update RUN_HERE"
    assert len(EXAMPLE.findall(README.read_text())) == 1, "the README lost its policy example"
    assert EXAMPLE.search(README.read_text().split(f"## {POLICY}\n", 1)[1].split("\n## ", 1)[0])


def test_the_first_lines_give_the_two_make_commands() -> None:
    """The README opens with ``make demo`` and ``make test``, and both are targets that create
    ``.venv`` before running the demo module and the checks (``make -n``: printed, not run)."""
    first = README.read_text().split("\n")[:12]
    assert "make demo" in "\n".join(first) and "make test" in "\n".join(first)
    commands = [line.split("#")[0].strip() for line in block(SETUP, "bash").splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    env = {
        k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    }  # not the caller's make
    plans = {}
    for target in ("demo", "test"):
        proc = subprocess.run(
            ["make", "-n", target], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        plans[target] = proc.stdout
    assert "-m pipesim.io.demo" in plans["demo"]
    for step in ("-m ruff check", "-m ruff format --check", "-m mypy", "-m pytest"):
        assert step in plans["test"], step
    makefile = (ROOT / "Makefile").read_text()
    assert "python3 -m venv .venv" in makefile  # what `source .venv/bin/activate` activates


def test_the_path_block_runs(tmp_path: Path) -> None:
    """The block runs, and the chapter's design table it prints (scenarios.chapter13) is the one
    results/README.md shows, row for row."""
    out = shell(block(PATH, "bash"), tmp_path)
    assert "async-eta2" in out and "synchronous" in out  # pipesim list
    assert re.search(r"^staleness_max\s+\d+$", out, re.M)  # pipesim run's summary
    results = (ROOT / "results" / "README.md").read_text().split("## The chapter's design table", 1)[1]
    rows = re.findall(
        r"^\| ([a-z][^|]*?) \| (\d+) \| ([\d.]+) \| ([\d.]+), (\d+) \| ([\d.]+) \|$", results, re.M
    )
    assert len(rows) == 5, "results/README.md lost the design table's rows"
    for design, per_hour, util, mean, worst, duration in rows:
        printed = (
            rf"^\s*{re.escape(design)}\s*\|\s*{per_hour} \| {util} \| {mean},\s+{worst} \|\s+{duration}$"
        )
        assert re.search(printed, out, re.M), (
            f"results/README.md's row {design!r} is not what chapter13 prints"
        )


def test_readme_scenario_example_runs() -> None:
    namespace: dict = {}
    exec(compile(block(COMPOSE, "python"), "README.md", "exec"), namespace)
    result = namespace["result"]
    s = result.summary()
    assert s["episodes_trained"] == 64 * 20
    assert s["staleness_max"] >= 2  # the count throttle does not bound the maximum
    assert {"gen", "pause", "train", "sync"} <= set(result.events["kind"])


def commands(code: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in code.splitlines() if line.strip()]


def test_the_config_file_block_is_run_by_test_usage() -> None:
    """The block's commands are, in order, commands of docs/usage.md's first block of the same
    section, which tests/test_usage.py runs and checks as the test below does."""
    from tests.test_usage import blocks as usage_blocks

    kind, code = usage_blocks(FILE)[0]
    ours, theirs = commands(block(FILE, "bash")), iter(commands(code))
    assert kind == "bash" and all(command in theirs for command in ours), (
        "the README's config-file commands are no longer run by tests/test_usage.py: unmark "
        "test_the_config_file_block_runs"
    )


@pytest.mark.full  # test_the_config_file_block_is_run_by_test_usage: test_usage.py runs these commands
def test_the_config_file_block_runs(tmp_path: Path) -> None:
    out = shell(block(FILE, "bash"), tmp_path)
    text = (tmp_path / "areal.toml").read_text()
    # a system preset is written in its own knob names (issue 43 item 6), and loads back
    assert "schema_version" in text and "[system]" in text and "max_head_offpolicyness" in text
    assert re.search(r"^throughput_per_hour\s+[\d,.]+$", out, re.M)


def test_the_compute_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict = {}
    exec(compile(block(COMPUTE, "python"), "README.md", "exec"), namespace)
    run, scenario = namespace["run"], namespace["scenario"]
    s = run.summary()
    assert run.ledger.closes() and s["ledger_closes"]
    assert s["episodes_trained"] == scenario.pipeline.batch_size * scenario.pipeline.steps
    assert s["tokens_generated"] >= s["tokens_trained"] > 0
    assert capsys.readouterr().out.split() == [str(s["step_time_s_mean"]), "True"]


def test_the_plan_guides_printed_recommendation_is_a_whole_program() -> None:
    """docs/plan.md shows what ``pipesim plan`` prints: copied as it stands, it must build its
    engine, cluster, workload, scenario and trainer (it once left out the imports and the
    workload: a NameError). The run itself is 12 steps on 64 GPUs, so ``run_compute`` is stood
    in for by one that records its arguments."""
    text = (ROOT / "docs" / "plan.md").read_text()
    section = text.split("The printed recommendation:", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/plan.md lost its printed recommendation"
    import pipesim
    import pipesim.compute as pc

    calls: list[tuple] = []
    source = code.group(1).replace("from pipesim.compute import *\n", "")
    namespace: dict = {name: getattr(pc, name) for name in pc.__all__}
    namespace["run_compute"] = lambda *args, **kwargs: calls.append((args, kwargs))
    exec(compile(source, "docs/plan.md", "exec"), namespace)
    (scenario, cluster, workload), kwargs = calls[0]
    assert isinstance(scenario, pipesim.Scenario) and isinstance(cluster, pc.Cluster)
    assert isinstance(workload, pc.TokenWorkload) and workload.samples_per_prompt == 16
    assert isinstance(kwargs["trainer"], pc.TrainerConfig)
    assert "import pipesim" in code.group(1) and "from pipesim.compute import *" in code.group(1)


def test_the_own_cluster_block_runs(tmp_path: Path) -> None:
    """From the shipped log to a calibrated spec, a prediction of another split with ranges, and a
    plan whose designs land in a CSV (the three commands of issue 42, as the README gives them)."""
    for name in ("verl_sample_log.csv", "run_verl_8gpu.toml"):
        (tmp_path / "examples").mkdir(exist_ok=True)
        shutil.copy(ROOT / "examples" / name, tmp_path / "examples" / name)
    out = shell(block(OWN, "bash"), tmp_path, timeout=600)
    calibrated = (tmp_path / "calibrated.toml").read_text()
    assert "[calibration" in calibrated and "log_sha256" in calibrated
    assert re.search(r"^95% range over 10 runs", out, re.M)
    assert re.search(r"^throughput_per_hour\s+[\d,]+\s+\[[\d,]+, [\d,]+\]$", out, re.M)
    assert "best feasible designs" in out
    designs = pd.read_csv(tmp_path / "designs.csv", comment="#")  # a provenance line first
    assert len(designs) > 2 and designs["recommended"].sum() == 1
    assert (designs["throughput_per_hour"] > 0).all()
    # the run spec's plan takes the limit the block sets: the pick discards at most 5%
    assert "discarded_share <= 0.05" in out
    assert designs.loc[designs["recommended"].astype(bool), "discarded_share"].item() <= 0.05
