"""``bench/oracle_differential.py --rejudge RECORDS``: the product judged again with today's code on the lines an
earlier run wrote (``--out``), beside the engine verdicts those records hold; no oracle is started, so this runs in
the unit tier. The records here are written by the test: a config.json model with 32 attention heads, one line the
release refuses at its heads/TP check and one it accepts (the verdicts the vLLM 0.33.0 oracle gives them:
config/parallel.py / model.py verify_with_parallel_config)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
          "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
          "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


def _record(cfg: Path, argv: list[str], oracle: dict) -> dict:
    line = {"seed": "test", "argv": argv, "env": {}, "model": None, "model_config": str(cfg), "gpu_type": "b300",
            "gpus": 8, "mutations": []}
    return {"release": "vllm-0.33.0", "class": "stale", "product": {"verdict": "stale", "rules": []},
            "oracle": oracle, "argv": argv, "env": {}, "line": line}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "oracle_differential.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_rejudge_judges_the_recorded_lines_again(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    refused = {"verdict": "refused", "stage": "create_engine_config", "type": "ValueError",
               "message": "Total number of attention heads (32) must be divisible by tensor parallel size (3).",
               "where": "vllm/config/model.py:1432"}
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in (
        _record(cfg, ["/models/m", "--tensor-parallel-size", "3"], refused),
        _record(cfg, ["/models/m", "--tensor-parallel-size", "2"], {"verdict": "accepted", "stage": "run_server"}))))
    out = tmp_path / "again.jsonl"
    res = _run("--rejudge", str(records), "--out", str(out))
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["rejudged"] == str(records) and "seed" not in summary
    (r,) = summary["results"]
    assert r["release"] == "vllm-0.33.0" and r["judged"] == 2, r
    assert r["misses"] == 0 and r["false_refusals"] == 0, r
    again = [json.loads(t) for t in out.read_text().splitlines()]
    assert [a["product"]["verdict"] for a in again] == ["refuse", "pass"], again
    assert again[0]["class"].startswith("agree-refuse") and again[1]["class"] == "agree-pass", again
    assert again[0]["oracle"] == refused and again[0]["line"]["argv"][-1] == "3"


def test_rejudge_refuses_records_without_their_line(tmp_path):
    records = tmp_path / "old.jsonl"
    records.write_text(json.dumps({"release": "vllm-0.33.0", "oracle": {"verdict": "accepted"}, "argv": []}) + "\n")
    res = _run("--rejudge", str(records))
    assert res.returncode != 0 and "old.jsonl:1: a record without its line" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
