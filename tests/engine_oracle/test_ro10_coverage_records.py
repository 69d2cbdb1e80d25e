"""tools/engine_oracle/coverage.py from several record files (a differential's --out and the aimed lines' records,
tools/engine_oracle/aimed_records.py), and bench/oracle_differential.py --rejudge on an aimed line's record (unit tier:
no engine started; the product is judged in-process)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import yaml

from tools.engine_oracle import coverage

REPO = Path(__file__).resolve().parents[2]
REL = "vllm-0.34.0"


def _rules(n=3):
    """``n`` argv-family error rules of the registry (their statuses are computed, not advisory/not-argv)."""
    return [r["rule"] for r in coverage.registry() if r["family"] in coverage.ARGV_FAMILIES
            and r["severity"] == "error"][:n]


def _rec(rule, verdict, argv, release=REL, env=None, **extra):
    line = {"argv": argv, "env": env or {}, "gpu_type": "b300", "gpus": 8}
    return {"release": release, "class": "agree-refuse" if verdict == "refused" else "false-refusal",
            "product": {"verdict": "refuse", "rules": [rule]}, "oracle": {"verdict": verdict, "message": f"no {rule}"},
            "argv": argv, "env": env or {}, "line": line, **extra}


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _made(tmp_path, *files, extra=()) -> dict:
    out = tmp_path / "rule_oracle.yaml"
    assert coverage.main(["--from", *map(str, files), "--out", str(out), *extra]) == 0
    return yaml.safe_load(out.read_text())


def test_several_files_are_one_record_and_each_is_named(tmp_path):
    a, b, _c = _rules()
    diff = _write(tmp_path / "seed.jsonl", [_rec(a, "refused", ["/models/x", "-tp", "8"])])
    aimed = _write(tmp_path / "aimed.jsonl", [_rec(b, "refused", ["/models/x", "-tp", "3"], release="vllm-0.33.0",
                                                   aimed={"source": "aimV1.yaml:4", "target": "vllm/x.py:1"})])
    (tmp_path / "seed.json").write_text(json.dumps({"seed": 0, "lines_per_release": 1, "pairs": 0, "results": []}))
    doc = _made(tmp_path, diff, aimed)
    assert doc["releases"] == ["vllm-0.33.0", REL]
    assert doc["rules"][a]["releases"][REL]["status"] == "agrees"
    assert doc["rules"][b]["releases"]["vllm-0.33.0"]["status"] == "agrees"
    assert doc["rules"][a]["releases"]["vllm-0.33.0"] == {"status": "not-fired"}
    files = doc["from"]["files"]
    assert [f["file"] for f in files] == ["seed.jsonl", "aimed.jsonl"] and doc["from"]["records"] == 2
    assert files[0]["seed"] == 0 and files[0]["records_per_release"] == {REL: 1}
    assert files[1]["aimed_files"] == ["aimV1.yaml"] and files[1]["kind"].startswith("aimed lines")
    from gpustack_k3.catalog.rule_oracle import run_text

    assert run_text(doc["from"]) == ("seed.jsonl: differential, seed 0, 1 lines per release, 1 records; aimed.jsonl: "
                                     "aimed lines (1 files of tools/engine_oracle/aimed), 1 records")


def test_a_line_judged_in_two_files_counts_once(tmp_path):
    a, b, _c = _rules()
    same = _rec(a, "refused", ["/models/x", "-tp", "8"], env={"VLLM_X": "1"})
    other_env = _rec(a, "refused", ["/models/x", "-tp", "8"], env={"VLLM_X": "2"})
    # a config.json copy of two runs: the same content-named directory under another temporary directory
    v1 = _rec(b, "refused", ["/tmp/run1/models/abc123", "-tp", "8"],
              model_variants={"/tmp/run1/models/abc123/config.json": {"x": 1}})
    v2 = _rec(b, "refused", ["/tmp/run2/models/abc123", "-tp", "8"],
              model_variants={"/tmp/run2/models/abc123/config.json": {"x": 1}})
    f1 = _write(tmp_path / "one.jsonl", [same, same, v1])   # a repeat within one file counts as the file gives it
    f2 = _write(tmp_path / "two.jsonl", [same, other_env, v2])
    doc = _made(tmp_path, f1, f2)
    assert doc["rules"][a]["releases"][REL]["fired"] == 3     # two from one.jsonl, the other env from two.jsonl
    assert doc["rules"][b]["releases"][REL]["fired"] == 1
    assert [f.get("duplicates") for f in doc["from"]["files"]] == [None, 2]
    assert doc["from"]["records"] == 4 and doc["from"]["files"][1]["records"] == 1


def test_every_registry_rule_is_in_the_record_and_check_finds_a_stale_one(tmp_path):
    a, _b, _c = _rules()
    f = _write(tmp_path / "one.jsonl", [_rec(a, "refused", ["/models/x"])])
    out = tmp_path / "rule_oracle.yaml"
    ids = [r["rule"] for r in coverage.registry()]
    # a committed record made before some rules existed: --check names them and fails
    doc = _made(tmp_path, f)
    assert list(doc["rules"]) == ids
    assert all(e["releases"] == {REL: {"status": "not-fired"}} for rid, e in doc["rules"].items()
               if rid != a and e["severity"] == "error" and e["family"] in coverage.ARGV_FAMILIES)
    assert doc["from"]["never_fired"] == sum(1 for rid, e in doc["rules"].items() if rid != a
                                             and e["releases"][REL]["status"] == "not-fired")
    assert coverage.main(["--from", str(f), "--out", str(out), "--check"]) == 0
    stale = dict(doc, rules={k: v for k, v in doc["rules"].items() if k != ids[-1]})
    out.write_text(coverage.render(stale))
    assert coverage.main(["--from", str(f), "--out", str(out), "--check"]) == 1
    assert "rule_oracle" in out.name and yaml.safe_load(out.read_text())["rules"].keys() == stale["rules"].keys()


def test_merge_keeps_working_with_several_files(tmp_path):
    a, b, _c = _rules()
    old = _made(tmp_path, _write(tmp_path / "old.jsonl", [_rec(a, "refused", ["/models/x"], release="vllm-0.11.0")]))
    assert old["rules"][a]["releases"]["vllm-0.11.0"]["status"] == "agrees"
    new = _made(tmp_path, _write(tmp_path / "n1.jsonl", [_rec(b, "refused", ["/models/y"])]),
                _write(tmp_path / "n2.jsonl", [_rec(b, "refused", ["/models/y"])]), extra=("--merge",))
    assert new["releases"] == ["vllm-0.11.0", REL]
    assert new["rules"][a]["releases"]["vllm-0.11.0"]["status"] == "agrees"
    assert new["rules"][b]["releases"][REL]["fired"] == 1
    assert [f["file"] for f in new["merged"][-1]["files"]] == ["n1.jsonl", "n2.jsonl"]


# an aimed line's record (tools/engine_oracle/aimed_records.py, vLLM 0.11.0, aim9a.yaml:2): its model is a config.json
# copy of its run (sliding_window 4096 on a public Llama config) whose directory is gone; the engine refused at
# vllm/config/cache.py:193@0.11.0
GONE = "/tmp/ro10-gone-run/models/69eb92d6fd68"
AIMED = {"release": "vllm-0.11.0", "class": "agree-refuse",
         "product": {"verdict": "refuse", "rules": ["vllm-prefix-caching-sliding-window-v0-011"], "exit": 1},
         "oracle": {"id": 3, "verdict": "refused", "stage": "create_engine_config", "type": "NotImplementedError",
                    "message": "Prefix caching is not supported with sliding window. Run with --disable-sliding-window "
                               "to use prefix caching.", "where": "vllm/config/cache.py:193"},
         "mutations": ["aimed:aim9a.yaml:2"], "seed": "aimed/aim9a.yaml:2",
         "argv": [GONE, "--tensor-parallel-size", "8", "--enable-prefix-caching"], "env": {"VLLM_USE_V1": "0"},
         "line": {"argv": [GONE, "--tensor-parallel-size", "8", "--enable-prefix-caching"], "env": {"VLLM_USE_V1": "0"},
                  "model": None, "model_config": f"{GONE}/config.json", "gpu_type": "b300", "gpus": 8,
                  "target": "vllm/config/cache.py:193", "mutations": ["aimed:aim9a.yaml:2"],
                  "seed": "aimed/aim9a.yaml:2"},
         "aimed": {"source": "aim9a.yaml:2", "target": "vllm/config/cache.py:193", "hit": True,
                   "where": "vllm/config/cache.py:193"},
         "model_variants": {f"{GONE}/config.json": {"__public__": "meta-llama--Meta-Llama-3.1-8B",
                                                    "__set__": {"sliding_window": 4096}}},
         "serve_configs": {}, "made_by": "tools/engine_oracle/aimed_records.py"}


def test_rejudge_judges_an_aimed_record_on_its_restored_config_copy(tmp_path):
    spec = importlib.util.spec_from_file_location("_ro10_differential", REPO / "bench" / "oracle_differential.py")
    diff = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_ro10_differential", diff)
    spec.loader.exec_module(diff)
    assert not Path(GONE).exists()
    src = _write(tmp_path / "aimed.jsonl", [AIMED])
    with (tmp_path / "rj.jsonl").open("w") as out:
        (res,) = diff.rejudge(src, out)
    assert res["release"] == "vllm-0.11.0" and res["matrix"]["engine_refused"]["product_pass"] == 0
    (rec,) = [json.loads(x) for x in (tmp_path / "rj.jsonl").read_text().splitlines()]
    # the product read the restored copy (sliding_window 4096) and refused as before, for the engine's reason
    assert rec["product"]["rules"] == ["vllm-prefix-caching-sliding-window-v0-011"]
    assert rec["class"] == "agree-refuse" and rec["oracle"] == AIMED["oracle"]
    # the record stays an aimed record, re-judgeable again: its line, entry and config copy as they were
    assert rec["line"] == AIMED["line"] and rec["argv"] == AIMED["argv"]
    assert rec["aimed"] == AIMED["aimed"] and rec["model_variants"] == AIMED["model_variants"]
    assert "runtime_judge" not in rec
    # and coverage reads the re-judged record as the aimed line's evidence for the rule on that release
    doc = _made(tmp_path, tmp_path / "rj.jsonl")
    entry = doc["rules"]["vllm-prefix-caching-sliding-window-v0-011"]["releases"]["vllm-0.11.0"]
    assert entry["status"] == "agrees" and entry["engine_message"].startswith("Prefix caching is not supported")


def test_a_rejudged_run_is_named_with_its_engine_runs_seed(tmp_path):
    """bench/oracle_differential.py --rejudge's summary names the records it re-judged; the engine run's summary beside
    them gives the header the seed and sizes (a re-judged seed-0 run is still the seed-0 corpus)."""
    a, _b, _c = _rules()
    first = _write(tmp_path / "run.jsonl", [_rec(a, "refused", ["/models/x"])])
    (tmp_path / "run.json").write_text(json.dumps({"seed": 0, "lines_per_release": 1000, "pairs": 150,
                                                   "results": []}))
    rj = _write(tmp_path / "rj.jsonl", [_rec(a, "refused", ["/models/x"])])
    (tmp_path / "rj.json").write_text(json.dumps({"rejudged": str(first), "results": []}))
    (entry,) = _made(tmp_path, rj)["from"]["files"]
    assert entry["rejudged"] == "run.jsonl" and entry["seed"] == 0 and entry["lines_per_release"] == 1000
