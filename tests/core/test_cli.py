"""The CLI as a user runs it: exit codes, messages, JSON shapes, import/check-args parity."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from .test_flags import SEED_SGLANG, SEED_VLLM


def run(*args, input=None):
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", *args], capture_output=True, text=True, input=input, timeout=60)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_check_args_seed_vllm_warns_and_dcp_refuses():
    p = run("check-args", "--engine", "vllm", "-o", "json", "--", "vllm", "serve", "/models/Kimi-K3", *SEED_VLLM)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["ok"] is True
    assert {"vllm-kv-overcommit", "vllm-long-prefill-disabled"} <= {f["rule"] for f in out["findings"]}
    assert set(out["findings"][0]) == {"rule", "severity", "field", "message", "fix", "source"}
    p = run("check-args", "--engine", "vllm", "-o", "json", "--", *SEED_VLLM, "--decode-context-parallel-size", "8")
    assert p.returncode == 1
    errs = [f for f in json.loads(p.stdout)["findings"] if f["severity"] == "error"]
    assert errs[0]["rule"] == "vllm-dcp-with-dspark" and "dspark" in errs[0]["message"]


def test_check_args_seed_sglang_static_verify():
    p = run("check-args", "--engine", "sglang", "-o", "json", "--", *SEED_SGLANG)
    assert p.returncode == 0
    assert "sglang-dcp-static-verify" in {f["rule"] for f in json.loads(p.stdout)["findings"]}


@pytest.mark.parametrize("engine,argv", [("vllm", SEED_VLLM), ("sglang", SEED_SGLANG)])
def test_import_then_validate_equals_check_args(tmp_path, engine, argv):
    imp = run("import", "--engine", engine, "--", *argv)
    assert imp.returncode == 0, imp.stderr
    doc = yaml.safe_load(imp.stdout)
    assert doc["kind"] == "K3Deployment"
    f = tmp_path / "imported.yaml"
    f.write_text(imp.stdout)
    a = json.loads(run("validate", str(f), "-o", "json").stdout)
    b = json.loads(run("check-args", "--engine", engine, "-o", "json", "--", *argv).stdout)
    assert a == b


def test_import_exits_zero_even_when_refused():
    p = run("import", "--engine", "vllm", "--", *SEED_VLLM, "-dcp", "8")
    assert p.returncode == 0 and "dcp: 8" in p.stdout


def test_plan_json_keys():
    d = json.loads(run("plan", "--preset", "vllm-seed", "-o", "json").stdout)
    for k in ("engine", "kv_cache_budget_gib", "kv_cache_allocated_gib", "overcommit_gib", "kv_cache_tokens",
              "max_model_len", "max_concurrency"):
        assert k in d
    d = json.loads(run("plan", "--preset", "sglang-seed", "-o", "json").stdout)
    for k in ("full_attention_tokens", "draft_tokens", "mamba_state_gib", "max_running_requests"):
        assert k in d
    d2 = json.loads(run("plan", "-o", "json", "--engine", "sglang", "--", *SEED_SGLANG).stdout)
    assert d2["full_attention_tokens"] == d["full_attention_tokens"]


def test_explain_and_unknown_rule():
    p = run("explain", "vllm-dcp-with-dspark", "-o", "json")
    d = json.loads(p.stdout)
    assert d["applies_to"] == ["vllm kimi-k3", "vllm 0.28.0"] and "978-986" in d["sources"][0]["source"]
    p = run("explain", "vllm-dcp-with-dspak")
    assert p.returncode == 2 and "did you mean vllm-dcp-with-dspark" in p.stderr


def test_advise():
    d = json.loads(run("advise", "--context", "65536", "--concurrency", "10", "-o", "json").stdout)
    assert d["engine"] == "vllm"
    d = json.loads(run("advise", "--context", "204800", "--concurrency", "10", "-o", "json").stdout)
    assert d["engine"] == "sglang" and d["preset"] == "sglang-fixed"
    p = run("advise", "--context", "1000000", "--concurrency", "500")
    assert p.returncode == 1 and "no preset" in p.stdout


def test_presets_and_dry_run():
    p = run("presets", "-o", "json")
    names = [x["name"] for x in json.loads(p.stdout)]
    assert {"vllm-seed", "sglang-seed", "vllm-fixed", "sglang-fixed", "sglang-no-dcp", "vllm-dcp-no-spec"} <= set(names)
    p = run("dry-run", "-o", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["ok"] and d["launch"]["argv"][:2] == ["vllm", "serve"] and d["plan"]["kv_cache_tokens"] > 0
    assert "Deployment" in d["targets"]["kubernetes"] and "backend.json" in d["targets"]["gpustack"]
    assert d["targets"]["docker"].startswith("image vllm/vllm-openai:kimi-k3")
    k8s = run("render", "--target", "kubernetes", "-o", "json", "--preset", "vllm-fixed")
    sha = next(o for o in json.loads(k8s.stdout)["items"] if o["kind"] == "Deployment")["spec"]["template"][
        "metadata"]["annotations"]["k3.gpustack.ai/launch-sha256"]
    assert d["targets"]["launch"].startswith(f"launch.json, sha256 {sha[:12]}")


@pytest.mark.parametrize("content,code,needle", [
    ("spec: [", 2, "invalid YAML"),
    ("- a\n- b\n", 2, "expected a mapping"),
    ("metadata: {name: x}\nspec: {engine: {name: vllm}, bogus: 1}\n", 2, "spec.bogus: unknown field"),
    ("metadata: {name: x}\nspec: {engine: {name: tgi}}\n", 2, "spec.engine.name"),
    ("metadata: {name: x}\nspec: {engine: {name: vllm}, parallel: {tp: eight}}\n", 2, "spec.parallel.tp"),
    ("metadata: {name: x}\nspec: {engine: {name: vllm}, parallel: {tp: 8, dcp: 3}}\n", 1, "dcp-divides-tp"),
    ("a: 1\n---\nb: 2\n", 2, "one YAML document"),
])
def test_bad_documents(tmp_path, content, code, needle):
    f = tmp_path / "d.yaml"
    f.write_text(content)
    p = run("validate", str(f))
    assert p.returncode == code
    assert needle in (p.stdout + p.stderr)


def test_input_errors_exit_2():
    assert run("validate", "/nonexistent.yaml").returncode == 2
    assert run("validate").returncode == 2
    assert run("validate", "--preset", "nope").returncode == 2
    assert run("validate", "--bogus-flag").returncode == 2
    assert run("validate", "-", input="\x00\xff").returncode == 2
    # a command-line value is judged by the release's own bound (ParallelConfig.tensor_parallel_size >= 1):
    # refused (exit 1) with the field and the option named, not unusable input
    p = run("check-args", "--engine", "vllm", "--", "--tensor-parallel-size", "0")
    assert p.returncode == 1 and "[vllm-config-field-bounds] spec.parallel.tp: --tensor-parallel-size 0" in p.stdout


def test_stdin_and_size_limit():
    doc = "metadata: {name: x}\nspec: {engine: {name: vllm}, parallel: {tp: 8}}\n"
    assert run("validate", "-", input=doc).returncode == 0
    big = doc + "# " + "x" * (1 << 20) + "\n"
    p = run("validate", "-", input=big)
    assert p.returncode == 2 and "larger than" in p.stderr


BASE = "apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\nspec:\n  engine: {name: vllm}\n"


def _bomb(levels=9):
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return BASE + "  vllm:\n    attentionConfig:\n" + "".join(f"      {ln}\n" for ln in lines)


@pytest.mark.parametrize("content,needle", [
    (_bomb(), "aliases expand it to more than"),
    (BASE + "  vllm:\n    attentionConfig: &r {self: *r}\n", "recursive alias at line 7"),
    (BASE + "  memory:\n    fraction: 0.92\n    fraction: 0.99\n", "duplicate key 'fraction' (first at line 7)"),
    (BASE.replace("spec:\n", "spec: {}\nspec:\n"), "duplicate key 'spec'"),
    (BASE + "  scheduling: {maxNumSeqs: " + "9" * 5000 + "}\n", "4300 digits"),
    (BASE + "  memory: {fraction: .nan}\n", "spec.memory.fraction: Input should be a finite number"),
    (BASE.replace("{name: x}", "{name: x, namspace: prod}"), "metadata.namspace: unknown field"),
    (BASE.replace("{name: x}", "{name: x, namespace: Bad NS}"), "metadata.namespace"),
    (BASE + "  placement: {nodeSelector: {'a b': c}}\n", "spec.placement.nodeSelector"),
    (BASE + "  placement: {tolerations: [{key: [1, 2]}]}\n", "spec.placement.tolerations[0].key"),
    (BASE + "  placement: {tolerations: [{effect: Sometimes}]}\n", "spec.placement.tolerations[0].effect"),
    (BASE + "  storage: {model: {kind: pvc, source: 'Bad Name!'}}\n", "not a valid claim name"),
    (BASE + "  storage: {model: {kind: hostPath, source: models/k3}}\n", "absolute host path"),
    (BASE + "  startup: {budgetSeconds: 100000000}\n", "spec.startup.budgetSeconds"),
])
def test_unusable_documents_exit_2_naming_the_place(tmp_path, content, needle):
    f = tmp_path / "d.yaml"
    f.write_text(content)
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "validate", str(f)], capture_output=True, text=True,
                       timeout=30)   # an alias bomb must not hang
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and needle in p.stderr, p.stderr


def test_anchors_and_server_metadata_are_fine(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text(BASE.replace("{name: x}", "{name: x, uid: abc, resourceVersion: '7', generation: 2, "
                              "labels: &l {team: infer}}") + "  parallel: {tp: 8}\n  placement: {nodeSelector: *l}\n")
    p = run("validate", str(f))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("engine,argv,field,needle", [
    ("vllm", ["--speculative-config", '{"method":[1]}'], "argv[0]", '"method" must be a string'),
    ("vllm", ["--trust-remote-code=maybe"], "argv[0]", "ignored explicit argument 'maybe'"),
    ("vllm", ["--attention-config", '{"a":' * 3000 + "1" + "}" * 3000], "argv[0]", "--attention-config"),
    ("vllm", ["--speculative-config", '{"a":' * 3000 + "1" + "}" * 3000], "argv[0]", "--speculative-config"),
    ("vllm", ["-tp", "8", "--max-model-len"], "argv[2]", "expected one argument"),
    ("vllm", ["--kv-cache-dtype", "fp9"], "argv[0]", "invalid choice: 'fp9'"),
    ("vllm", ["-tp", "8", "--no-such-flag", "1"], "argv[2]", "unrecognized argument '--no-such-flag'"),
    ("sglang", ["--speculative-num-draft-tokens", "abc"], "argv[0]", "--speculative-num-draft-tokens"),
    ("sglang", ["--tp_size", "8"], "argv[0]", "unrecognized argument '--tp_size'"),
])
def test_refused_argv_exits_1_naming_the_token(engine, argv, field, needle):
    """What the engine's parser refuses is a finding (argv-refused) naming the token, never an extra arg."""
    p = run("check-args", "--engine", engine, "-o", "json", "--", *argv)
    assert p.returncode == 1, p.stderr
    refused = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "argv-refused"]
    assert refused and refused[0]["field"] == field and needle in refused[0]["message"], refused
    assert len(refused[0]["message"]) < 2000


