"""README tables.

  python3 -m tools.engine_oracle.table SUMMARY.json                     # a bench/oracle_differential.py run
  python3 -m tools.engine_oracle.table --coverage REPORT.json [...]     # tools/engine_oracle/synth.py reports
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--coverage":
        print(coverage_table([json.load(open(f)) for f in argv[1:]]))
    else:
        print(table(json.load(open(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
