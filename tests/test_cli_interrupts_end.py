"""A Ctrl-C at either end of a command, and two misnamings (walkthrough 63).

Measured before: a Ctrl-C during the interpreter's exit after ``pipesim run --save`` printed a
KeyboardInterrupt traceback from an exit function, or killed the process (status -2); one during
``import pipesim`` (the first second) printed a 30-56 line traceback; ``pipesim run systems:arael``
said "cannot import module 'systems'"; ``--resume`` over a respelled and edited file blamed the
spelling. The signal tests raise the signal at a fixed point (an exit function, an import), not
after a delay, so they do not depend on the machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from pipesim.io import interrupts
from pipesim.io.cli import main
from pipesim.io.registry import resolve
from pipesim.io.sweep_resume import differences

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# -- the way out --------------------------------------------------------------------------------


def test_a_signal_after_the_command_is_recorded_and_said_once(capfd: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupts.command_signals("run"):
        interrupts.command_finished("run", 0)
        signal.raise_signal(signal.SIGINT)  # no KeyboardInterrupt
        signal.raise_signal(signal.SIGTERM)
        handler = signal.getsignal(signal.SIGINT)
        assert isinstance(handler, interrupts.Finished)
        assert handler.signals == [signal.SIGINT, signal.SIGTERM]
    err = capfd.readouterr().err
    assert err.count("interrupted after run had finished") == 1, err
    assert signal.getsignal(signal.SIGINT) is before  # a caller in the same process gets it back
    assert interrupts._FINISHED is None


def test_a_stopped_command_says_nothing_more(capfd: pytest.CaptureFixture[str]) -> None:
    with interrupts.command_signals("run"):
        interrupts.command_finished("run", 130)
        signal.raise_signal(signal.SIGINT)
    assert capfd.readouterr().err == ""


def test_main_in_process_leaves_the_handlers_as_they_were(capsys: pytest.CaptureFixture[str]) -> None:
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert main(["list"]) == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C works again
        signal.raise_signal(signal.SIGINT)


def test_a_ctrl_c_in_an_exit_function_after_a_finished_command(tmp_path: Path) -> None:
    """The console script's process; the Ctrl-C lands in an exit function registered after the
    command (as multiprocessing's and torch's are): one line, the command's status, no traceback."""
    done = _python(
        """
        import atexit, signal, sys, __main__
        from pipesim_entry import main
        __main__.main = main  # as the console script has it
        atexit.register(lambda: [signal.raise_signal(signal.SIGINT) for _ in range(3)])
        sys.exit(main(["list"]))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.count("interrupted after list had finished; the outputs are complete") == 1


# -- the way in ---------------------------------------------------------------------------------


def test_a_ctrl_c_while_pipesim_imports_is_one_line(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        from pipesim_entry import main
        assert "pipesim" not in sys.modules  # the entry imports nothing of pipesim's

        class Interrupts:  # a Ctrl-C as pipesim.compute is imported
            def find_spec(self, name, path=None, target=None):
                if name == "pipesim.compute":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, Interrupts())
        sys.exit(main(["run", "synchronous"]))
        """,
        tmp_path,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "pipesim: interrupted before run started; nothing was written"


def test_the_console_script_is_the_light_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pipesim"] == "pipesim_entry:main"


def test_a_real_ctrl_c_early_is_never_a_traceback(tmp_path: Path) -> None:
    """Whenever it lands after the entry is in place (importing, running or exiting), one line at
    most. (Before that, in the interpreter's own start-up -- the editable install's ``.pth`` --
    nothing of pipesim's can answer it.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "import sys; from pipesim_entry import main; print('ready', flush=True); "
        "sys.exit(main(['run', 'synchronous']))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    try:
        proc.wait(timeout=0.2)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("systems:arael", "systems:areal"),
        ("systems:Areal", "systems:areal"),
        ("chapter13:chapter_scenarioo", "chapter13:chapter_scenario"),
        ("sytems:areal", "systems:areal"),
    ],
)
def test_a_misspelled_prefixed_name_says_did_you_mean(spec: str, meant: str) -> None:
    with pytest.raises(ValueError, match="unknown scenario") as info:
        resolve(spec)
    assert f"did you mean {meant}" in str(info.value) and "cannot import" not in str(info.value)


def test_a_module_factory_still_imports() -> None:
    assert resolve("os:getcwd").name == "os:getcwd"
    with pytest.raises(ValueError, match="cannot import module 'nosuchmodule63'"):
        resolve("nosuchmodule63:make")


def test_resume_names_the_edit_not_the_spelling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = {"pipesim": "1", "grid": "new", "scenario": "./big.yaml", "set": [], "policies": [],
            "over": ["max_staleness=0,1"], "seeds": [0, 1]}  # fmt: skip
    there = {**here, "grid": "old", "scenario": "big.yaml"}
    said = differences(there, here)
    assert said is not None and "a file changed?" in said and "there," not in said
    other = differences({**there, "scenario": "small.yaml"}, here)
    assert other is not None and '"small.yaml" there' in other


def test_an_interrupt_as_the_command_returns_says_it_had_finished(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The signal lands after the command returned, before main notes it (the command's frame
    takes milliseconds to clear): simulated by the first note raising KeyboardInterrupt."""
    import pipesim.io.cli as cli

    real = interrupts.command_finished
    calls: list[int] = []

    def lands_here(command: str, status: int, interrupted: bool = False) -> None:
        calls.append(status)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real(command, status, interrupted)

    monkeypatch.setattr(cli, "command_finished", lands_here, raising=False)
    assert main(["list"]) == 0
    err = capfd.readouterr().err  # said with os.write, as a signal handler may
    assert "interrupted after list had finished; the outputs are complete" in err, err
    assert "stopped before it finished" not in err
