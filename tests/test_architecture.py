"""The layers of pipesim import only downwards (docs/architecture.md), and nothing imports scenarios.

Imports are read from the source with ``ast``; those under ``if TYPE_CHECKING:`` are annotations
only and do not count. The compute package spans the hardware data up to a cluster that
composes and runs scenarios, so it may use config and results; ``io``, ``testing`` and ``plan`` sit
on top of everything.
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
    "io": {"core", "policies", "workload", "compute", "config", "results", "io", "testing", "plan", "<top>"},
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


def layer_of(module: str) -> str:
    """``pipesim.core.engine`` -> ``core``; ``pipesim.config`` -> ``config``; ``pipesim`` -> ``<top>``."""
    parts = module.split(".")
    if parts == ["pipesim"]:
        return "<top>"
    return parts[1] if parts[1] in ALLOWED else "<top>"


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    """Modules imported by ``path`` outside ``if TYPE_CHECKING:`` blocks (function bodies included)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for inner in ast.walk(sub):
                    skip.add(id(inner))
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif (  # importlib.import_module("pipesim.x"): an import too, however it is spelled
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


# Presentation hooks: a result saves itself and a result or a scenario draws itself in a notebook
# (RunResult.save, _repr_html_) through the io layer, imported when called. The only upward
# imports allowed, each by module and target.
HOOKS = {
    ("pipesim.results.run", "pipesim.io.saved"),
    ("pipesim.results.run", "pipesim.io.html"),
    ("pipesim.config", "pipesim.io.html"),
}


MODULES = sorted(p for p in ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_each_module_imports_only_its_own_layer_or_below(path: Path) -> None:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    module = ".".join(rel.parts).removesuffix(".__init__")
    mine = layer_of(module) if rel.parts[1] != "config" else "config"
    bad = []
    for line, imported in runtime_imports(path):
        top = imported.split(".")[0]
        if top == "scenarios":
            bad.append(f"line {line}: imports {imported} (scenarios register themselves)")
        if top != "pipesim":
            continue
        theirs = layer_of(imported)
        if theirs not in ALLOWED[mine] and (module, imported) not in HOOKS:
            bad.append(f"line {line}: {mine} imports {imported} ({theirs})")
    assert not bad, f"{module}: " + "; ".join(bad)


def test_the_layers_exist() -> None:
    for pkg in ("core", "policies", "workload", "results", "io", "testing", "compute"):
        assert (ROOT / pkg / "__init__.py").exists(), pkg
    flat = sorted(p.name for p in ROOT.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "config.py"], flat
