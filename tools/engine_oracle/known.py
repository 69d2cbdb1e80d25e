"""The committed list of known disagreements between gpustack-k3 and the engine oracle (``known/*.yaml``: one file
per engine, vllm.yaml also holding the P/D pairs).

Each entry names one class of disagreement and why it is there (usually: the product fix is on another branch):

  - id: kv-role-missing
    class: miss                       # miss (engine refuses, product passes) | false-refusal (the reverse)
    releases: ["vllm-*"]              # fnmatch patterns of oracle release keys
    product_rules: []                 # false-refusal: the product's error rule ids (any one matches); miss: []
    match: "Please specify kv_role"   # regex searched in the engine's message (miss) or the product's (false-refusal)
    reason: "..."                     # why it is known, and what removes it

``unknown(records)`` returns the disagreements no entry covers: the CI tier fails on any. An entry nothing
matched any more is reported by ``unused(records)`` (the lead shrinks the list after merging the fixes).
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import yaml

KNOWN = Path(__file__).resolve().parent / "known"


def load(path: Path = KNOWN) -> list[dict]:
    """Every entry of ``path`` (a directory of ``*.yaml`` files, read in name order, or one file)."""
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    entries = [e for f in files for e in (yaml.safe_load(f.read_text()) or {}).get("known") or []]
    for e in entries:
        missing = {"id", "class", "releases", "match", "reason"} - set(e)
        if missing:
            raise ValueError(f"known entry {e.get('id')!r} lacks {sorted(missing)}")
        if e["class"] not in ("miss", "false-refusal"):
            raise ValueError(f"known entry {e['id']!r}: class must be miss or false-refusal")
    return entries


def _text(rec: dict) -> str:
    if rec["class"] == "miss":
        o = rec["oracle"]
        return f"{o.get('type', '')}: {o.get('message', '')}"
    p = rec["product"]
    return f"{' '.join(p.get('rules') or [])}: {p.get('message', '')}"


def matches(entry: dict, rec: dict) -> bool:
    if entry["class"] != rec["class"]:
        return False
    if not any(fnmatch.fnmatch(rec["release"], pat) for pat in entry["releases"]):
        return False
    rules = entry.get("product_rules") or []
    if rules and not set(rules) & set(rec["product"].get("rules") or []):
        return False
    return re.search(entry["match"], _text(rec), re.S) is not None


def unknown(records: list[dict], entries: list[dict] | None = None) -> list[dict]:
    entries = load() if entries is None else entries
    return [r for r in records if r["class"] in ("miss", "false-refusal")
            and not any(matches(e, r) for e in entries)]


def unused(records: list[dict], entries: list[dict] | None = None) -> list[str]:
    entries = load() if entries is None else entries
    return [e["id"] for e in entries if not any(matches(e, r) for r in records)]
