"""Every relative link in the README and docs/ points at a file that exists and, with a
``#fragment``, at a heading of that file (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens, a repeated heading numbered)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"`[^`\n]+`")


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@cache
def anchors_of(file: Path) -> set[str]:
    """:func:`anchors` of a Markdown file, read once however many links point into it."""
    return anchors(file.read_text(encoding="utf-8"))


def test_anchors_follow_github() -> None:
    text = "# Where it stands\n## `agentlens score` as a process (issue 19)\n## Notes\n## Notes\n"
    assert anchors(text) == {
        "where-it-stands",
        "agentlens-score-as-a-process-issue-19",
        "notes",
        "notes-1",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    # code (a fenced block, or `...` inline) holds no links, only text that may look like one
    for target in _LINK.findall(_CODE.sub("code", _FENCE.sub("", text))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors_of(file):
            broken.append(f"{target}: no heading #{fragment} in {file.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
