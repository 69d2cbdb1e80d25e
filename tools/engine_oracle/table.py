"""The README table of a bench/oracle_differential.py run: python3 -m tools.engine_oracle.table SUMMARY.json"""
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


if __name__ == "__main__":
    print(table(json.load(open(sys.argv[1]))))
