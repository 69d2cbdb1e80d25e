"""Citations in the package point at this repository (docs/sources.md anchors, files) or at upstream files with
their version, never at notes outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_FILES = sorted(p for p in (REPO / "gpustack_k3").rglob("*") if p.suffix in (".py", ".yaml", ".json", ".j2"))
ANCHORS = set(re.findall(r'<a id="([\w-]+)"></a>', (REPO / "docs" / "sources.md").read_text(encoding="utf-8")))
# the write-ups and research notes live outside the repository: cite docs/sources.md, which restates them
OUTSIDE = re.compile(r"engines\.md|domain §|domain/|kimi-k3-on-8xb300\.md|shared/(?:seeds|domain|research)|"
                     r"research/[\w-]+\.md|\bseed (?:00\d )?§")


def test_every_cited_anchor_exists():
    missing = [(p.relative_to(REPO).as_posix(), a) for p in PACKAGE_FILES
               for a in re.findall(r"docs/sources\.md#([\w-]+)", p.read_text(encoding="utf-8", errors="replace"))
               if a not in ANCHORS]
    assert missing == []


def test_no_citation_of_notes_outside_the_repository():
    found = [f"{p.relative_to(REPO).as_posix()}:{i}: {line.strip()[:120]}" for p in PACKAGE_FILES
             for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == [], "\n".join(found)
