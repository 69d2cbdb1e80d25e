"""vLLM rules the draft checkpoint's own config.json decides (helper draft11).

The draft's config.json is read once at the CLI edge (cli/model_source.py draft_arch_for, through the one reader
core/model_config.py) and carried as ``Resolved.draft_arch``; these rules read only that object (no file here).

- vllm-spec-draft-without-n-predict: a draft model (--speculative-config model, --spec-model) given without
  num_speculative_tokens, whose config.json was read and gives no n_predict: the release refuses ("A speculative
  model was provided, but `num_speculative_tokens` was not provided"). Decided only for draft model types whose
  config class neither defaults n_predict nor is converted into an MTP draft (core/rules/draft11_config.py PLAIN_TYPES, verified by
  tests/engine_oracle/test_draft11_oracle.py); other drafts keep vllm-spec-draft-without-tokens-undecided's warning.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.draft11_config import PLAIN_TYPES, read_draft
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.vllm_checks_m11v import _DRAFT_SOURCES, draft_without_count

DRAFT_NO_N_PREDICT = "vllm-spec-draft-without-n-predict"


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


RULES[DRAFT_NO_N_PREDICT] = ReleaseRule.of(RULES[DRAFT_NO_N_PREDICT])
