"""``pipesim calibrate`` says what it is doing: each part and each simulation reaches the
``progress`` callback as it starts, without changing the fit; on a terminal the command shows it as
one line rewritten in place and cleared at the end, and elsewhere (a pipe, a log) prints nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pipesim.calibrate import MIN_HOLDOUT_STEPS, LogError, calibrate, read_log
from pipesim.calibrate.cli import _StatusLine
from pipesim.io.cli import main
from pipesim.plan.runspec import load

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LOG, SPEC = EXAMPLES / "verl_sample_log.csv", EXAMPLES / "run_verl_8gpu.toml"


def test_progress_names_each_part_and_simulation_and_leaves_the_fit_alone() -> None:
    log, rs = read_log(LOG), load(SPEC)
    assert len(log) >= MIN_HOLDOUT_STEPS  # so a validation part runs first
    lines: list[str] = []
    with_progress = calibrate(log, rs, progress=lines.append)
    assert with_progress.table() == calibrate(log, rs).table()
    parts = [i for i, ln in enumerate(lines) if not ln.startswith("simulating")]
    assert [lines[i].split(":")[0] for i in parts] == ["validation", f"fitting all {len(log)} steps"]
    assert parts[0] == 0, "the first line says which part starts"
    sims = [ln for ln in lines if ln.startswith("simulating")]
    # each part simulates: the two overhead probes at least, and the ranks' dealing
    assert sum("at 0 ms per decode iteration" in ln for ln in sims) == 2
    assert sum("at 10 ms per decode iteration" in ln for ln in sims) == 2
    assert any("deal their samples" in ln for ln in lines[parts[1] :])


@pytest.mark.parametrize("bad", ["stderr", 3])
def test_a_progress_that_cannot_be_called_is_refused(bad: object) -> None:
    with pytest.raises(LogError, match="progress") as e:
        calibrate(read_log(LOG), load(SPEC), progress=bad)  # type: ignore[arg-type]
    assert e.value.field == "progress"  # as every other bad argument (a LogError, so a ValueError)


def test_the_status_line_rewrites_itself_and_clears_at_the_end() -> None:
    out = io.StringIO()
    status = _StatusLine(out)
    status("fitting all 20 steps")
    status("simulating 20 steps at 0 ms per decode iteration")
    status.close()
    text = out.getvalue()
    assert "\n" not in text, "one line, rewritten"
    writes = text.split("\r\033[K")
    assert writes[0] == "" and writes[-1] == "", "each write starts by clearing; the last clears"
    assert [w.split("] ", 1)[1] for w in writes[1:-1]] == [
        "fitting all 20 steps",
        "simulating 20 steps at 0 ms per decode iteration",
    ]
    status.close()  # a second close writes nothing more
    assert out.getvalue() == text


def test_off_a_terminal_the_command_prints_no_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"  # the sample's first 8 steps: the printing is the point, not the fit
    log.write_text("".join(LOG.read_text().splitlines(keepends=True)[:9]))
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(tmp_path / "c.toml")]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err + captured.out and "calibrate [" not in captured.err
    assert "wrote" in captured.out
