"""Helper am10v's rule (gpustack_k3/core/rules/vllm_checks_am10v.py: explicit HMA on chunked local attention,
torch_shm without spawn and an EC producer, on 0.28.0 - 0.34.0) and extensions of helper mfixV's Python rules (gpustack_k3/core/rules/vllm_checks_mfixV.py) to 0.28.0,
0.29.0 (and two to the CPU build 0.32.0-cpu), judged by those releases: --quantization-config linear/moe specs (vllm-quantization-config-spec-invalid),
the nvfp4 KV cache on MLA (vllm-nvfp4-kv-cache-on-mla) and Inkling LoRA (vllm-inkling-lora-multimem-ar). Each REFUSE
line (an aimed line of tools/engine_oracle/aimed/aimV1-3.yaml, or one like it) is refused by the release and the
product refuses it too; each ACCEPT line (one fact changed) is accepted by the release and none of these rules refuses
it. The lines run through tools/engine_oracle/aimed.py with the product's verdict, in its line mode on the session's
worker of the release (as tests/engine_oracle/test_mfixV_rules_oracle.py: no site is asserted here, so no coverage.py
over every validation file on a worker of its own; tests/engine_oracle/test_aimed.py holds the line mode's verdicts to
the coverage mode's). (The entries of the h-am10v block
of gpustack_k3/catalog/data/checks/vllm.yaml are judged by tests/engine_oracle/test_checks_vllm.py.)"""
from __future__ import annotations

import pytest
import yaml

from tools.engine_oracle import aimed as A

pytestmark = pytest.mark.engine_oracle

MINE = {"vllm-quantization-config-spec-invalid", "vllm-nvfp4-kv-cache-on-mla", "vllm-inkling-lora-multimem-ar",
        "vllm-synthetic-acceptance-out-of-range", "vllm-hma-explicit-chunked-local-attention",
        "vllm-mm-torch-shm-needs-spawn", "vllm-ec-producer-needs-multimodal",
        "vllm-language-model-only-mm-encoder-cudagraph"}
# a raise site of each release (the aimed format names one per entry; an ACCEPT line runs none of them)
SITE = {"vllm-0.28.0": "vllm/config/speculative.py:270", "vllm-0.29.0": "vllm/config/speculative.py:562",
        "vllm-0.32.0-cpu": "vllm/config/speculative.py:589", "vllm-0.33.0": "vllm/config/speculative.py:614",
        "vllm-0.34.0": "vllm/config/speculative.py:662"}
R4 = ("vllm-0.28.0", "vllm-0.29.0", "vllm-0.33.0", "vllm-0.34.0")
CHUNKED = {"attention_chunk_size": 1024}
HMA_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
OLD = ("vllm-0.28.0", "vllm-0.29.0")
CPU = ("vllm-0.32.0-cpu",)
SYN = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "rejection_sample_method": "synthetic"}
INKLING = {"architectures": ["InklingForCausalLM"]}


def e(kind: str, why: str, releases=OLD, **line) -> dict:
    return {"why": f"{kind} {why}", "releases": tuple(releases), **line}