def test_plan_of_a_refused_spec_shows_the_figures_and_exits_1():
    p = run("plan", "-o", "json", "--engine", "vllm", "--", "--gpu-memory-utilization=0.5", "-tp", "8")
    assert p.returncode == 1 and "fixed-memory-exceeds-budget" in p.stderr
    assert json.loads(p.stdout)["memory_fraction"] == 0.5


def test_a_fraction_out_of_range_is_unusable_input():
    """The range is a bound of the spec field: exit 2 naming the field and the flag, not a rule finding."""
    p = run("plan", "-o", "json", "--engine", "vllm", "--", "--gpu-memory-utilization=-0.5")
    assert p.returncode == 2 and "spec.memory.fraction (--gpu-memory-utilization)" in p.stderr
    # a command-line value is judged as the release judges it: SGLang 0.5.23 accepts -1.5 at config time (the oracle's
    # verdict) and fails at KV-pool sizing: the runtime-only memory rule refuses it, naming the field (exit 1)
    p = run("check-args", "--engine", "sglang", "--", "--mem-fraction-static", "-1.5")
    assert p.returncode == 1 and "[fixed-memory-exceeds-budget] spec.memory.fraction: fraction -1.5" in p.stdout
    # above 1 is a per-engine verdict, not a field bound: SGLang accepts it at config time and fails at KV-pool
    # sizing (rule sglang-mem-fraction-above-one, runtime-only); vLLM from 0.28.0 refuses it (vllm-config-bounds)
    p = run("check-args", "--engine", "sglang", "--", "--mem-fraction-static", "1.5")
    assert p.returncode == 1 and "sglang-mem-fraction-above-one" in p.stderr + p.stdout


