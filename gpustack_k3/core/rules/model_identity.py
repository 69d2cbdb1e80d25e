"""One model per document: ``spec.model.name`` (a label that picks the catalog's figures) must not contradict what the
engine is given to serve (``spec.model.source``) or to draft with (``spec.speculative.draftModel``).

The engine never sees ``model.name``: vLLM serves its positional model (``vllm serve MODEL``, vllm
entrypoints/cli/serve.py@0.33.0) and SGLang its ``--model-path``; the draft is ``--speculative-config
{"model": ...}`` / ``--speculative-draft-model-path``. So when the source or the draft is another catalog model's
own, every figure the tool derives from the name (plan, rules, prediction, the GPUStack hub) describes a model that
does not run. Matching is exact, on the catalog's ids (models.yaml ``source_id``; a draft's ``config_name``,
``modelscope`` and ``path``), as the CRD's CEL matches them. A draft of another catalog model is a warning
(``model-draft-of-another-model``): the engines accept any draft at start-up, so refusing would refuse what they
accept.
"""
from __future__ import annotations

from gpustack_k3.core.rules.cel import lit
from gpustack_k3.core.rules.registry import ENGINES, rule

RULE_ID = "model-name-contradicts-source"
DRAFT_RULE_ID = "model-draft-of-another-model"


def _draft_ids(cat, engine: str) -> dict[str, list[str]]:
    """catalog model -> the ids of its draft for ``engine`` (config name, ModelScope id, path)."""
    out: dict[str, list[str]] = {}
    for key, m in cat.models.items():
        fig = m.engines.get(engine)
        if fig is not None and fig.draft is not None:
            out[key] = sorted({fig.draft.config_name, fig.draft.modelscope, fig.draft.path})
    return out


def _owner(ids: dict[str, list[str]], value: str | None) -> str | None:
    return next((k for k, v in ids.items() if value is not None and value in v), None)


def _identity_cel(b) -> str | None:
    cat = b.catalog
    name = b.dim("model")
    named = f"{name} in {lit(list(cat.models))}"
    bad = []
    for key, m in cat.models.items():
        bad.append(f"({b.present('model.source')} && {b.ref('model.source')} == {lit(m.source_id)} && "
                   f"{named} && {name} != {lit(key)})")
    return "(" + " || ".join(bad) + ")" if bad else None


@rule(RULE_ID, checked_by="product", family="spec", severity="error", engines=ENGINES, field="spec.model.name",
      title="The model's name contradicts the model the engine serves",
      why="The engine serves spec.model.source; spec.model.name is a label the tool reads its figures by. When the "
          "source is another catalog model's, the plan, the rules and the prediction describe a model that does "
          "not run.",
      fix="Set spec.model.name to the catalog model the source belongs to (the message names it), or give the "
          "source of the model you name.",
      source="gpustack_k3/catalog/data/models.yaml (source_id, engines.*.draft); vllm entrypoints/cli/serve.py@0.33.0 "
             "(the positional model is what is served)",
      cel=_identity_cel)
def check_model_name_contradicts_source(r, c):
    cat, name = r.catalog, r.spec.model.name
    if name not in cat.models:
        return
    source = r.spec.model.source
    owner = next((k for k, m in cat.models.items() if source is not None and m.source_id == source), None)
    if owner is not None and owner != name:
        yield ("spec.model.name", f"spec.model.name {name!r} but spec.model.source {source!r} is catalog model "
               f"{owner!r}: the engine serves the source, and {name!r}'s figures are not its",
               f"Set spec.model.name to {owner!r}, or spec.model.source to {cat.models[name].source_id!r}.")


@rule(DRAFT_RULE_ID, checked_by="product", family="spec", severity="warning", engines=ENGINES,
      field="spec.speculative.draftModel",
      title="The draft is another catalog model's draft",
      why="A draft drafts for its own target: with another target its tokens are rarely accepted (or its vocabulary "
          "does not match, which fails at the first request). The engines do not check this at start-up (vLLM's "
          "SpeculativeConfig and SGLang's server args accept any draft path), so it warns rather than refuses.",
      fix="Give the draft of the model you serve (or no draft), or set spec.model.name to the draft's target.",
      source="gpustack_k3/catalog/data/models.yaml (engines.*.draft); vllm config/speculative.py@0.33.0 (no "
             "target/draft identity check)")
def check_draft_of_another_model(r, c):
    name = r.spec.model.name
    if name not in r.catalog.models:
        return
    draft = r.spec.speculative.draftModel
    owner = _owner(_draft_ids(r.catalog, r.engine.engine), draft)
    if owner is not None and owner != name:
        yield ("spec.speculative.draftModel", f"spec.speculative.draftModel {draft!r} is the draft of catalog model "
               f"{owner!r}, but spec.model.name is {name!r}: a draft drafts for its own target model",
               f"Set spec.model.name to {owner!r}, or give the draft of {name!r} (or no draft).")
