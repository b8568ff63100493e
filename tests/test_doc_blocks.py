"""The code blocks of docs/*.md run as written.

Every ```python block of ``docs/*.md`` is run here, each in a fresh interpreter (a process of its
own with a time limit, forked from one that has imported pipesim: tests/interpreters.py) with a
shared temporary directory as its working directory, as a reader who copies it into a new session
would run it; or it is named in ``NOT_RUN`` with why. A block that uses names of
an earlier block of the same section is run after it in the same interpreter, and says so in
``CONTINUES``; a block that uses names of another section's block fails, as it would for a reader
who copies that block alone (docs/viz.md's blocks once did: ``run`` and ``get_scenario`` came from
the section before). Both lists are keyed by the document and the block's first line that is not
an import, cut at 60 characters (:func:`key`), and an entry whose block is gone fails
``test_every_listed_block_exists``. ``test_the_checker_finds_what_is_broken`` breaks a copy of a
block to show that the check fails.

A few cheap commands of the shell blocks (``CHEAP_COMMANDS``) run too; the others run for minutes,
need a GPU or write into the repository, or are run by other tests (tests/test_usage.py runs
docs/usage.md's sections, tests/test_readme.py the README's). The README's blocks are
tests/test_readme.py's.

The blocks of one document are independent runs, so under pytest-xdist they may land on either
worker; each worker has its own working directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interpreters import Interpreters
from tests.test_testing_kit import DOCS as KIT_DOCS
from tests.test_testing_kit import readme_example

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SHARED = ROOT.parent / "shared"
"""``../shared`` from the repository root, where some blocks read reference data."""
FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```[ \t]*$", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
TIMEOUT_S = 180
"""Each run's wall-clock limit (the slowest block, viz.md's sweep of 72 runs, takes about 10 s)."""

NOT_RUN: dict[tuple[str, str], str] = {
    # run elsewhere: the policy example between the readme-example markers, with Hypothesis
    ("policies.md", "@dataclass(frozen=True)"): "tests/test_testing_kit.py runs it (the README's copy too)",
    # reads mine.yaml, which the section's bash block before it writes; tests/test_usage.py runs the
    # section's blocks in order in a fresh directory
    ("usage.md", 'scen = load_scenario("mine.yaml")'): "tests/test_usage.py runs it after its bash block",
    # illustrative fragments
    ("sweeps.md", "sweep(scenario, over, executor=ThreadPoolExecutor(4))"): (
        "a fragment: `scenario` and `over` are the reader's, and its first call raises by design "
        "(tests/test_sweep_bounds.py checks the refusal)"
    ),
    ("testing.md", '(("n_slots-zero", lambda: PipelineConfig(n_slots=0), FieldEr'): (
        "one row of a refusal table, shown for its shape; tests/test_refusals_core.py holds the rows"
    ),
}
"""Python blocks not run here, by (document, key), with why."""

CONTINUES: dict[tuple[str, str], str] = {
    # pipesim.compare sets the run and the loaded run of the block before side by side
    ("usage.md", 'table, figure = pipesim.compare({"eta=1": scen, "synchronous'): (
        'scen = get_scenario("async-eta1").with_(n_slots=16, batch_si'
    ),
}
"""Blocks run after an earlier block of the same section (its key), in the same interpreter."""

CHEAP_COMMANDS: list[tuple[str, str]] = [
    ("decode.md", "pipesim check-roofline tests/data/vidur/mlp_a100.csv --gpu a100-80gb"),
    ("decode.md", "pipesim check-roofline tests/data/vidur/attention_a100_llama-2-7b.csv --gpu a100-80gb"),
    ("runspec.md", "pipesim run examples/run_qwen3_8b.toml"),
    ("runspec.md", "pipesim export examples/run_qwen3_8b.toml --set design.tp=2 --out mine.toml"),
    ("usage.md", "pipesim list"),
]
"""Commands of the docs' shell blocks that finish in about a second, by (document, command as
written on its line, before any comment)."""


@dataclass(frozen=True)
class Block:
    doc: Path
    index: int
    """1-based, among the document's blocks of this language."""
    line: int
    section: str
    lang: str
    code: str

    @property
    def key(self) -> str:
        return key(self.code)

    @property
    def where(self) -> str:
        return f"{self.doc.parent.name}/{self.doc.name}:{self.line}"

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
        return f"{self.doc.name}-{self.index}-{slug[:32].rstrip('-')}"


