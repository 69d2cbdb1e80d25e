"""Aimed lines as differential records: every aimed line (tools/engine_oracle/aimed/*.yaml, read by aimed.py) of a
release judged by the release's own code and by the product, written as the JSON lines
``bench/oracle_differential.py --out`` writes (``release``, ``class``, ``product`` with its rule ids, ``oracle`` with
the engine's verdict, ``argv``, ``env``, ``mutations``, ``seed``, the whole ``line``), so that
``tools/engine_oracle/coverage.py --from`` reads them beside a differential's records and
``bench/oracle_differential.py --rejudge`` judges the product on them again with the engine verdicts kept.

Each record also holds:
- ``aimed``: the entry (``source`` file:index, ``target`` site, ``hit``: whether the line ran it, ``where`` the release
  raised);
- ``model_variants`` / ``serve_configs``: the config.json copies and ``--config`` files the line names (their run's
  directory dies with the run; synth.py's compact format), which ``--rejudge`` writes again before judging.

  python3 -m tools.engine_oracle.aimed_records --out /tmp/aimed.jsonl [--releases vllm-0.34.0 ...] [--file F.yaml]

Prints a JSON summary per release (lines, classes, seconds) on stdout; the records go to ``--out``.
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpustack_k3.oracle.judge import RELEASES
from tools.engine_oracle.aimed import AimedError, aimed_lines, entries

REPO = Path(__file__).resolve().parents[2]
MADE_BY = "tools/engine_oracle/aimed_records.py"


def differential():
    """bench/oracle_differential.py as a module (bench/ is not a package): its ``summarize`` writes the records."""
    mod = sys.modules.get("_oracle_differential")
    if mod is None:
        spec = importlib.util.spec_from_file_location("_oracle_differential", REPO / "bench" / "oracle_differential.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["_oracle_differential"] = mod
        spec.loader.exec_module(mod)
    return mod


def line_files(line: dict, variants: dict[str, dict], serve_configs: dict[str, str]) -> dict:
    """The config.json copies (``model_variants``: path -> compact entry) and ``--config`` files (``serve_configs``:
    path -> text) of a run that ``line`` names."""
    toks = set(line.get("argv") or [])
    mv = {p: v for p, v in variants.items() if str(Path(p).parent) in toks or p == line.get("model_config")}
    sc = {p: t for p, t in serve_configs.items() if p in toks}
    return {"model_variants": mv, "serve_configs": sc}


def release_records(release: str, files: list[Path] | None = None) -> tuple[list[dict], dict]:
    """The records of ``release``'s aimed lines and the release's summary (bench/oracle_differential.py summarize)."""
    from tools.engine_oracle.synth import Synth, compact_variant

    t0 = time.monotonic()
    diff = differential()
    engine, version, _w = RELEASES[release]
    es = entries(release, files)
    with tempfile.TemporaryDirectory(prefix="oracle-aimed-rec-") as d:
        with Synth(release, 0, Path(d)) as sy:
            lines = aimed_lines(sy, release, es)
            recs = sy.judge(lines, 0) if lines else []
            answers = [rec["answer"] for rec in recs]   # the oracle's whole answer, as the differential keeps it
            variants = ({str(p): compact_variant(json.loads(p.read_text()), sy.public)
                         for p in sorted(sy.variants.glob("*/config.json"))} if sy.variants.is_dir() else {})
            rows = [(line, diff.check_args(engine, version, line), ans) for line, ans in zip(lines, answers)]
            buf = io.StringIO()
            summary = diff.summarize(release, rows, buf)   # classified while the config.json copies exist
            out = []
            for text, e, line, rec in zip(buf.getvalue().splitlines(), es, lines, recs):
                r = json.loads(text)
                r["aimed"] = {"source": e["source"], "target": e["where"], "why": e.get("why"),
                              "hit": sy.site_at[e["where"]] in rec["sites"], "where": rec.get("where")}
                r.update(line_files(line, variants, sy.serve_configs))
                r["made_by"] = MADE_BY
                out.append(r)
    summary = {k: summary[k] for k in ("release", "judged", "decidable", "matrix", "runtime_only", "not_decidable",
                                       "false_refusals", "misses", "per_rule")}
    summary["false_refusal_list"] = [{k: r.get(k) for k in ("argv", "env", "aimed", "product", "oracle")}
                                     for r in out if r["class"] in ("false-refusal", "runtime-only-false-refusal")]
    summary["seconds"] = round(time.monotonic() - t0, 1)
    return out, summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tools.engine_oracle.aimed_records",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--releases", nargs="+", choices=sorted(RELEASES), default=list(RELEASES))
    ap.add_argument("--file", type=Path, nargs="+", help="these aimed-lines files only (default: every one)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON-lines records (bench/oracle_differential.py "
                                                            "--out format)")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    results = []
    tmp = a.out.with_name(a.out.name + ".part")
    try:
        with tmp.open("w") as f:
            for rel in a.releases:
                recs, summary = release_records(rel, a.file)
                for r in recs:
                    f.write(json.dumps(r) + "\n")
                f.flush()
                results.append(summary)
                print(json.dumps({"progress": rel, "lines": len(recs), "seconds": round(time.monotonic() - t0)}),
                      file=sys.stderr, flush=True)
    except (AimedError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tmp.replace(a.out)
    print(json.dumps({"made_by": MADE_BY, "code_commit": commit or None,
                      "aimed_files": sorted(str(Path(x).name) for x in a.file) if a.file else "tools/engine_oracle/aimed/*.yaml",
                      "out": str(a.out), "seconds": round(time.monotonic() - t0, 1), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
