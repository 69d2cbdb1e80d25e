"""Rule coverage record: for each rule id of the registry, what the engine oracle said on each release whenever the
rule fired in the judged lines of one or more record files. Writes gpustack_k3/catalog/data/rule_oracle.yaml (data;
`explain RULE` reads it).

  python3 bench/oracle_differential.py --out /tmp/diff.jsonl > /tmp/diff.json
  python3 -m tools.engine_oracle.aimed_records --out /tmp/aimed.jsonl > /tmp/aimed.json
  python3 -m tools.engine_oracle.coverage --from /tmp/diff.jsonl /tmp/aimed.jsonl [--summary /tmp/diff.json ...]
  python3 -m tools.engine_oracle.coverage --from /tmp/diff.jsonl /tmp/aimed.jsonl --check
      # exit 1 when the committed record is not what these files make (or misses a registry rule)
  python3 -m tools.engine_oracle.coverage --from /tmp/diff-034.jsonl --summary /tmp/diff-034.json --merge
      # one release's run: its entries added to (or replacing) that release's in the committed record

The record files are JSON lines as ``bench/oracle_differential.py --out`` (or ``--rejudge --out``) writes them, or as
tools/engine_oracle/aimed_records.py writes them for the aimed lines. Each file is named in the record's header
(``from.files``: its records per release, seed or aimed files, and the run's summary: ``--summary`` in the order of
``--from``, else the file's sibling ``NAME.json`` when it is such a summary). A line judged in two files (the same
release, argv, environment, GPU type and count, and config.json copy) is counted once, from the first file naming it
(``duplicates`` in the later file's header entry); repeats within one file are counted as the file gives them.

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
- ``not-fired``: no line of the record files made it fire on this release (no evidence either way); a registry rule
  no record names at all has this status on every release (``never_fired`` in the header counts them);
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

    head = ("# GENERATED by tools/engine_oracle/coverage.py from judged-line records (bench/oracle_differential.py\n"
            "# --out, tools/engine_oracle/aimed_records.py; the files are named under from:): do not edit.\n"
            "# Per rule and release: what the release's own validation code (tools/engine_oracle) said on the lines\n"
            "# where the rule refused. Statuses are explained in tools/engine_oracle/coverage.py.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=1000, allow_unicode=True)


def line_key(rec: dict) -> str:
    """What makes two records the same judged line: release, argv (of both sides for a P/D pair), the whole
    environment, GPU type and count; a config.json copy of a run (``model_variants``: its directory is named by its
    content, tools/engine_oracle/synth.py ``_hf``) by that name, not by its run's temporary directory."""
    line = rec.get("line") or {}
    vdirs = {str(Path(p).parent): "variant:" + Path(p).parent.name for p in rec.get("model_variants") or {}}

    def side(x: dict) -> list:
        return [[vdirs.get(t, t) for t in x.get("argv") or []], sorted((x.get("env") or {}).items()),
                x.get("gpu_type"), x.get("gpus")]

    if "prefill" in line or "prefill" in rec:
        sides = [side(line["prefill"]), side(line["decode"])] if "prefill" in line else \
            [[rec["prefill"]], [rec["decode"]]]
    else:
        sides = [side(line) if line else [rec.get("argv"), sorted((rec.get("env") or {}).items())]]
    return json.dumps([rec["release"], sides])


_SUMMARY_KEYS = ("seed", "explore", "directed_per_site", "lines_per_release", "pairs", "rejudged", "made_by",
                 "code_commit", "aimed_files")


