"""Build script beside ``pyproject.toml`` (which holds the metadata): pure Python by default.

``PIPESIM_COMPILE=1`` compiles the modules in :data:`COMPILED` with mypyc (part of mypy: it
turns type-annotated Python into a C extension of the same module): one leaf, the compute
replica's batch clock, which every generated token goes through: its batch, driver and replica,
the environment workers, the prompt-sharing bookkeeping, the token side table and the closed
loop's replica. The leaf works on its own sequence objects and reads or writes an episode only
where it starts and finishes, so nothing in ``pipesim/core/`` is compiled: the kernel, its policy
port and ``Episode`` are plain Python in both builds, as are the policies. The compiled modules
are the same source: every result is bit-identical to the pure build, and every switch and
subclass hook acts the same (``tests/test_compiled.py`` checks both); the compute engine runs
about three to five times as fast (``make bench-compute``, ``docs/performance.md``).

``make fast`` builds this into ``build/compiled`` (a ``pip install --target`` of the project,
never into the source tree, so an edited ``.py`` is never shadowed by a stale extension); put it
first on ``PYTHONPATH`` to use it. It needs a C compiler, the Python headers and mypy
(``pip install -e ".[dev]"``), and takes about 100 CPU seconds (two minutes on the 2-core machine).
"""

import os
from pathlib import Path

from setuptools import setup

COMPILED = [
    "pipesim/compute/batch.py",
    "pipesim/compute/driver.py",
    "pipesim/compute/engine.py",
    "pipesim/compute/inplace.py",
    "pipesim/compute/pool.py",
    "pipesim/compute/prefix.py",
    "pipesim/compute/refill.py",
    "pipesim/compute/seq.py",
    "pipesim/compute/source.py",
]
"""The modules the compiled build turns into C extensions."""

UNFOLLOWED = ("torch", "torch.*")
"""Packages the build's type analysis does not follow (they are typed as ``Any``). mypyc analyses
every module its sources reach, in full and from scratch, and ``pipesim.workload.durations``
names ``torch.Generator`` in its annotations: following torch took about 200 of the build's 240
CPU seconds on the 2-core machine (``mypycify`` alone, 237 s against 38 s without torch). No
compiled module touches torch, so nothing compiled changes: ``tests/test_compiled.py`` compares
the builds bit for bit. ``make typecheck`` still follows torch (pyproject's ``[tool.mypy]``)."""


def mypy_config() -> str:
    """pyproject.toml with :data:`UNFOLLOWED` skipped, written beside the build's cache (the build
    runs in the source tree) and passed to mypyc as ``--config-file``."""
    out = Path("build") / "mypyc-config" / "pyproject.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    modules = ", ".join(f'"{m}"' for m in UNFOLLOWED)
    skip = f'\n[[tool.mypy.overrides]]\nmodule = [{modules}]\nfollow_imports = "skip"\n'
    out.write_text(Path("pyproject.toml").read_text() + skip)
    return str(out)


ext_modules = []
if os.environ.get("PIPESIM_COMPILE") == "1":
    try:
        from mypyc.build import mypycify
    except ImportError as e:  # pip builds in an isolated environment unless told not to
        raise SystemExit(
            "PIPESIM_COMPILE=1 needs mypy (mypyc) where the build runs: pip install mypy "
            "'setuptools>=77', then PIPESIM_COMPILE=1 pip install --no-build-isolation ."
        ) from e

    # one extension per module (separate): gcc compiles them in parallel, in seconds, where one
    # C file of them all took minutes; no debug info
    ext_modules = mypycify(
        ["--config-file", mypy_config(), *COMPILED], opt_level="3", debug_level="0", separate=True
    )

options: dict[str, dict[str, object]] = {"build_ext": {"parallel": os.cpu_count() or 1}}
if ext_modules:
    # the compiled build writes its metadata under build/, not as ./pipesim.egg-info: the test suite
    # runs beside it (.ci/run) with the checkout on sys.path, and importlib.metadata read the
    # entry points from that directory while the build rewrote it (``systems:roll`` was missing
    # from the registry once, a KeyError in a test)
    Path("build").mkdir(exist_ok=True)
    options["egg_info"] = {"egg_base": "build"}
setup(ext_modules=ext_modules, options=options)
