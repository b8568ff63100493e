"""Every ``python -m`` script answers ``--help`` with its usage and does nothing else.

Measured before: ``python -m scenarios.published.calpath --help`` rewrote
``examples/published/verl_async_128_log.csv`` and printed a calibration, ``python -m
pipesim.compute.phasescore --help`` printed both of its tables, and ``python -m pipesim.io.demo
--help`` (``make demo``'s script) wrote a 5 MB report to a file named ``--help``. The scripts are
found by their ``if __name__ == "__main__":`` blocks, so a new one without a parser fails here
until it is listed.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipesim", "scenarios", "offpolicy", "mismatch")

# the module whose ``main(argv)`` each runnable module runs (a package's __main__ runs another's)
MAINS = {
    "pipesim.__main__": "pipesim.io.cli",
    "pipesim.io.cli": "pipesim.io.cli",
    "pipesim.io.demo": "pipesim.io.demo",
    "pipesim.compute.phasescore": "pipesim.compute.phasescore",
    "pipesim.compute.profile": "pipesim.compute.profile",
    "scenarios.chapter13": "scenarios.chapter13",
    "scenarios.compute": "scenarios.compute",
    "scenarios.cosim": "scenarios.cosim",
    "scenarios.starvation": "scenarios.starvation",
    "scenarios.published.__main__": "scenarios.published.table",
    "scenarios.published.calpath": "scenarios.published.calpath",
    "offpolicy.estimator": "offpolicy.estimator",
    "offpolicy.fp8": "offpolicy.fp8",
    "offpolicy.lr_sweep": "offpolicy.lr_sweep",
    "offpolicy.staleness": "offpolicy.staleness",
    "mismatch.__main__": "mismatch.cli",
}


def runnable_modules() -> set[str]:
    """Modules of the four packages that run as scripts: a ``__main__.py``, or a file with a
    ``__main__`` guard."""
    found = set()
    guard = re.compile(r"^if __name__ == ['\"]__main__['\"]:", re.M)
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path.name == "__main__.py" or guard.search(path.read_text(encoding="utf-8")):
                found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


def test_every_runnable_module_is_listed() -> None:
    assert runnable_modules() == set(MAINS)


@pytest.mark.parametrize("module", sorted(set(MAINS.values())))
def test_help_prints_the_usage_and_does_nothing_else(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a script that wrote its output here would leave a file
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and out.startswith("usage: "), out[:500]
    assert list(tmp_path.iterdir()) == []
