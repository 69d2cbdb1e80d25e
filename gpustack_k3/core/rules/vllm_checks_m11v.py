"""vLLM config-time refusals whose deciding term is a file the checkpoint carries (helper m11v, held-out seeds 57119
and 46901): where the line and the config.json the product reads cannot decide them, these rules warn and name the
term; the refusals the line does decide are entries of gpustack_k3/catalog/data/checks/vllm.yaml (the h-m11v block)
and the --dtype auto arm of rule dtype-vs-quantization (gpustack_k3/core/rules/spec.py auto_dtype).

- vllm-dtype-auto-quantization-undecided: --dtype auto with --runner pooling on a checkpoint whose quantization method
  runs in bfloat16 only (MXFP4) and whose config.json gives no dtype. ModelConfig then takes the safetensors weights'
  dtype, and without weights (or with float32 weights) float32, which the pooling runner turns into float16: the
  quantization method refuses it (config/vllm.py:781-787@0.28.0 "torch.float16 is not supported for quantization
  method gpt_oss_mxfp4", held-out seed 57119 on /models/shape-gqa-yarn). The weights are not read here.
- vllm-spec-draft-without-tokens-undecided: a draft model (--speculative-config model, --spec-model) without
  num_speculative_tokens. The release builds the draft's ModelConfig and takes the count from the draft config's
  n_predict; without one it refuses ("A speculative model was provided, but `num_speculative_tokens` was not
  provided"). The draft's config.json is not read by the product (only the target's), so the term is named.
tests/core/test_m11v_rules.py holds the lines; tests/engine_oracle/test_m11v_rules_oracle.py has each release judge
them.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.draft11_config import decides_draft_count
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.spec import auto_dtype, auto_runner_pooling, quant_method

DTYPE_UNDECIDED = "vllm-dtype-auto-quantization-undecided"
DRAFT_UNDECIDED = "vllm-spec-draft-without-tokens-undecided"

# ModelConfig's dtype (is_pooling_model from the runner), _resolve_auto_dtype, get_torch_dtype (config dtype, else the
# safetensors weights', else float32), and the quantization method's dtype check
_DTYPE_SOURCES = {
    "0.11.0": "vllm config/model.py:581,1610-1666@0.11.0, config/__init__.py:267-272@0.11.0",
    "0.28.0": "vllm config/model.py:731,2212-2231@0.28.0, transformers_utils/model_arch_config_convertor.py:220-258"
              "@0.28.0, config/vllm.py:781-787@0.28.0",
    "0.29.0": "vllm config/model.py:743,2268-2287@0.29.0, transformers_utils/model_arch_config_convertor.py:220-258"
              "@0.29.0, config/vllm.py:797-803@0.29.0",
    "0.33.0": "vllm config/model.py:810,2423-2442@0.33.0, transformers_utils/model_arch_config_convertor.py:201-239"
              "@0.33.0, config/vllm.py:937-943@0.33.0",
    "0.34.0": "vllm config/model.py:830,2467-2486@0.34.0, transformers_utils/model_arch_config_convertor.py:201-239"
              "@0.34.0, config/vllm.py:899-905@0.34.0",
}
# the draft's n_predict fills a missing count, else the refusal
_DRAFT_SOURCES = {
    "0.28.0": "vllm config/speculative.py:1066-1087@0.28.0",
    "0.29.0": "vllm config/speculative.py:1414-1435@0.29.0",
    "0.33.0": "vllm config/speculative.py:1597-1618@0.33.0",
    "0.34.0": "vllm v1/worker/gpu/spec_decode/speculator_config.py:222-227,275-283@0.34.0",
}
# methods that take no draft checkpoint (n-gram and suffix decoding): their counts are the other entries' matter
_NO_DRAFT = ("ngram", "[ngram]", "ngram_gpu", "suffix")


@rule(DTYPE_UNDECIDED, checked_by="product", family="args", severity="warning", engines=[ENGINE_VLLM],
      field="spec.model.dtype",
      title="--dtype auto with the pooling runner on a bfloat16-only quantization, config.json giving no dtype",
      why="With --dtype auto, vLLM takes config.json's dtype, else the safetensors weights' dtype, else float32; the "
          "pooling runner turns float32 into float16, which MXFP4 refuses. config.json gives no dtype here and the "
          "weights are not read, so the dtype is not decided from the line.",
      fix="Set --dtype bfloat16 (what the quantization method runs in), or give a config.json with its dtype.",
      source=_DTYPE_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _DTYPE_SOURCES.items()})
def check_vllm_dtype_auto_quantization_undecided(r, c):
    table = r.trait("quant_act_dtypes") or {}
    q = quant_method(r, table)
    d = r.spec.model.dtype
    if not q or q not in table or "float16" in table[q] or (d and d != "auto") or not auto_runner_pooling(r):
        return
    dt, term = auto_dtype(r)
    if dt is not None:
        return      # decided: rule dtype-vs-quantization
    yield None, (f"--dtype auto with --runner pooling on quantization method {q} (runs in {', '.join(table[q])}): "
                 f"{term}; float32 there becomes float16, which {q} refuses")


def _given(v, dest: str):
    try:
        return v.value(dest) if v.given(dest) else None
    except (KeyError, AttributeError):
        return None


def draft_without_count(r) -> tuple[str, str] | None:
    """(the draft as the line names it, how) for a line that gives a draft checkpoint but no num_speculative_tokens."""
    v = line_view(r)
    if v is None:
        return None
    sc = _given(v, "speculative_config")
    sc = sc if isinstance(sc, dict) else {}
    model = sc.get("model") if sc.get("model") is not None else _given(v, "spec_model")
    count = sc.get("num_speculative_tokens") if sc.get("num_speculative_tokens") is not None \
        else _given(v, "spec_tokens")
    method = sc.get("method") if sc.get("method") is not None else _given(v, "spec_method")
    if model is None or count is not None or str(model) in _NO_DRAFT or str(method) in _NO_DRAFT:
        return None
    how = "--speculative-config model" if sc.get("model") is not None else "--spec-model"
    return str(model), how


@rule(DRAFT_UNDECIDED, checked_by="product", family="args", severity="warning", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="A draft model without num_speculative_tokens: the draft's config.json n_predict decides",
      why="Without num_speculative_tokens vLLM takes the count from the draft checkpoint's config (n_predict: MTP, "
          "Medusa, MLP-speculator drafts) and refuses the line when the draft has none ('A speculative model was "
          "provided, but `num_speculative_tokens` was not provided'). Warned where the draft's config.json was not "
          "read (not a local directory holding a readable one) or its model type is left undecided; a read one "
          "decides (vllm-spec-draft-without-n-predict, core/rules/vllm_checks_draft11.py).",
      fix="Give num_speculative_tokens (--spec-tokens, or the key in --speculative-config) with the draft model.",
      source=_DRAFT_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _DRAFT_SOURCES.items()})
def check_vllm_spec_draft_without_tokens_undecided(r, c):
    got = draft_without_count(r)
    if got is None or decides_draft_count(r):   # the draft's config.json was read: vllm_checks_draft11.py decides
        return
    model, how = got
    d = getattr(r, "draft_arch", None)
    if d is not None:   # a config.json there that could not be read, or a model type the rules leave undecided
        yield None, (f"{how} {model!r} without num_speculative_tokens: the count is the draft config's n_predict; "
                     f"{d.source} does not decide it here; a draft without n_predict is refused")
        return
    yield None, (f"{how} {model!r} without num_speculative_tokens: the count is the draft config's n_predict, which "
                 "is not read here; a draft without n_predict is refused")


# apply to the releases their sources name (registry.ReleaseRule)
for _rid in (DTYPE_UNDECIDED, DRAFT_UNDECIDED):
    RULES[_rid] = ReleaseRule.of(RULES[_rid])
