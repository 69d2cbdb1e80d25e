"""The draft checkpoint's config.json as the rules read it (helper draft11): ``Resolved.draft_arch``, read once at the
CLI edge (cli/model_source.py draft_arch_for, through core/model_config.py). No file is read here."""
from __future__ import annotations

# draft model_types whose Transformers config class sets no n_predict and whose draft is not converted into an MTP
# one (the convertors of transformers_utils/model_arch_config_convertor.py and the configs/ that read or set
# n_predict are left to the warning): the oracle judges a llama-type draft without n_predict refused on 0.28.0,
# 0.29.0, 0.33.0 and 0.34.0 (tests/engine_oracle/test_draft11_oracle.py)
PLAIN_TYPES = ("llama",)


def read_draft(r) -> dict | None:
    """The draft's config.json as written (a dict) where it was read, else None."""
    d = getattr(r, "draft_arch", None)
    raw = getattr(d, "raw", None) if d is not None else None
    return raw if isinstance(raw, dict) else None


def decides_draft_count(r) -> bool:
    """The draft's config.json decides the count of a line that gives none: read, and either giving n_predict or of
    a plain model type (PLAIN_TYPES)."""
    raw = read_draft(r)
    return raw is not None and (raw.get("n_predict") is not None or raw.get("model_type") in PLAIN_TYPES)
