"""Count a tree's collected tests by kind: bad input, property, behaviour.

    .venv/bin/python benchmarks/test_kinds.py            # this checkout
    .venv/bin/python benchmarks/test_kinds.py /tmp/old   # another tree: git archive REV | tar -x -C /tmp/old

The tests are collected by pytest (``--collect-only``, run in ``ROOT`` with ``ROOT`` first on the
path), so a parametrised test counts once per case, as the suite runs it. Each collected test takes
the kind of the test function it comes from, read from the source (:mod:`ast`), first rule first:

1. **property**: the function is decorated with Hypothesis' ``@given``;
2. **bad input**: the function lives in ``tests/test_refusals_*.py`` or ``tests/test_*bad_input*.py``,
   or its body calls ``pytest.raises`` or the rows' helper ``check_refusal`` (it checks that
   something is refused);
3. **behaviour**: every other test.

A bad-input test is split further by how it checks the refusal: **by field** where its function
reads an error's ``.field`` (or ``getattr(err, "field")``, or calls ``check_refusal``, the rows'
helper), else **by message** where one of its ``pytest.raises`` has ``match=`` (it pins the
wording), else **by type**. Beside the kinds it counts, in the source, the ``pytest.raises`` calls
and those with ``match=``. Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("bad input", "property", "behaviour")
BAD_INPUT_FILES = re.compile(r"^test_refusals_.*\.py$|^test_.*bad_input.*\.py$")


@dataclass
class FileFacts:
    """What the source of one test file says: each test function's kind, and the raises counts."""

    kinds: dict[str, str] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    raises: int = 0
    raises_match: int = 0


def _is_given(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "given"


def _raises_calls(node: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "raises"
    ]


def file_facts(path: Path) -> FileFacts:
    tree = ast.parse(path.read_text())
    facts = FileFacts()
    calls = _raises_calls(tree)
    facts.raises = len(calls)
    facts.raises_match = sum(any(k.arg == "match" for k in c.keywords) for c in calls)
    by_file = bool(BAD_INPUT_FILES.match(path.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            body = ast.unparse(node)
            if any(_is_given(d) for d in node.decorator_list):
                kind = "property"
            elif by_file or _raises_calls(node) or "check_refusal(" in body:
                kind = "bad input"
            else:
                kind = "behaviour"
            facts.kinds.setdefault(node.name, kind)
            if re.search(r"\.field\b|\"field\"|check_refusal\(", body):
                facts.how.setdefault(node.name, "by field")
            elif any(any(k.arg == "match" for k in c.keywords) for c in _raises_calls(node)):
                facts.how.setdefault(node.name, "by message")
            else:
                facts.how.setdefault(node.name, "by type")
    return facts


def collected(root: Path) -> list[str]:
    """The node ids pytest collects in ``root`` (its ``tests`` folder)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    if not ids:
        raise SystemExit(f"no tests collected in {root}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return ids


def count(root: Path) -> tuple[Counter[str], dict[str, int]]:
    facts: dict[str, FileFacts] = {}
    kinds: Counter[str] = Counter()
    for node in collected(root):
        file, _, rest = node.partition("::")
        func = rest.split("::")[-1].split("[")[0]
        if file not in facts:
            facts[file] = file_facts(root / file)
        kind = facts[file].kinds.get(func, "behaviour")
        kinds[kind] += 1
        if kind == "bad input":
            kinds[f"  {facts[file].how.get(func, 'by type')}"] += 1
    sources = [file_facts(p) for p in sorted((root / "tests").glob("test_*.py"))]
    static = {
        "pytest.raises calls": sum(f.raises for f in sources),
        "  with match= (pin the wording)": sum(f.raises_match for f in sources),
    }
    return kinds, static


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if not (root / "tests").is_dir():
        parser.error(f"{args.root}: no tests folder there ({root / 'tests'} is not a directory)")
    kinds, static = count(root)
    total = sum(kinds[k] for k in KINDS)
    print(f"{root}: {total} tests collected")
    for kind in KINDS:
        print(f"  {kind:<32} {kinds[kind]:>5}  ({100 * kinds[kind] / total:.0f}%)")
        if kind == "bad input":
            for how in ("by field", "by message", "by type"):
                print(f"    {how:<30} {kinds['  ' + how]:>5}")
    for what, n in static.items():
        print(f"  {what:<32} {n:>5}")


if __name__ == "__main__":
    main()