KEY_CHARS = 60


def key(code: str) -> str:
    """A block's first line that is not blank, a comment or an import, without its comment and cut
    at ``KEY_CHARS``: what tells it from the other blocks of its document (several start with the
    same imports), and stays when an import is renamed."""
    lines = [line.split("  #")[0].rstrip() for line in code.splitlines() if line.strip()]
    line = next((line for line in lines if not re.match(r"(#|import |from \S+ import )", line)), "")
    return (line or (lines[0] if lines else ""))[:KEY_CHARS]


def blocks(doc: Path, lang: str | None = "python") -> list[Block]:
    """The fenced blocks of ``doc`` in ``lang`` (every block for None), in order, each with the
    heading it sits under. A fence may be indented (a block in a list item)."""
    text = doc.read_text()
    found: list[Block] = []
    for m in FENCE.finditer(text):
        if lang is not None and m.group(2) != lang:
            continue
        before = FENCE.sub("", text[: m.start()]).splitlines()
        heading = next((h.group(1) for line in reversed(before) if (h := HEADING.match(line))), "")
        n = sum(1 for b in found if b.lang == m.group(2)) + 1
        code = re.sub(rf"^{m.group(1)}", "", m.group(3), flags=re.M)  # as the fence is indented
        found.append(Block(doc, n, text.count("\n", 0, m.start()) + 1, heading, m.group(2), code))
    return found


def python_blocks(docs: Path = DOCS) -> list[Block]:
    return [b for doc in sorted(docs.glob("*.md")) for b in blocks(doc)]


def missing(listed: Iterable[tuple[str, str]], docs: Path = DOCS) -> list[tuple[str, str]]:
    """The (document, key) entries of ``listed`` that name no python block of ``docs``."""
    keys = {(b.doc.name, b.key) for b in python_blocks(docs)}
    return [entry for entry in listed if entry not in keys]


def chain(block: Block) -> list[Block]:
    """``block`` after the blocks it continues (``CONTINUES``), first to last."""
    out = [block]
    while (before := CONTINUES.get((out[0].doc.name, out[0].key))) is not None:
        earlier = [b for b in blocks(block.doc) if b.key == before and b.line < out[0].line]
        assert earlier, f"{out[0].where} continues {before!r}, which is no earlier block of its document"
        assert earlier[-1].section == out[0].section, f"{out[0].where} continues a block of another section"
        out.insert(0, earlier[-1])
    return out


RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for where, code in json.load(open(sys.argv[1])):
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        print(f"BLOCK FAILED: {where}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""
"""Runs the blocks of a JSON list in one namespace, each compiled under its document and line, so
a traceback names them; ``-c``, as a reader would paste them (a sweep needs no main guard there)."""


def run_blocks(
    chain: list[Block], cwd: Path, interpreters: Interpreters, timeout: float = TIMEOUT_S
) -> str | None:
    """Run ``chain`` in a fresh interpreter in ``cwd``; None when it ran, else what went wrong."""
    pieces = [(b.where, b.code.replace("../shared/", f"{SHARED}/")) for b in chain]
    script = cwd / f".blocks-{os.getpid()}.json"
    script.write_text(json.dumps(pieces))
    try:
        status, stdout, stderr = interpreters.run(["-c", RUNNER, str(script)], cwd, timeout)
    finally:
        script.unlink(missing_ok=True)
    if status is None:
        return f"{chain[-1].where}: did not finish in {timeout:.0f} s"
    if status != 0:
        return f"{chain[-1].where}: exit status {status}\n{stdout[-1500:]}\n{stderr[-3000:]}"
    return None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for every block and command of this module, holding copies of what
    the blocks read by relative path (``examples/``, ``tests/data/vidur/``, the committed runs that
    docs/offpolicy.md's coverage script reads)."""
    cwd = tmp_path_factory.mktemp("doc-blocks")
    shutil.copytree(ROOT / "examples", cwd / "examples")
    shutil.copytree(ROOT / "tests" / "data" / "vidur", cwd / "tests" / "data" / "vidur")
    for run in ("offpolicy/staleness.json", "cosim/cosim.json"):
        (cwd / "results" / run).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "results" / run, cwd / "results" / run)
    return cwd


RUN = [b for b in python_blocks() if (b.doc.name, b.key) not in NOT_RUN]


def run_by_test_usage(block: Block) -> bool:
    """Whether tests/test_usage.py runs ``block`` too (a docs/usage.md block of a section it runs:
    it runs every block of the section, in order, in a fresh namespace and directory). Such a block
    runs here, in a fresh interpreter, under make test-full only."""
    from tests.test_usage import SECTIONS

    return block.doc.name == "usage.md" and block.section in SECTIONS


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, marks=pytest.mark.full) if run_by_test_usage(b) else b for b in RUN],
    ids=lambda b: b.id,
)
def test_the_block_runs(block: Block, workdir: Path, interpreters: Interpreters) -> None:
    if "../shared/" in block.code and not SHARED.is_dir():
        pytest.skip(f"{block.where} reads ../shared/, which is not checked out at {SHARED}")
    problem = run_blocks(chain(block), workdir, interpreters)
    assert problem is None, problem


