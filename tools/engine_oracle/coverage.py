"""Rule coverage record: for each rule id of the registry, what the engine oracle said on each release whenever the
rule fired in the differential. Writes gpustack_k3/catalog/data/rule_oracle.yaml (data; `explain RULE` reads it).

  python3 bench/oracle_differential.py --out /tmp/diff.jsonl > /tmp/diff.json
  python3 -m tools.engine_oracle.coverage --from /tmp/diff.jsonl [--summary /tmp/diff.json] [--check]
  python3 -m tools.engine_oracle.coverage --from /tmp/diff-034.jsonl --summary /tmp/diff-034.json --merge
      # one release's run: its entries added to (or replacing) that release's in the committed record

Per rule and release, ``status`` is one of:
- ``agrees``: the rule refused lines and the release's own code refused every decidable one of them, at least one
  where this rule was the product's only error (``engine_message`` is the engine's message on such a line);
- ``co-refused``: as agrees, but the rule only fired beside other errors of the product (weaker evidence: the
  engine may have refused for the other reason);
- ``disagrees``: the rule refused at least one line the release accepts (a false refusal; ``false_refusals``);
- for a runtime-only rule on lines the release accepts at config time (the record's ``runtime_judge``: the release's
  after-config check worked out from the line, tools/engine_oracle/runtime_judge.py): ``runtime-disagrees`` (the
  worked computation accepts a line the rule refused: a false refusal), ``runtime-agrees`` (it refuses every such
  line), ``runtime-unjudged`` (no worked computation exists for the rule: no evidence either way);
- ``not-decidable``: it fired only on lines the oracle could not decide on CPU (``reasons``);
- ``not-fired``: the generated corpus never made it fire on this release (no evidence either way);
- ``advisory``: a warning/info rule: it never refuses, so there is no accept/refuse verdict to compare;
- ``not-argv``: a rule of a family check-args/check-pd do not run (log, render, schema).
A rule whose engine check happens after config time (weight load, first request) is ``runtime-only`` in the
rule registry itself (its source says where); this record states what the oracle and the runtime judge saw.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "gpustack_k3" / "catalog" / "data" / "rule_oracle.yaml"
ARGV_FAMILIES = {"spec", "args", "topology"}


def registry() -> list[dict]:
    sys.path.insert(0, str(REPO))
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import explain

    res = CliRunner().invoke(explain, ["-o", "json"])
    return json.loads(res.output)


STATUSES = ("agrees", "co-refused", "disagrees", "runtime-agrees", "runtime-disagrees", "runtime-unjudged",
            "not-decidable", "not-fired", "advisory", "not-argv")
RUNTIME_COUNTS = ("runtime_refuses", "runtime_accepts", "runtime_unjudged")


def _status(s: dict) -> str:
    """A refusal the release accepts (at config time, or by the worked after-config check) outweighs any agreement;
    the config-time oracle's evidence comes before the runtime judge's."""
    if s["engine_accepted"]:
        return "disagrees"
    if s["runtime_accepts"]:
        return "runtime-disagrees"
    if s["engine_refused_alone"]:
        return "agrees"
    if s["runtime_refuses"]:
        return "runtime-agrees"
    if s["engine_refused"]:
        return "co-refused"
    return "runtime-unjudged" if s["runtime_unjudged"] else "not-decidable"


def build(records: list[dict], rules: list[dict], meta: dict) -> dict:
    releases = sorted({r["release"] for r in records})
    seen: dict[str, dict[str, dict]] = defaultdict(lambda: defaultdict(lambda: {
        "fired": 0, "engine_refused": 0, "engine_refused_alone": 0, "engine_accepted": 0, "not_decidable": 0,
        "runtime_refuses": 0, "runtime_accepts": 0, "runtime_unjudged": 0,
        "reasons": set(), "example": None,
        "false_refusal_example": None}))
    for rec in records:
        runtime = rec.get("runtime_judge") or {}
        for rule in rec["product"].get("rules") or []:
            s = seen[rule][rec["release"]]
            s["fired"] += 1
            v = rec["oracle"]["verdict"]
            if rule in runtime:   # accepted at config time; the release's after-config check worked out instead
                judged = (runtime[rule] or [None])[0]
                s[{"refuses": "runtime_refuses", "accepts": "runtime_accepts"}.get(judged, "runtime_unjudged")] += 1
                if judged == "accepts":
                    s["false_refusal_example"] = s["false_refusal_example"] or " ".join(
                        rec.get("argv") or ["<pair>"])[:300]
            elif v == "refused":
                s["engine_refused"] += 1
                if len(rec["product"]["rules"]) == 1:   # the only reason the product gave
                    s["engine_refused_alone"] += 1
                    s["example"] = s["example"] or (rec["oracle"].get("message") or "")[:200]
            elif v == "accepted":
                s["engine_accepted"] += 1
                s["false_refusal_example"] = s["false_refusal_example"] or " ".join(
                    rec.get("argv") or ["<pair>"])[:300]
            else:
                s["not_decidable"] += 1
                s["reasons"].add(rec["oracle"].get("reason"))
    out_rules = {}
    for r in rules:
        rid = r["rule"]
        per = {}
        for rel in releases:
            s = seen.get(rid, {}).get(rel)
            if r["family"] not in ARGV_FAMILIES:
                per[rel] = {"status": "not-argv"}
            elif r["severity"] != "error":
                per[rel] = {"status": "advisory"}
            elif not s:
                per[rel] = {"status": "not-fired"}
            else:
                entry = {"status": _status(s), "fired": s["fired"], "engine_refused": s["engine_refused"],
                         "engine_refused_alone": s["engine_refused_alone"],
                         "engine_accepted": s["engine_accepted"], "not_decidable": s["not_decidable"]}
                entry.update({k: s[k] for k in RUNTIME_COUNTS if s[k]})
                if s["reasons"]:
                    entry["reasons"] = sorted(x for x in s["reasons"] if x)
                if s["example"]:
                    entry["engine_message"] = s["example"]
                if s["false_refusal_example"]:
                    entry["false_refusal_example"] = s["false_refusal_example"]
                per[rel] = entry
        out_rules[rid] = {"family": r["family"], "severity": r["severity"], "releases": per}
    extra = sorted(set(seen) - {r["rule"] for r in rules})   # input-error, argv-refused pseudo ids of the CLI
    return {"format": 1, "made_by": "tools/engine_oracle/coverage.py", "from": meta, "releases": releases,
            "statuses": list(STATUSES),
            "rules": out_rules,
            "cli_outcomes": {x: {rel: {k: v for k, v in seen[x][rel].items() if k in ("fired", "engine_refused",
                                                                                      "engine_refused_alone",
                                                                                      "engine_accepted")}
                                 for rel in releases if rel in seen[x]} for x in extra}}


def merge(old: dict, new: dict, meta: dict) -> dict:
    """``new`` (this run's record) over ``old`` (the committed one): the releases this run judged are this run's;
    every other release keeps its entries and the old run's header (``from``); this run's header is listed under
    ``merged`` with the releases it gave. A rule only the old record names (gone from the registry) is dropped."""
    ran = set(new["releases"])
    kept = [rel for rel in old.get("releases") or [] if rel not in ran]
    out = dict(new)
    out["from"] = old.get("from") or {}
    out["merged"] = [m for m in old.get("merged") or [] if set(m.get("releases") or []) - ran] + [
        {**meta, "releases": sorted(ran)}]
    out["releases"] = sorted(ran | set(kept))
    rules = {}
    for rid, entry in new["rules"].items():
        prev = ((old.get("rules") or {}).get(rid) or {}).get("releases") or {}
        per = {rel: prev[rel] for rel in kept if rel in prev}
        per.update(entry["releases"])
        rules[rid] = {**entry, "releases": {rel: per[rel] for rel in sorted(per)}}
    out["rules"] = rules
    cli = {x: dict(v) for x, v in (old.get("cli_outcomes") or {}).items()}
    for x, v in cli.items():
        for rel in list(v):
            if rel in ran:
                del v[rel]
    for x, v in (new.get("cli_outcomes") or {}).items():
        cli.setdefault(x, {}).update(v)
    out["cli_outcomes"] = {x: v for x, v in cli.items() if v}
    return out


def render(doc: dict) -> str:
    import yaml

    head = ("# GENERATED by tools/engine_oracle/coverage.py from a bench/oracle_differential.py run: do not edit.\n"
            "# Per rule and release: what the release's own validation code (tools/engine_oracle) said on the lines\n"
            "# where the rule refused. Statuses are explained in tools/engine_oracle/coverage.py.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=1000, allow_unicode=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src", type=Path, required=True, help="bench/oracle_differential.py --out FILE")
    ap.add_argument("--summary", type=Path, help="the bench's JSON summary (seed, sizes) for the record's header")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--product-at", metavar="CODE",
                    help="the code the records' product verdicts come from, when they were judged again "
                         "(bench/oracle_differential.py --rejudge) after the engine run: kept in the header")
    ap.add_argument("--merge", action="store_true",
                    help="keep the releases of the existing record (--out) this run did not judge (a run of one "
                         "release adds or replaces that release's entries only)")
    a = ap.parse_args(argv)
    records = [json.loads(x) for x in a.src.read_text().splitlines() if x.strip()]
    meta = {"records": len(records)}
    if a.summary and a.summary.is_file():
        s = json.loads(a.summary.read_text())
        meta.update(seed=s.get("seed"), lines_per_release=s.get("lines_per_release"), pairs=s.get("pairs"))
    if a.product_at:
        meta["product_judged_at"] = a.product_at
    doc = build(records, registry(), meta)
    if a.merge and a.out.is_file():
        import yaml

        doc = merge(yaml.safe_load(a.out.read_text()) or {}, doc, meta)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(render(doc))
    tmp.replace(a.out)
    print(json.dumps({"written": str(a.out), "rules": len(doc["rules"]), "releases": doc["releases"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
