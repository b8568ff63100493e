"""Each package imports without the others' heavy dependencies (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
import {package}
heavy = [m for m in {forbidden} if m in sys.modules]
assert not heavy, f"importing {package} pulled in {{heavy}}"
"""


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("pipesim", ["torch", "transformers", "plotly", "dask", "distributed"]),
        ("scenarios", ["transformers", "plotly", "dask"]),
        ("offpolicy", ["transformers", "simpy", "plotly"]),
        ("mismatch", ["simpy", "plotly", "transformers"]),
    ],
)
def test_light_imports(package: str, forbidden: list[str]) -> None:
    code = CHECK.format(package=package, forbidden=forbidden)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_lazy_exports_are_the_functions() -> None:
    import pipesim
    import pipesim.io.cli  # noqa: F401 - imports the sweep module first, as the CLI does

    assert callable(pipesim.sweep) and pipesim.sweep.__name__ == "sweep"
    assert pipesim.timelines.__name__ == "timelines"
    assert pipesim.build_report.__name__ == "build_report"