def test_dry_run_refuses_what_a_target_refuses(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text(BASE + "  parallel: {tp: 8}\n  storage: {model: {kind: hostPath}}\n")
    p = run("dry-run", str(f))
    assert p.returncode == 1 and "render-volume-source" in p.stdout


def test_a_directory_is_not_a_missing_file(tmp_path):
    p = run("validate", str(tmp_path))
    assert p.returncode == 2 and "is a directory" in p.stderr


def test_run_start_and_run_are_the_same_command():
    a = run("run", "start", "--preset", "vllm-cpu-smollm2", "--runtime", "local", "--dry-run")
    b = run("run", "--preset", "vllm-cpu-smollm2", "--runtime", "local", "--dry-run")
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and a.stdout


def test_small_input_edges():
    p = run("advise", "--context", "1048577", "--concurrency", "4")   # one above the model's 1,048,576 positions
    assert p.returncode == 1 and "beyond kimi-k3's context" in p.stdout.lower()
    p = run("presets", "--show", "")
    assert p.returncode == 2 and "unknown preset ''" in p.stderr
    p = run("render", "--preset", "vllm-fixed", "--target", "argv", "--out", "")
    assert p.returncode == 2 and "--out" in p.stderr


def test_merge_keys_that_override_are_not_duplicates(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text(BASE + "  parallel: {tp: 8}\n  env: {<<: &e {A: '1'}, B: '2'}\n"
                 "x-anchors:\n  base: &base {a: 1}\n  list:\n    - &x {<<: *base, a: 2}\n  p: {<<: *x}\n")
    p = run("validate", str(f))
    assert "duplicate key" not in p.stderr and "x-anchors: unknown field" in p.stderr, p.stderr
