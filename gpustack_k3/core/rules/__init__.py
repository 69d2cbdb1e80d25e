"""The rule registry (``registry.RULES``) and its families; importing this package defines every rule.

``validate(doc)`` / ``validate_resolved(r)`` run the spec and args rules; ``render_findings``, ``schema_findings``
and ``log.diagnose`` run the render, schema and log families. See docs/design/001-rule-registry.md.
"""
from gpustack_k3.core.rules import args, log, rack, render, schema, sglang, spec  # noqa: F401 - each module defines its family
from gpustack_k3.core.rules import memory, topology, topology_sglang  # noqa: F401 - memory: the planner's rules (spec family)
from gpustack_k3.core.rules import vllm_034  # noqa: F401 - vLLM 0.34.0's new refusals (spec family)
from gpustack_k3.core.rules import checks  # noqa: F401 - the engine-check tables (catalog/data/checks): args family
from gpustack_k3.core.rules import model_identity  # noqa: F401 - model.name against model.source and the draft
from gpustack_k3.core.rules import vllm_checks  # noqa: F401 - vLLM refusals the checks table cannot express (JSON keys)
from gpustack_k3.core.rules import config_fields  # noqa: F401 - vLLM config classes' field constraints (args family)
from gpustack_k3.core.rules import vllm_checks_vmiss6  # noqa: F401 - vLLM refusals over lists, model facts and env (args family)
from gpustack_k3.core.rules import vllm_checks_vmiss7  # noqa: F401 - vLLM refusals over the checkpoint's files (args family)
from gpustack_k3.core.rules.registry import RULES, Rule, RuleDefinitionError
from gpustack_k3.core.rules.render import render_findings
from gpustack_k3.core.rules.runner import Ctx, in_role, validate, validate_resolved, validate_topology
from gpustack_k3.core.rules.schema import schema_findings

from gpustack_k3.core.rules import vllm_checks_lora7  # noqa: F401,E402 - --enable-lora on a class without SupportsLoRA (args family)
from gpustack_k3.core.rules import vllm_checks_lateB  # noqa: F401,E402 - --disable-sliding-window with RoPE scaling, 0.11.0 (args family)
from gpustack_k3.core.rules import vllm_checks_lateA  # noqa: F401,E402 - --show-hidden-metrics-for-version not a version (args family)
from gpustack_k3.core.rules import sglang_checks_aimS2  # noqa: F401,E402 - an inline --watermark-config SGLang refuses (args family)
from gpustack_k3.core.rules import vllm_checks_miss8, sglang_checks_miss8  # noqa: F401,E402 - nsight backend, sliding-window length, model-config parser (helper miss8)
from gpustack_k3.core.rules import sglang_checks_aimS3  # noqa: F401,E402 - FlashInfer linear attention on SM100+ needs a bf16 SSM state (args family)
from gpustack_k3.core.rules import vllm_checks_aimV3  # noqa: F401,E402 - --device-ids beyond CUDA_VISIBLE_DEVICES (args family)
from gpustack_k3.core.rules import vllm_checks_miss9  # noqa: F401,E402 - unknown VLLM_ env with --fail-on-environ-validation, draft model name (helper miss9)
from gpustack_k3.core.rules import sglang_checks_mfixS  # noqa: F401,E402 - model-class refusals: attention backend, attention DP / CP, MiMo V2 fused qkv (helper mfixS)
from gpustack_k3.core.rules import vllm_checks_mfixV  # noqa: F401,E402 - synthetic acceptance figures, Qwen3-Omni DSpark self-draft (helper mfixV)
from gpustack_k3.core.rules import vllm_checks_mfix11  # noqa: F401,E402 - eagle3 targets, MTP token multiples, -O compile_sizes names, ModelOpt quant_algo, float16 model types, V0 prefix caching with a sliding window, swap space vs host RAM (warning), 0.11.0 (helper mfix11)
from gpustack_k3.core.rules import vllm_checks_late9v  # noqa: F401,E402 - --model-class-overrides values not <module>:<class> (helper late9v)
from gpustack_k3.core.rules import sglang_checks_m10s  # noqa: F401,E402 - --quantization against the checkpoint, external linker on a GPU-picked deterministic backend (helper m10s)
from gpustack_k3.core.rules import vllm_checks_m10v  # noqa: F401,E402 - an explicit max_cudagraph_capture_size below 1 with CUDA graphs on (error / undecided warning) (helper m10v)
from gpustack_k3.core.rules import vllm_checks_am10v  # noqa: F401,E402 - explicit HMA on chunked local attention (helper am10v)
from gpustack_k3.core.rules import vllm_checks_m11v  # noqa: F401,E402 - --dtype auto on a bfloat16-only quantization, a draft without a count: warnings naming the undecided term (helper m11v)
from gpustack_k3.core.rules import vllm_checks_draft11  # noqa: F401,E402 - a draft whose read config.json gives no n_predict (helper draft11)
from gpustack_k3.core.rules import vllm_checks_lead11  # noqa: F401,E402 - DSpark-only speculative options judged on the method 0.28.0/0.29.0 resolve (lead, round 11)
from gpustack_k3.core.rules import sglang_checks_am10s  # noqa: F401,E402 - UNO speculative decoding, 0.5.22 tokenspeed_mla off Blackwell, 0.5.22 KV sharding of a DSA model (helper am10s)
from gpustack_k3.core.rules import sglang_checks_am11s  # noqa: F401,E402 - KV sharding page size / chunk rounding / chunked attention / 0.5.23 DSA, HiSparse draft tree, Elastic EP join target, Qwen3-MoE W4A16_NVFP4 runner (helper am11s)
from gpustack_k3.core.rules import vllm_checks_v2r10  # noqa: F401,E402 - Model Runner V2's unsupported features with VLLM_USE_V2_MODEL_RUNNER=1, per release (helper v2r10)
from gpustack_k3.core.rules import vllm_checks_reg11  # noqa: F401,E402 - what the release's model registry says of the architecture: runner, PP, video pruning, renderer workers, --model-impl transformers, the Transformers fallback (helper reg11)
from gpustack_k3.core.rules import sglang_checks_m11s  # noqa: F401,E402 - --json-model-override-args not a JSON object, a page size with the no_buffer mamba radix cache (helper m11s)

__all__ = ["RULES", "Ctx", "Rule", "RuleDefinitionError", "render_findings", "schema_findings", "validate",
           "validate_resolved", "validate_topology", "in_role"]
