"""The committed list of known disagreements between gpustack-k3 and the engine oracle (``known/*.yaml``: one file
per engine, vllm.yaml also holding the P/D pairs).

The list holds ONLY what the oracle cannot judge (issue 31 item 5): a disagreement whose engine verdict rests on
the oracle's own artefacts (a stand-in file: an assumed config.json figure, the stand-in preprocessor config or
tokenizer; a double). A disagreement where the engine refuses and the product passes is a miss of the product, and a
false refusal is a product error: both are fixed in the rules, never listed here. ``load`` refuses an entry without a
``cause`` from CAUSES, so the CI tier (tests/engine_oracle) fails on a product error written down as known.

  - id: kimi-k3-assumed-heads
    class: miss                       # miss (engine refuses, product passes) | false-refusal (the reverse)
    cause: stand-in                   # stand-in | oracle-artefact (CAUSES)
    stand_in: "kimi-k3/config.json text_config.num_attention_heads (assumed)"   # what the verdict rests on
    releases: ["vllm-*"]              # fnmatch patterns of oracle release keys
    product_rules: []                 # false-refusal: the product's error rule ids (any one matches); miss: []
    match: "..."                      # regex searched in the engine's message (miss) or the product's (false-refusal)
    reason: "..."                     # why the oracle cannot judge it, and what would let it

``unknown(records)`` returns the disagreements no entry covers: the CI tier fails on any. An entry nothing
matched any more is reported by ``unused(records)``.
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
        missing = {"id", "class", "cause", "stand_in", "releases", "match", "reason"} - set(e)
        if missing:
            raise ValueError(f"known entry {e.get('id')!r} lacks {sorted(missing)}: known/*.yaml holds only what the "
                             "oracle cannot judge (cause and the stand-in it rests on); a product error is fixed, "
                             "not listed")
        if e["class"] not in ("miss", "false-refusal"):
            raise ValueError(f"known entry {e['id']!r}: class must be miss or false-refusal")
        if e["cause"] not in CAUSES:
            raise ValueError(f"known entry {e['id']!r}: cause must be one of {sorted(CAUSES)} (a product error is "
                             "fixed in the rules, not listed)")
    return entries


# why the oracle cannot judge a disagreement (the only admissible reasons for a known entry)
CAUSES = {
    "stand-in": "the engine's verdict rests on a stand-in file of the oracle's model directory (an assumed "
                "config.json figure, the stand-in preprocessor config or tokenizer: gpustack_k3/oracle/models.py)",
    "oracle-artefact": "the engine's verdict rests on a double (gpustack_k3/oracle/engine_side/doubles.py) answering "
                       "differently from the serving node",
}


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
    # a runtime-only false refusal or miss (bench/oracle_differential.py classify: the worked computation of the
    # release's after-config check disagrees with the product) is a product error like any other: never known
    return [r for r in records if r["class"] in ("miss", "false-refusal", "runtime-only-false-refusal",
                                                  "runtime-only-miss")
            and not any(matches(e, r) for e in entries)]


def unused(records: list[dict], entries: list[dict] | None = None) -> list[str]:
    entries = load() if entries is None else entries
    return [e["id"] for e in entries if not any(matches(e, r) for r in records)]