def read_records(paths: list[Path], summaries: list[Path] | None = None) -> tuple[list[dict], dict]:
    """The records of ``paths`` (a line judged in an earlier file dropped) and the header naming each file."""
    records, files, seen = [], [], set()
    summaries = list(summaries or [])
    for k, path in enumerate(paths):
        mine, keys, dup = [], set(), 0
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{n}: not a JSON record ({exc})") from None
            key = line_key(rec)
            if key in seen:
                dup += 1
                continue
            keys.add(key)
            mine.append(rec)
        seen |= keys
        records += mine
        per: dict[str, int] = defaultdict(int)
        for rec in mine:
            per[rec["release"]] += 1
        aimed = sorted({str((rec.get("aimed") or {}).get("source", "")).rpartition(":")[0] for rec in mine
                        if rec.get("aimed")})
        entry = {"file": path.name, "kind": "aimed lines (tools/engine_oracle/aimed_records.py)" if aimed
                 else "differential (bench/oracle_differential.py --out)", "records": len(mine),
                 "records_per_release": dict(sorted(per.items()))}
        if aimed:
            entry["aimed_files"] = aimed
        if dup:
            entry["duplicates"] = dup
        summ = summaries[k] if k < len(summaries) else path.with_suffix(".json")
        if summ != path and summ.is_file():
            try:
                s = json.loads(summ.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                s = None
            if isinstance(s, dict) and "results" in s:
                entry.update({x: s[x] for x in _SUMMARY_KEYS if s.get(x) is not None and x not in entry})
            if isinstance(s, dict) and s.get("rejudged"):
                # records re-judged (bench/oracle_differential.py --rejudge): the engine run's summary, beside the
                # records it wrote, gives the seed and sizes
                first = Path(s["rejudged"])
                entry["rejudged"] = first.name
                run = first.with_suffix(".json")
                try:
                    s0 = json.loads(run.read_text()) if run != first and run.is_file() else {}
                except (json.JSONDecodeError, UnicodeDecodeError):
                    s0 = {}
                if isinstance(s0, dict) and "results" in s0:
                    entry.update({x: s0[x] for x in _SUMMARY_KEYS if s0.get(x) is not None and x not in entry})
        files.append(entry)
    return records, {"records": len(records), "files": files}


def check(doc: dict, committed: dict, rules: list[dict]) -> list[str]:
    """What differs between the record ``doc`` these files make and the ``committed`` one, and registry rules either
    lacks: empty when the committed record is up to date."""
    out = []
    ids = [r["rule"] for r in rules]
    for name, d in (("made", doc), ("committed", committed)):
        missing = [i for i in ids if i not in (d.get("rules") or {})]
        if missing:
            out.append(f"{name} record lacks {len(missing)} registry rule(s): {', '.join(missing[:10])}")
    old = committed.get("rules") or {}
    changed = [rid for rid, e in doc["rules"].items() if rid in old and old[rid] != e]
    if changed:
        out.append(f"{len(changed)} rule(s) differ from the committed record: {', '.join(changed[:10])}")
    gone = sorted(set(old) - set(doc["rules"]))
    if gone:
        out.append(f"the committed record names {len(gone)} rule(s) the registry does not: {', '.join(gone[:10])}")
    for key in ("releases", "from", "cli_outcomes"):
        if doc.get(key) != committed.get(key):
            out.append(f"{key} differs from the committed record")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src", type=Path, nargs="+", required=True,
                    help="record files: bench/oracle_differential.py --out, tools/engine_oracle/aimed_records.py --out")
    ap.add_argument("--summary", type=Path, nargs="+",
                    help="the runs' JSON summaries (seed, sizes) for the record's header, in the order of --from "
                         "(default: each file's sibling NAME.json when it is one)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--product-at", metavar="CODE",
                    help="the code the records' product verdicts come from, when they were judged again "
                         "(bench/oracle_differential.py --rejudge) after the engine run: kept in the header")
    ap.add_argument("--merge", action="store_true",
                    help="keep the releases of the existing record (--out) this run did not judge (a run of one "
                         "release adds or replaces that release's entries only)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing: exit 1 when --out is not the record these files make, or either lacks a "
                         "registry rule")
    a = ap.parse_args(argv)
    records, meta = read_records(a.src, a.summary)
    if len(a.src) == 1:   # one run: its summary's keys at the top, as before (explain prints them)
        meta.update({k: v for k, v in meta["files"][0].items() if k in ("seed", "lines_per_release", "pairs")})
    if a.product_at:
        meta["product_judged_at"] = a.product_at
    rules = registry()
    doc = build(records, rules, meta)
    doc["from"]["never_fired"] = sum(1 for e in doc["rules"].values()
                                     if all(x.get("status") == "not-fired" for x in e["releases"].values())
                                     and e["releases"])
    if a.merge and a.out.is_file():
        import yaml

        doc = merge(yaml.safe_load(a.out.read_text()) or {}, doc, meta)
    missing = [r["rule"] for r in rules if r["rule"] not in doc["rules"]]
    if missing:   # build lists every registry rule: a rule missing here is a bug of this tool, never written
        raise SystemExit(f"the record lacks registry rules: {missing[:10]}")
    if a.check:
        import yaml

        committed = (yaml.safe_load(a.out.read_text()) or {}) if a.out.is_file() else {}
        problems = check(doc, committed, rules)
        print(json.dumps({"checked": str(a.out), "up_to_date": not problems, "problems": problems}, indent=1))
        return 1 if problems else 0
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(render(doc))
    tmp.replace(a.out)
    print(json.dumps({"written": str(a.out), "rules": len(doc["rules"]), "releases": doc["releases"],
                      "statuses": status_counts(doc)}))
    return 0


def status_counts(doc: dict) -> dict[str, int]:
    """rule x release cells per status."""
    out: dict[str, int] = defaultdict(int)
    for e in doc["rules"].values():
        for x in e["releases"].values():
            out[x.get("status", "?")] += 1
    return {k: out[k] for k in STATUSES if out.get(k)}


if __name__ == "__main__":
    raise SystemExit(main())
