"""Prediction over the config.json files aiconfigurator-core ships (its model_configs/): per family, what predicts
and what is named "not modelled" / "no data" -- never a crash, never another model's figures.

    python3 bench/predict_families.py [--all] [--engine vllm] [--gpu b300] [--tp 8] [-o json]

Default: the first config of each architecture (``--all``: every config). Each row runs ``predict`` on a
one-role document whose model is that config (``--model-config``), input 4,096 / output 64 tokens, 4 clients,
and reports the decode step, the band's measured share, or the exit-2 message. Prints JSON (``-o json``) or a
markdown table. Needs the [predict] extra.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOC = """apiVersion: k3.gpustack.ai/v1alpha1
kind: K3Deployment
metadata: {{name: family-bench}}
spec:
  engine: {{name: {engine}, version: {version}}}
  model: {{name: bench-model}}
  hardware: {{gpuType: {gpu}}}
  parallel: {{tp: {tp}}}
"""
VERSIONS = {"vllm": "0.33.0", "sglang": "0.5.23"}


def configs(every: bool) -> list[pathlib.Path]:
    from importlib import resources

    files = sorted(pathlib.Path(str(resources.files("aiconfigurator_core").joinpath("model_configs")))
                   .glob("*_config.json"))
    files = [f for f in files if not f.name.endswith("_hf_quant_config.json")]
    if every:
        return files
    seen, out = set(), []
    for f in files:
        arch = (json.loads(f.read_text()).get("architectures") or ["?"])[0]
        if arch not in seen:
            seen.add(arch)
            out.append(f)
    return out


def run_one(doc: str, cfg: pathlib.Path) -> dict:
    import contextlib
    import io

    from gpustack_k3.cli.main import run

    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run(["predict", doc, "--model-config", str(cfg), "--input-len", "4096", "--output-len", "64",
                  "--concurrency", "4", "-o", "json"])
    row = {"config": cfg.name, "architecture": (json.loads(cfg.read_text()).get("architectures") or ["?"])[0],
           "exit": rc, "s": round(time.monotonic() - t0, 1)}
    if "Traceback" in err.getvalue() or rc not in (0, 1, 2):
        row["crash"] = err.getvalue()[-400:]
        return row
    d = json.loads(out.getvalue())
    if rc == 0:
        r = d["roles"][0]
        row.update(family=r["model"]["family"], step_ms=r["decode"]["step_ms"],
                   measured_share=r["band"]["decode_step_measured_share"], bottleneck=r["bottleneck"]["decode_step"])
    elif rc == 2:
        row["why"] = d["error"]["message"][:160]
    else:
        row["why"] = "; ".join(f"{f['rule']}: {f['message']}" for f in d["findings"] if f["severity"] == "error")[:160]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every config, not one per architecture")
    ap.add_argument("--engine", default="vllm", choices=sorted(VERSIONS))
    ap.add_argument("--gpu", default="b300")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("-o", "--output", default="markdown", choices=["markdown", "json"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        doc = pathlib.Path(tmp) / "doc.yaml"
        doc.write_text(DOC.format(engine=a.engine, version=VERSIONS[a.engine], gpu=a.gpu, tp=a.tp))
        rows = []
        for cfg in configs(a.all):
            rows.append(run_one(str(doc), cfg))
            print(f"{cfg.name}: exit {rows[-1]['exit']} ({rows[-1]['s']} s)", file=sys.stderr)
    summary = {"configs": len(rows), "predicted": sum(r["exit"] == 0 for r in rows),
               "no_data": sum(r["exit"] == 2 for r in rows), "refused": sum(r["exit"] == 1 for r in rows),
               "crashed": sum("crash" in r for r in rows)}
    if a.output == "json":
        print(json.dumps({"summary": summary, "rows": rows}, indent=2))
    else:
        print("| config | architecture | family | decode step ms | measured share | or why not |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['config'].removesuffix('_config.json')} | {r['architecture']} | {r.get('family', '')} | "
                  f"{r.get('step_ms', '')} | {r.get('measured_share', '')} | {r.get('why', r.get('crash', ''))} |")
        print(f"\n{summary}")
    return 1 if summary["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
