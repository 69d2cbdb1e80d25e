"""Citations in the package point at this repository (docs/sources.md anchors, files) or at upstream files with
their version, never at notes outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_FILES = sorted(p for p in (REPO / "gpustack_k3").rglob("*") if p.suffix in (".py", ".yaml", ".json", ".j2"))
ANCHORS = set(re.findall(r'<a id="([\w-]+)"></a>', (REPO / "docs" / "sources.md").read_text(encoding="utf-8")))


def test_every_cited_anchor_exists():
    missing = [(p.relative_to(REPO).as_posix(), a) for p in PACKAGE_FILES
               for a in re.findall(r"docs/sources\.md#([\w-]+)", p.read_text(encoding="utf-8", errors="replace"))
               if a not in ANCHORS and a != "anchor"]    # "docs/sources.md#anchor": the form, in docstrings
    assert missing == []

