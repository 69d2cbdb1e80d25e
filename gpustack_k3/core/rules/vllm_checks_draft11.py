"""vLLM rules the draft checkpoint's own config.json decides (helper draft11).

The draft's config.json is read once at the CLI edge (cli/model_source.py draft_arch_for, through the one reader
core/model_config.py) and carried as ``Resolved.draft_arch``; these rules read only that object (no file here).

- vllm-spec-draft-without-n-predict: a draft model (--speculative-config model, --spec-model) given without
  num_speculative_tokens, whose config.json was read and gives no n_predict: the release refuses ("A speculative
  model was provided, but `num_speculative_tokens` was not provided"). Decided only for draft model types whose
  config class neither defaults n_predict nor is converted into an MTP draft (core/rules/draft11_config.py PLAIN_TYPES, verified by
  tests/engine_oracle/test_draft11_oracle.py); other drafts keep vllm-spec-draft-without-tokens-undecided's warning.
- vllm-spec-draft-vocab-differs: method draft_model (given; an inferred one is not told apart from a given mtp in
  the document, core/flags.py, so it stays undecided) with a read draft of a plain
  model type whose vocab_size differs from the target's: SpeculativeConfig.verify_equal_vocab_size_if_draft_model
  refuses ("Target and draft model should have the same vocabulary size"); on 0.28.0-0.33.0 only without
  use_heterogeneous_vocab (0.34.0 has no such option: its parser refuses the key). Drafts whose path or
  architectures make the release detect another method are left alone.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.draft11_config import PLAIN_TYPES, read_draft
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.vllm_checks_m11v import _DRAFT_SOURCES, _given, draft_without_count

DRAFT_NO_N_PREDICT = "vllm-spec-draft-without-n-predict"
VOCAB_DIFFERS = "vllm-spec-draft-vocab-differs"
_VOCAB_SOURCES = {
    "0.28.0": "vllm config/speculative.py:1399-1400,1403-1418@0.28.0",
    "0.29.0": "vllm config/speculative.py:1765-1766,1769-1784@0.29.0",
    "0.33.0": "vllm config/speculative.py:2036-2037,2040-2055@0.33.0",
    "0.34.0": "vllm config/speculative.py:1722,1725-1740@0.34.0, v1/worker/gpu/spec_decode/speculator_config.py:302"
              "@0.34.0, v1/worker/gpu/spec_decode/standalone_ar/config.py:8-15@0.34.0",
}
# what in the draft's path or architectures makes the release detect a method other than draft_model
_OTHER_METHOD = ("eagle", "dflash", "dspark", "mtp", "medusa", "speculator", "assistant", "glimmer")


@rule(DRAFT_NO_N_PREDICT, checked_by="product", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs", no_cel="reads the draft checkpoint's config.json (read at the CLI edge); left to validate",
      title="A draft model without num_speculative_tokens whose config.json gives no n_predict",
      why="Without num_speculative_tokens vLLM takes the count from the draft checkpoint's config (n_predict) and "
          "refuses the line when the draft has none ('A speculative model was provided, but "
          "`num_speculative_tokens` was not provided'). The draft's config.json was read and gives none.",
      fix="Give num_speculative_tokens (--spec-tokens, or the key in --speculative-config) with the draft model.",
      source=_DRAFT_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _DRAFT_SOURCES.items()})
def check_vllm_spec_draft_without_n_predict(r, c):
    got = draft_without_count(r)
    raw = read_draft(r)
    if got is None or raw is None or raw.get("n_predict") is not None or raw.get("model_type") not in PLAIN_TYPES:
        return
    model, how = got
    yield None, (f"{how} {model!r} without num_speculative_tokens: the draft's config.json "
                 f"({r.draft_arch.source}, model_type {raw.get('model_type')}) gives no n_predict to take the count "
                 "from")


@rule(VOCAB_DIFFERS, checked_by="product", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs", no_cel="reads the draft checkpoint's config.json (read at the CLI edge); left to validate",
      title="A draft_model draft whose vocab_size differs from the target's",
      why="With method draft_model vLLM checks that the draft and the target have the same vocabulary size (a draft "
          "with another tokenizer would index out of bounds) and refuses the line otherwise ('Target and draft "
          "model should have the same vocabulary size'); 0.28.0-0.33.0 skip the check with use_heterogeneous_vocab.",
      fix="Give a draft with the target's tokenizer (the same vocab_size), or on 0.28.0-0.33.0 set "
          "use_heterogeneous_vocab true in --speculative-config.",
      source=_VOCAB_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _VOCAB_SOURCES.items()})
def check_vllm_spec_draft_vocab_differs(r, c):
    raw = read_draft(r)
    v = line_view(r)
    sc = _given(v, "speculative_config") if v is not None and raw is not None else None
    if not isinstance(sc, dict) or raw.get("model_type") not in PLAIN_TYPES:
        return
    method = sc.get("method") if sc.get("method") is not None else _given(v, "spec_method")
    # only a method given as draft_model: the document names an absent method mtp (core/flags.py), and a line that
    # gives mtp with such a draft is accepted by 0.34.0 (so an inferred draft_model stays undecided here)
    if method != "draft_model":
        return
    model = sc.get("model")
    archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    named = " ".join([str(model)] + [str(a) for a in archs]).lower()
    if not isinstance(model, str) or "/" not in model or any(n in named for n in _OTHER_METHOD):
        return
    if r.version.key != "0.34.0" and sc.get("use_heterogeneous_vocab") is True:
        return
    target = getattr(r.model_arch, "vocab_size", None) if r.model_arch is not None else None
    draft = getattr(r.draft_arch, "vocab_size", None)
    if not isinstance(target, int) or not isinstance(draft, int) or target == draft:
        return
    yield None, (f"--speculative-config model {model!r} (method draft_model): the draft's vocab_size {draft} "
                 f"({r.draft_arch.source}) differs from the target's {target} ({r.model_arch.source}); give a draft "
                 "with the target's tokenizer" + ("" if r.version.key == "0.34.0"
                                                  else ", or set use_heterogeneous_vocab true"))


for _rid in (DRAFT_NO_N_PREDICT, VOCAB_DIFFERS):
    RULES[_rid] = ReleaseRule.of(RULES[_rid])