LINES = [
    # --quantization-config (aimV3.yaml:19, 20, 22)
    *(e(kind, f"quantization_config {qc}", seed="shape/gqa-dense",
        set={"--quantization": "online", "--quantization-config": qc}) for kind, qc in (
        ("REFUSE", {"linear": {"weight": 5}}), ("REFUSE", {"linear": "not_a_quant_name"}),
        ("REFUSE", {"linear": "int8_per_group_32"}), ("REFUSE", {"linear": "int8_per_channel_weight_only"}),
        ("REFUSE", {"linear": "nvfp4_per_token"}),
        ("ACCEPT", {"linear": {"weight": "mxfp8"}}), ("ACCEPT", {"linear": "fp8_per_tensor_static"}),
        ("ACCEPT", {"moe": "int8_per_channel_weight_only"}), ("ACCEPT", {"moe": "nvfp4_per_token"}))),
    # plain nvfp4 KV cache on MLA (aimV2.yaml:47)
    e("REFUSE", "nvfp4 KV cache, MLA", seed="shape/mla-moe", set={"--kv-cache-dtype": "nvfp4"}),
    e("REFUSE", "nvfp4_4over6 KV cache, MLA", seed="shape/mla-moe", set={"--kv-cache-dtype": "nvfp4_4over6"}),
    e("ACCEPT", "nvfp4 KV cache, dense GQA", seed="shape/gqa-dense", set={"--kv-cache-dtype": "nvfp4"}),
    e("ACCEPT", "nvfp4 KV cache, MLA disabled", seed="shape/mla-moe", set={"--kv-cache-dtype": "nvfp4"},
      env={"VLLM_MLA_DISABLE": "1"}),
    # Inkling LoRA (aimV1.yaml:16)
    e("REFUSE", "Inkling LoRA, INKLING_MULTIMEM_AR unset", seed="shape/gqa-dense", config=INKLING,
      set={"--enable-lora": True}),
    e("ACCEPT", "Inkling LoRA, INKLING_MULTIMEM_AR=0", seed="shape/gqa-dense", config=INKLING,
      set={"--enable-lora": True}, env={"INKLING_MULTIMEM_AR": "0"}),
    # synthetic acceptance figures on the CPU build (aim9c.yaml:7-8, aim9f.yaml:1-2)
    # explicit HMA on chunked local attention (aim9b.yaml:16, aimV2.yaml:35): core/rules/vllm_checks_am10v.py
    e("REFUSE", "explicit HMA, attention_chunk_size, opt-in 0", R4, seed="shape/gqa-dense", config=CHUNKED,
      set={"--no-disable-hybrid-kv-cache-manager": True}, env={HMA_ENV: "0"}),
    e("ACCEPT", "explicit HMA, attention_chunk_size, opt-in 1", R4, seed="shape/gqa-dense", config=CHUNKED,
      set={"--no-disable-hybrid-kv-cache-manager": True}, env={HMA_ENV: "1"}),
    e("ACCEPT", "HMA left to vLLM, attention_chunk_size, opt-in 0", R4, seed="shape/gqa-dense", config=CHUNKED,
      env={HMA_ENV: "0"}),
    # --mm-tensor-ipc torch_shm on a multimodal model (aimV2.yaml:32), an encode-only EC producer (aimV2.yaml:40)
    e("REFUSE", "torch_shm, Qwen3-VL, VLLM_WORKER_MULTIPROC_METHOD unset", R4, seed="shape/gqa-dense",
      public="Qwen--Qwen3-VL-8B-Instruct", set={"--tensor-parallel-size": "1", "--mm-tensor-ipc": "torch_shm"}, gpus=1),
    e("ACCEPT", "torch_shm, Qwen3-VL, VLLM_WORKER_MULTIPROC_METHOD spawn", R4, seed="shape/gqa-dense",
      public="Qwen--Qwen3-VL-8B-Instruct", set={"--tensor-parallel-size": "1", "--mm-tensor-ipc": "torch_shm"}, gpus=1,
      env={"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}),
    e("ACCEPT", "torch_shm, text-only model", R4, seed="shape/gqa-dense",
      set={"--tensor-parallel-size": "1", "--mm-tensor-ipc": "torch_shm"}, gpus=1),
    e("REFUSE", "ec_producer, text-only model", R4[1:], seed="shape/gqa-dense",
      set={"--ec-transfer-config": {"ec_connector": "ECExampleConnector", "ec_role": "ec_producer"}}),
    e("ACCEPT", "ec_consumer, text-only model", R4[1:], seed="shape/gqa-dense",
      set={"--ec-transfer-config": {"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer"}}),
    # --language-model-only with encoder CUDA graphs on a multimodal class (aim9h.yaml:16)
    e("REFUSE", "language-model-only, cudagraph_mm_encoder, Qwen2-Audio class", R4[1:], seed="shape/gqa-dense",
      config={"architectures": ["Qwen2AudioForConditionalGeneration"]},
      set={"--language-model-only": True, "--compilation-config": {"cudagraph_mm_encoder": True}}),
    e("ACCEPT", "language-model-only, Qwen2-Audio class", R4[1:], seed="shape/gqa-dense",
      config={"architectures": ["Qwen2AudioForConditionalGeneration"]}, set={"--language-model-only": True}),
    e("ACCEPT", "language-model-only, cudagraph_mm_encoder, text-only model", R4[1:], seed="shape/gqa-dense",
      set={"--language-model-only": True, "--compilation-config": {"cudagraph_mm_encoder": True}}),
    # the CPU build: the dense / MLA shapes with a short context (its aimed lines' form)
    e("REFUSE", "nvfp4 KV cache, MLA (CPU build)", CPU, seed="shape/mla-moe",
      set={"--max-model-len": 4096, "--kv-cache-dtype": "nvfp4"}),
    e("ACCEPT", "fp8 KV cache, MLA (CPU build)", CPU, seed="shape/mla-moe",
      set={"--max-model-len": 4096, "--kv-cache-dtype": "fp8"}),
    *(e(kind, f"synthetic {fig}", CPU, seed="shape/gqa-dense",
        set={"--max-model-len": 4096, "--speculative-config": {**SYN, **fig}}) for kind, fig in (
        ("REFUSE", {"synthetic_acceptance_rates": [0.5, 0.8, 0.2]}), ("REFUSE", {"synthetic_acceptance_length": 9}),
        ("REFUSE", {"synthetic_acceptance_rates": [0.8, 0.5]}), ("REFUSE", {"synthetic_acceptance_rates": [1.5, 0.5, 0.2]}),
        ("ACCEPT", {"synthetic_acceptance_rates": [0.8, 0.5, 0.2]}), ("ACCEPT", {"synthetic_acceptance_length": 4}))),
]


@pytest.mark.parametrize("release", tuple(SITE))
def test_the_release_refuses_each_refuse_line_and_accepts_each_twin(oracles, tmp_path, release):
    mine = [x for x in LINES if release in x["releases"]]
    entries = [{"targets": {release: SITE[release]}, **{k: v for k, v in x.items() if k != "releases"}} for x in mine]
    path = tmp_path / "am10v.yaml"
    path.write_text(yaml.safe_dump(entries, sort_keys=False))
    doc = A.run(release, files=[path], product=True, mode="line", oracle=oracles(release))
    verdicts = {x["why"]: x["verdict"] for x in doc["aimed"]}
    for x in mine:
        want = "refused" if x["why"].startswith("REFUSE") else "accepted"
        assert verdicts.get(x["why"]) == want, (release, x["why"], verdicts.get(x["why"]))
    p = doc["product"]
    whys = {f"aimed:am10v.yaml:{i}": x["why"] for i, x in enumerate(mine)}
    missed = [whys.get(m["mutations"][0], m["mutations"]) for m in p["misses"]]
    assert not missed, (release, missed)
    ours = [(whys.get(m["mutations"][0]), m.get("product_rules")) for m in p["false_refusals"]
            if set(m.get("product_rules") or ()) & MINE]
    assert not ours, (release, ours)
