"""Every relative link in the README, the changelog, docs/ and results/ leads somewhere: the file
(or folder) exists, and a ``#fragment`` into a Markdown file names one of its headings, spelt as
GitHub spells heading anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "results").rglob("*.md"),
    }
)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).*?\1", re.S)
INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where a link is only text."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    body = prose(text)
    return [m.group(1) for m in INLINE.finditer(body)] + [m.group(1) for m in REFERENCE.finditer(body)]


def anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text: lower case, punctuation other than
    ``-`` and ``_`` dropped, spaces as ``-``, a repeated anchor numbered ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", FENCE.sub("", text), re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link in a heading: its text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken(doc: Path) -> list[str]:
    """The relative links of ``doc`` that lead nowhere, each with why."""
    bad = []
    for target in links(doc.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target}: no such file {dest}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest.read_text()):
            bad.append(f"{target}: {dest.name} has no heading with anchor #{fragment}")
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    assert broken(doc) == []


def test_the_readme_and_the_index_link_the_docs() -> None:
    """The README links the map of the docs, and the map links docs/architecture.md first and
    every other guide in docs/."""
    assert "docs/index.md" in links((ROOT / "README.md").read_text())
    index = [t.partition("#")[0] for t in links((ROOT / "docs" / "index.md").read_text())]
    assert index[0] == "architecture.md"
    guides = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert guides <= set(index), f"docs/index.md does not link {sorted(guides - set(index))}"


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    """The check itself: a missing file, a missing heading and a reference-style link are caught;
    links in code, external links and good anchors are not."""
    (tmp_path / "other.md").write_text(
        "# Other\n\n## Speed: the `compiled` build\n\n## Speed: the `compiled` build\n"
    )
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](other.md) [ok](other.md#speed-the-compiled-build) [ok](other.md#speed-the-compiled-build-1)\n"
        "[ok](#title) [web](https://example.org/missing.md) `[code](missing-in-span.md)`\n"
        "```\n[code](missing-in-fence.md)\n```\n"
        "# Title\n[gone](missing.md) [no anchor](other.md#speed) ![img](pics/missing.png)\n\n"
        "[ref]: gone/too.md\n"
    )
    found = broken(doc)
    assert [b.split(":")[0] for b in found] == [
        "missing.md",
        "other.md#speed",
        "pics/missing.png",
        "gone/too.md",
    ]