def test_every_listed_block_exists() -> None:
    """Each ``NOT_RUN`` and ``CONTINUES`` entry names a block that is there (a block that changed
    or went away takes its entry with it), and the keys tell a document's blocks apart."""
    assert missing(NOT_RUN) == [], "NOT_RUN names blocks that are gone (or changed their key)"
    assert missing(CONTINUES) == [], "CONTINUES names blocks that are gone (or changed their key)"
    assert missing((doc, before) for (doc, _), before in CONTINUES.items()) == []
    assert not set(NOT_RUN) & set(CONTINUES)
    found = python_blocks()
    keys = {(b.doc.name, b.key) for b in found}
    assert len(keys) == len(found), "two python blocks of one document share a key: key() must change"
    for b in found:
        chain(b)  # a continued block is an earlier block of the same section


def test_the_blocks_run_elsewhere_are_run_there() -> None:
    """The policy example is the one tests/test_testing_kit.py runs, and the usage block that
    reads mine.yaml sits in a section tests/test_usage.py runs."""
    from tests.test_usage import SECTIONS

    (policy,) = [b for b in blocks(DOCS / "policies.md") if b.key == "@dataclass(frozen=True)"]
    assert DOCS / "policies.md" in KIT_DOCS and readme_example(DOCS / "policies.md") == policy.code
    (usage,) = [b for b in blocks(DOCS / "usage.md") if b.key == 'scen = load_scenario("mine.yaml")']
    assert usage.section in SECTIONS


def test_the_plan_guides_printed_recommendation_is_what_plan_prints_today() -> None:
    """docs/plan.md's printed recommendation (run above) is the code ``pipesim plan`` prints for
    the design it recommends on examples/plan_qwen3_8b.toml (it once lacked the trainer's
    ``batch_order`` and the workload's ``trajectory``)."""
    from pipesim.plan import load
    from pipesim.plan.code import scenario_code, wrap_code
    from pipesim.plan.space import Design

    text = (DOCS / "plan.md").read_text().split("The printed recommendation:", 1)[1]
    shown = re.search(r"```python\n(.*?)```", text, re.S)
    assert shown is not None, "docs/plan.md lost its printed recommendation"
    spec = load(ROOT / "examples" / "plan_qwen3_8b.toml")
    design = Design(trainer_gpus=0, tp=2, eta=0, update="abort_reprefill", sync_every=2, oversample=1.25)
    assert shown.group(1) == wrap_code(scenario_code(spec, design)) + "\n"


def command_found(doc: str, command: str) -> bool:
    """Whether ``command`` is a line of one of ``doc``'s fenced blocks (before its comment)."""
    lines = (line.split("  #")[0].strip() for b in blocks(DOCS / doc, None) for line in b.code.splitlines())
    return command in lines


