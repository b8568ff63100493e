"""The layers of pipesim import only downwards (docs/architecture.md), and nothing imports scenarios.

Imports are read from the source with ``ast``: ``import`` and ``from`` statements anywhere (inside
functions, and under ``if TYPE_CHECKING:`` too: an annotation that names a layer above is a
dependency on it), relative imports resolved against the module's package, and
``importlib.import_module("...")`` calls. The compute package spans the hardware data up to a
cluster that composes and runs scenarios, so it may use config and results; ``io``, ``testing``
and ``plan`` sit on top of everything. ``core`` imports nothing above it. Beside pipesim:
``offpolicy`` and ``mismatch`` never import pipesim or SimPy, ``mismatch`` imports plotly only
inside the functions that draw, and pipesim never imports transformers, offpolicy or mismatch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "pipesim"

ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "policies": {"core", "policies", "workload"},  # the catalog names duration models too
    "workload": {"core", "workload"},
    "compute": {"core", "policies", "workload", "compute", "config", "results"},  # cluster composes runs
    "config": {"core", "policies", "workload", "config"},
    "results": {"core", "config", "results"},
    "io": {
        "core",
        "policies",
        "workload",
        "compute",
        "config",
        "results",
        "io",
        "testing",
        "plan",
        "calibrate",
        "<top>",
    },
    "testing": {"core", "policies", "workload", "compute", "config", "results", "io", "testing", "<top>"},
    "plan": {
        "core",
        "policies",
        "workload",
        "compute",
        "config",
        "results",
        "io",
        "testing",
        "plan",
        "<top>",
    },
    "<top>": {"core", "policies", "workload", "compute", "config", "results", "io", "testing", "<top>"},
}
# pipesim calibrate fits run specs (plan) and runs them: it sits on top of plan, beside io
ALLOWED["calibrate"] = ALLOWED["plan"] | {"calibrate"}


def layer_of(module: str) -> str:
    """``pipesim.core.engine`` -> ``core``; ``pipesim.config`` -> ``config``; ``pipesim`` -> ``<top>``."""
    parts = module.split(".")
    if parts == ["pipesim"]:
        return "<top>"
    return parts[1] if parts[1] in ALLOWED else "<top>"


def imports(path: Path, package: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports (``package``: the dotted package it lies in, for relative
    imports), with the line: statements anywhere, type-level ones included, and
    ``import_module`` calls with a literal name."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                out.append((node.lineno, node.module))
            elif node.level > 0:  # from . import x / from ..y import z
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                out += (
                    [(node.lineno, target)]
                    if node.module
                    else [(node.lineno, f"{target}.{a.name}") for a in node.names]
                )
        elif (  # importlib.import_module("pipesim.x"): an import too, however it is spelled
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def module_level_imports(path: Path) -> list[str]:
    """The modules imported at import time (not inside a function or a ``TYPE_CHECKING`` block)."""
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def package_of(path: Path, root: Path) -> tuple[str, str]:
    """(dotted module, dotted package) of ``path`` under ``root``'s parent."""
    rel = path.relative_to(root.parent).with_suffix("")
    module = ".".join(rel.parts).removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return module, package


# Presentation hook: a result saves itself (RunResult.save) through the io layer, imported when
# called. The only upward import allowed, by module and target. (The notebook views, _repr_html_,
# are attached by io itself: pipesim.io.html.attach_views.)
HOOKS = {
    ("pipesim.results.run", "pipesim.io.saved"),
}


MODULES = sorted(p for p in ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_each_module_imports_only_its_own_layer_or_below(path: Path) -> None:
    module, package = package_of(path, ROOT)
    mine = layer_of(module) if path.relative_to(ROOT.parent).parts[1] != "config.py" else "config"
    bad = []
    for line, imported in imports(path, package):
        top = imported.split(".")[0]
        if top == "scenarios":
            bad.append(f"line {line}: imports {imported} (scenarios register themselves)")
        if top in ("transformers", "offpolicy", "mismatch"):
            bad.append(f"line {line}: imports {imported} (pipesim never does)")
        if top != "pipesim":
            continue
        theirs = layer_of(imported)
        if theirs not in ALLOWED[mine] and (module, imported) not in HOOKS:
            bad.append(f"line {line}: {mine} imports {imported} ({theirs})")
    assert not bad, f"{module}: " + "; ".join(bad)


SIBLINGS = sorted(p for pkg in ("offpolicy", "mismatch") for p in (ROOT.parent / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", SIBLINGS, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_offpolicy_and_mismatch_stand_alone(path: Path) -> None:
    """They must run where pipesim's dependencies are not installed (the GPU machine has torch
    and transformers only): no pipesim, no SimPy; mismatch draws with plotly only when asked."""
    module, package = package_of(path, ROOT.parent / path.relative_to(ROOT.parent).parts[0])
    tops = {imported.split(".")[0] for _, imported in imports(path, package)}
    assert not tops & {"pipesim", "simpy", "scenarios"}, (
        f"{module} imports {sorted(tops & {'pipesim', 'simpy', 'scenarios'})}"
    )
    if path.relative_to(ROOT.parent).parts[0] == "mismatch":
        assert "plotly" not in {m.split(".")[0] for m in module_level_imports(path)}, module


def test_the_rules_see_type_level_relative_and_dynamic_imports(tmp_path: Path) -> None:
    """The checker itself: a type-level upward import, a relative one and an import_module call
    are each found and refused."""
    core = tmp_path / "pipesim" / "core"
    core.mkdir(parents=True)
    (core / "x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pipesim.config import Scenario\n"
        "from ..policies import base\n"
        "def f():\n"
        "    import importlib\n"
        "    return importlib.import_module('pipesim.io.html')\n"
    )
    module, package = package_of(core / "x.py", tmp_path / "pipesim")
    found = [m for _, m in imports(core / "x.py", package) if m.startswith("pipesim")]
    assert (module, package) == ("pipesim.core.x", "pipesim.core")
    assert sorted(found) == ["pipesim.config", "pipesim.io.html", "pipesim.policies"]
    assert all(layer_of(m) not in ALLOWED["core"] for m in found)


def test_the_layers_exist() -> None:
    for pkg in ("core", "policies", "workload", "results", "io", "testing", "compute"):
        assert (ROOT / pkg / "__init__.py").exists(), pkg
    flat = sorted(p.name for p in ROOT.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "config.py"], flat
