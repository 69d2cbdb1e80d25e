"""README tables.

  python3 -m tools.engine_oracle.table SUMMARY.json                     # a bench/oracle_differential.py run
  python3 -m tools.engine_oracle.table --coverage REPORT.json [...]     # tools/engine_oracle/synth.py reports
  python3 -m tools.engine_oracle.table --misses-md REPORT.json [...]    # their product misses by raise site
"""
from __future__ import annotations

import json
import sys


def table(summary: dict) -> str:
    rows = ["| release | lines | engine accepted: product pass / refuse | engine refused: product pass (miss) / refuse "
            "| misses % of decidable | runtime-only refusals | not decidable (reasons) | oracle ms/line |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["results"]:
        if "unavailable" in r:
            rows.append(f"| {r['release']} | - | oracle unavailable: {r['unavailable'][:120]} | | | | | |")
            continue
        m = r["matrix"]
        nd = ", ".join(f"{k} {v}" for k, v in sorted(r["not_decidable"].items())) or "0"
        rate = f"{100 * r['miss_rate_of_decidable']:.1f}" if r["miss_rate_of_decidable"] is not None else "-"
        ms = (r.get("seconds") or {}).get("oracle_per_line_ms", "-")
        rows.append(f"| {r['release']} | {r['judged']} | {m['engine_accepted']['product_pass']} / "
                    f"**{m['engine_accepted']['product_refuse']}** | **{m['engine_refused']['product_pass']}** / "
                    f"{m['engine_refused']['product_refuse']} | {rate} | {r.get('runtime_only', 0)} | {nd} | {ms} |")
    return "\n".join(rows)


def coverage_table(reports: list[dict]) -> str:
    """One row per synth report: raise sites reached / reachable / total, the presets-and-random round 0 figure,
    lines judged / kept, time, and the product's misses and false refusals on the judged lines."""
    rows = ["| release | seed | reached / reachable / total (share) | round 0: presets + random lines | judged lines "
            "(kept) | rounds: new sites | s | misses / decidable | false refusals |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in sorted(reports, key=lambda d: (d["release"], d["seed"])):
        r = d["reachability"]
        share = f"{100 * r['reached_share_of_reachable']:.1f} %" if r.get("reached_share_of_reachable") else "-"
        h = d.get("rounds") or []
        r0 = f"{h[0]['reached']} ({h[0]['lines']} lines)" if h else "-"
        news = ", ".join(str(x.get("new", 0)) for x in h[1:]) or "-"
        p = (d.get("product") or {}).get("counts") or {}
        miss = f"{p['miss']} / {p['decidable']}" if p else "-"
        fr = str(p.get("false_refusal", "-")) if p else "-"
        rows.append(f"| {d['release']} | {d['seed']} | {r['reached']} / {r['reachable']} / {r['raise_sites']} ({share}) "
                    f"| {r0} | {d['judged_lines']} ({d['kept_lines']}) | {news} | {d.get('seconds')} | {miss} | {fr} |")
    return "\n".join(rows)


def coverage_summary(reports: list[dict]) -> dict:
    """Per release and seed: the figures, how they were obtained, and the product's misses grouped by the release's
    raise site (the to-do list of the rule writers: one example line and message per site)."""
    out = []
    for d in sorted(reports, key=lambda d: (d["release"], d["seed"])):
        p = d.get("product") or {}
        by_site: dict[str, dict] = {}
        for m in p.get("misses") or []:
            k = m.get("where") or (m.get("raise_sites_run") or ["?"])[-1]
            e = by_site.setdefault(k, {"engine_site": k, "lines": 0, "target": m.get("target"),
                                       "message": (m.get("message") or "")[:240], "example_argv": m.get("argv"),
                                       "example_env": m.get("env"), "model_config": m.get("model_config")})
            e["lines"] += 1
        out.append({"release": d["release"], "seed": d["seed"], "command": d.get("command"),
                    "code_commit": d.get("code_commit"), "started_utc": d.get("started_utc"),
                    "seconds": d.get("seconds"), "judged_lines": d["judged_lines"], "kept_lines": d["kept_lines"],
                    "rounds": d.get("rounds"), "reachability": d["reachability"], "verdicts": d.get("verdicts"),
                    "product": {k: p.get(k) for k in ("command", "at_utc", "counts")} if p else None,
                    "misses_by_engine_site": sorted(by_site.values(), key=lambda e: -e["lines"]),
                    "false_refusals": [{k: f.get(k) for k in ("argv", "env", "product_rules", "product_message")}
                                       for f in p.get("false_refusals") or []]})
    return {"made_by": "python3 -m tools.engine_oracle.table --coverage-summary REPORTS", "reports": out}


def _parse_refusal(message: str) -> str:
    """A refusal while parsing has no release frame: its option and the validator's sentence name it instead."""
    import re

    opt = re.match(r"argument ([-\w/]+)", message)
    err = re.search(r"(?:Value error|Assertion failed), ([^\[\n]+)", message) or \
        re.search(r"\n(\w[\w.]*)\n\s+(Input should[^\[\n]+)", message)
    sentence = " ".join(g for g in err.groups() if g) if err else message.splitlines()[0] if message else ""
    return f"({opt.group(1) if opt else '-'}: {sentence.strip()[:120]})"


def misses_markdown(reports: list[dict]) -> str:
    """The product's misses of synth reports (``--product``) grouped by the release's raise site, most lines first:
    message, the settings of the line, its model's config.json (a copy a line wrote: the fields it changed against the
    catalog model's) and one example argv/env per site (the rule writers' to-do list)."""
    from tools.engine_oracle.product import model_config

    sites: dict[str, dict] = {}
    for d in reports:
        variants = d.get("model_variants") or {}
        for m in (d.get("product") or {}).get("misses") or []:
            k = m.get("where") or "? " + _parse_refusal(m.get("message") or "")
            e = sites.setdefault(k, {"lines": 0, "releases": set(), "m": m, "variants": variants})
            e["lines"] += 1
            e["releases"].add(d["release"])
    out = [f"# The product's misses on {', '.join(sorted({d['release'] + ' seed ' + str(d['seed']) for d in reports}))}",
           "# (made by: python3 -m tools.engine_oracle.table --misses-md REPORTS; the engine refused, the product "
           "passed; code " + ", ".join(sorted({str(d.get('code_commit')) for d in reports})) + ")",
           "# 'where' = the innermost release frame the oracle names ('?': refused while parsing, e.g. a JSON option's "
           "pydantic validation); a model_config under a synth run's directory is a copy the line wrote: its changed "
           "fields are listed, the whole file is the report's model_variants entry", ""]
    for k, e in sorted(sites.items(), key=lambda kv: (-kv[1]["lines"], kv[0])):
        m = e["m"]
        out.append(f"## {k}  ({e['lines']} lines; {', '.join(sorted(e['releases']))})")
        out.append("message: " + (m.get("message") or "").strip())
        out.append(f"mutations: {m.get('mutations')}")
        mc = m.get("model_config")
        if mc and mc in e["variants"]:
            base = model_config(m.get("model")) if m.get("model") else None
            try:
                base_cfg = json.load(open(base)) if base else {}
            except OSError:
                base_cfg = {}
            cfg = e["variants"][mc]
            if "__public__" in cfg:   # a public config.json named, not copied (synth.compact_variant)
                from tools.engine_oracle.synth import expand_variant, public_configs

                cfg = expand_variant(cfg, public_configs()) or cfg
            changed = {f: cfg.get(f) for f in sorted(set(cfg) | set(base_cfg)) if cfg.get(f) != base_cfg.get(f)}
            out.append(f"model_config: a copy of {base} with {json.dumps(changed)[:400]}")
        else:
            out.append(f"model_config: {mc}")
        out.append("argv: " + json.dumps(m.get("argv")))
        out.append("env: " + json.dumps(m.get("env")))
        out.append("")
    frs = [(d["release"], f) for d in reports for f in (d.get("product") or {}).get("false_refusals") or []]
    if frs:
        out.append(f"# False refusals (the engine accepted, the product refused): {len(frs)}")
        out.append("")
        for rel, f in frs:
            out.append(f"## {rel}: {', '.join(f.get('product_rules') or [])}")
            out.append("product_message: " + (f.get("product_message") or "").strip()[:400])
            out.append(f"mutations: {f.get('mutations')}")
            out.append(f"model_config: {f.get('model_config')}")
            out.append("argv: " + json.dumps(f.get("argv")))
            out.append("env: " + json.dumps(f.get("env")))
            out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--coverage":
        print(coverage_table([json.load(open(f)) for f in argv[1:]]))
    elif argv and argv[0] == "--misses-md":
        print(misses_markdown([json.load(open(f)) for f in argv[1:]]))
    elif argv and argv[0] == "--coverage-summary":
        print(json.dumps(coverage_summary([json.load(open(f)) for f in argv[1:]]), indent=1))
    else:
        print(table(json.load(open(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