@pytest.mark.parametrize(
    "doc,command", CHEAP_COMMANDS, ids=[f"{d}-{c.split()[1]}-{i}" for i, (d, c) in enumerate(CHEAP_COMMANDS)]
)
def test_the_cheap_command_runs(doc: str, command: str, workdir: Path, interpreters: Interpreters) -> None:
    assert command_found(doc, command), f"docs/{doc} no longer runs {command!r}: update CHEAP_COMMANDS"
    program, *argv = shlex.split(command)
    assert program == "pipesim", f"{command!r}: CHEAP_COMMANDS holds pipesim commands only"
    # the console script's body in a fresh interpreter (the script itself on the PATH:
    # tests/test_readme.py's test_the_path_block_runs)
    status, stdout, stderr = interpreters.run(["pipesim", *argv], workdir, TIMEOUT_S)
    assert status == 0, f"{command}: exit status {status}\n{stdout[-1500:]}\n{stderr[-1500:]}"
    assert "Traceback" not in stderr
    if "check-roofline" in command:  # docs/decode.md's table holds the rows it prints
        table = (DOCS / "decode.md").read_text()
        rows = re.findall(r"^(\w+)\s+(\d+)\s+([\d.]+%)\s+([\d.]+%)\s+([+-][\d.]+%)\s+(\d+%)$", stdout, re.M)
        assert rows, stdout
        for op, n, median, p90, bias, within in rows:
            cells = [n, r"default[^|]*", median, p90, bias, within]
            row = r"\|\s*" + r"\s*\|\s*".join(rf"\**{re.escape(c) if '%' in c else c}\**" for c in cells)
            assert re.search(row, table), (
                f"docs/decode.md has no row for {op}: {n} {median} {p90} {bias} {within}"
            )


def test_the_checker_finds_what_is_broken(tmp_path: Path, interpreters: Interpreters) -> None:
    """The check itself, on copies: a block that still runs passes; the same block with a stale
    name fails, naming the document and line; a block that needs an earlier section's names fails
    on its own; a listed block that went away is caught."""
    tiny = tmp_path / "tiny"  # a good block and the same block with a stale name, on their own
    tiny.mkdir()
    (tiny / "names.md").write_text(
        "# Names\n\ntext\n\n```python\nfrom json import dumps\n\nprint(dumps(1))\n```\n"
    )
    (good,) = python_blocks(tiny)
    assert run_blocks([good], tmp_path, interpreters) is None
    (tiny / "names.md").write_text((tiny / "names.md").read_text().replace("import dumps", "import dumpz"))
    (stale,) = python_blocks(tiny)
    problem = run_blocks([stale], tmp_path, interpreters)
    assert problem is not None and f"tiny/names.md:{stale.line}" in problem and "ImportError" in problem

    # a real document's block with a stale name: saved-runs.md's runs as written in
    # test_the_block_runs, so only the broken copy runs here
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(DOCS / "saved-runs.md", docs / "saved-runs.md")
    broken = docs / "saved-runs.md"
    broken.write_text(broken.read_text().replace("import UnverifiedRunWarning", "import UnverifiedWarning"))
    (bad,) = python_blocks(docs)
    problem = run_blocks([bad], tmp_path, interpreters)
    assert problem is not None and f"docs/saved-runs.md:{bad.line}" in problem and "ImportError" in problem

    (docs / "two.md").write_text(
        "# Two\n\n## First\n\n```python\nimport math\n\nx = math.pi\n```\n\n"
        "## Second\n\n  ```python\n  print(x)\n  ```\n"  # an indented fence, in a list item
    )
    first, second = blocks(docs / "two.md")
    assert (first.section, second.section, second.key) == ("First", "Second", "print(x)")
    assert run_blocks([first], tmp_path, interpreters) is None
    assert "NameError" in (run_blocks([second], tmp_path, interpreters) or "")
    assert run_blocks([first, second], tmp_path, interpreters) is None

    listed = [
        ("saved-runs.md", 'warnings.simplefilter("ignore", UnverifiedRunWarning)'),
        ("saved-runs.md", "x = 1"),
    ]
    assert missing(listed, docs) == [("saved-runs.md", "x = 1")]  # the key outlived the stale import
